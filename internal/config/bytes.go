package config

import (
	"fmt"
	"strconv"
	"strings"
)

// Bytes is a byte count written as a plain number or with a binary or decimal
// unit: 262144, 256KiB, 32MiB, 1GiB, 10MB, 100kB, 1_000_000. (ferry prints
// sizes in decimal units, MB = 10^6 bytes, as gcloud and GCS's console do;
// it accepts both.)
type Bytes int64

var units = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"kB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30},
	{"B", 1},
}

// ParseBytes parses a byte count; the error names s.
func ParseBytes(s string) (Bytes, error) {
	t := strings.ReplaceAll(strings.TrimSpace(s), "_", "")
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a byte count (like 262144, 256KiB or 32MiB)", s)
	}
	if n < 0 {
		return 0, fmt.Errorf("%q is negative", s)
	}
	if n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return Bytes(n * mult), nil
}

// EnvDecode implements envconfig.Decoder.
func (b *Bytes) EnvDecode(s string) error {
	v, err := ParseBytes(s)
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// Set implements flag.Value.
func (b *Bytes) Set(s string) error { return b.EnvDecode(s) }

// Type implements pflag.Value.
func (b *Bytes) Type() string { return "bytes" }

// String implements flag.Value: the value in the largest binary unit that
// divides it, as the defaults are written.
func (b Bytes) String() string {
	v := int64(b)
	for _, u := range []struct {
		s string
		m int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if v != 0 && v%u.m == 0 {
			return strconv.FormatInt(v/u.m, 10) + u.s
		}
	}
	return strconv.FormatInt(v, 10)
}
