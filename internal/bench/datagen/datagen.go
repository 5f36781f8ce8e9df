// Package datagen generates deterministic synthetic CSV files used to
// benchmark ferry uploads to Google Cloud Storage.
//
// The data mimics the "upload" files of ferry's reference notebook: daily
// OHLCV (open/high/low/close/volume) bars for a universe of 40 listed
// securities, one row per security per trading day (weekdays from 1990
// through 2024; longer outputs start the calendar over, with prices
// continuing their random walks). The generator is tuned
// so that the output compresses like the notebook's CSV (about 2.8x with
// zstd -3, 2.9x with gzip -6 and 1.6x with lz4) at every size, which keeps
// compression benchmarks honest: the data is statistically stationary, so a
// 10 MB prefix compresses like a 1.2 GB file.
//
// Output depends only on the requested size and seed: there is no clock,
// no map iteration and no floating point. All values are computed with
// integer arithmetic from a math/rand/v2 PCG generator, so the bytes are
// identical across runs, machines and CPU architectures (TestGolden pins
// them). A shorter output is a prefix of a longer one with the same seed.
package datagen

import (
	"fmt"
	"io"
	"math/bits"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
)

// Header is the first line of every generated file.
const Header = "date,symbol,isin,exchange,currency,open,high,low,close,adj_close,volume\n"

// Generator tuning. These constants set the compressibility of the output
// (measured ratios are in datagen_test.go); change them only together with
// re-measuring.
//
// The knobs work like this: the six-decimal prices and the volumes are
// effectively random digits, which entropy coders (gzip, zstd) squeeze about
// 2x but lz4 hardly at all. The date, which repeats on consecutive rows, and
// the per-security "symbol,isin,exchange,currency," prefix, which repeats
// every numTickers rows (about 3.5 KB back: gzip and zstd find it, lz4's small
// hash table mostly has forgotten it), are what lifts gzip and zstd to ~2.9x
// while keeping lz4 near 1.6x. More tickers lower lz4 faster than gzip.
const (
	numTickers    = 40           // securities in the universe
	presentPer64K = 63570        // chance (of 65536) that a security trades on a given day: 97 %
	adjustedPer64 = 58           // chance (of 64) that adj_close differs from close: 90 %
	revertQ24     = int64(33554) // daily pull of the price towards its base level: 0.2 % (Q24)
	minPriceMicro = int64(10_000)
	firstDay      = 7305  // 1990-01-01, in days since 1970-01-01
	lastDay       = 20088 // 2024-12-31; the calendar wraps to firstDay after it
	bufSize       = 1 << 20
	maxRowLen     = 512 // generous upper bound of one row's length
)

type exchange struct {
	name, currency, country string
}

var exchanges = [...]exchange{
	{"NYSE", "USD", "US"}, {"NASDAQ", "USD", "US"}, {"HKEX", "HKD", "HK"},
	{"SSE", "CNY", "CN"}, {"TSE", "JPY", "JP"}, {"EURONEXT", "EUR", "FR"},
	{"SZSE", "CNY", "CN"}, {"TSX", "CAD", "CA"}, {"NSE", "INR", "IN"},
	{"XETRA", "EUR", "DE"}, {"KRX", "KRW", "KR"}, {"SIX", "CHF", "CH"},
	{"TWSE", "TWD", "TW"}, {"JSE", "ZAR", "ZA"},
}

// ticker is one security of the universe and its random-walk state.
type ticker struct {
	prefix []byte // "SYM,ISIN,EXCHANGE,CUR,"
	base   int64  // long-run price level, micro-units
	price  int64  // last close, micro-units
	sigma  int64  // daily return scale (Q24 per unit of gauss())
	adj    int64  // adj_close = close*adj>>16 (adj == 1<<16: no dividends)
	volume int64  // typical daily volume
}

// gen is the row generator. Its output depends only on the PCG seed.
type gen struct {
	rng  *rand.PCG
	univ []ticker
	day  int64    // current trading day, days since 1970-01-01
	date [11]byte // "YYYY-MM-DD," for day
	next int      // next ticker index within day
}

func newGen(seed uint64, stream uint64) *gen {
	g := &gen{rng: rand.NewPCG(seed, 0x9e3779b97f4a7c15^stream)}
	g.univ = make([]ticker, numTickers)
	seen := make(map[string]bool, numTickers)
	for i := range g.univ {
		t := &g.univ[i]
		ex := &exchanges[g.intn(len(exchanges))]
		var sym string
		for sym == "" || seen[sym] {
			b := make([]byte, 2+g.intn(4))
			for j := range b {
				b[j] = byte('A' + g.intn(26))
			}
			sym = string(b)
		}
		seen[sym] = true
		p := append([]byte(sym), ',')
		p = appendISIN(p, ex.country, g)
		p = append(p, ',')
		p = append(p, ex.name...)
		p = append(p, ',')
		p = append(p, ex.currency...)
		t.prefix = append(p, ',')
		// Price levels are stratified over four decades (1.5 .. 15000) so
		// that the digit count, and so the compressibility, hardly depends
		// on the seed.
		t.base = (1_000_000 + int64(g.intn(9_000_000))) * 3 / 2 * pow10[i%4]
		t.price = t.base
		t.sigma = 2097 + int64(g.intn(5243)) // daily stddev 0.8 % .. 2.8 % (gauss() has stddev 64)
		t.adj = 1 << 16
		if g.intn(64) < adjustedPer64 {
			t.adj = 32768 + int64(g.intn(32768)) // cumulative dividend factor 0.5 .. 1
		}
		t.volume = (10_000 + int64(g.intn(90_000))) * pow10[g.intn(5)] // 10k .. 1G
	}
	g.setDay(firstDay)
	return g
}

var pow10 = [...]int64{1, 10, 100, 1000, 10000, 100000, 1000000}

func (g *gen) intn(n int) int {
	return int((g.rng.Uint64() >> 32) * uint64(n) >> 32)
}

// gauss returns an approximately normal integer with mean 0 and standard
// deviation ~64, using only integer operations.
func (g *gen) gauss() int64 {
	u, v := g.rng.Uint64(), g.rng.Uint64()
	return int64(bits.OnesCount64(u)-32)*16 + int64(v&15) - int64(v>>4&15)
}

func (g *gen) setDay(day int64) {
	for (day+3)%7 >= 5 { // skip Saturdays and Sundays; 1970-01-01 was a Thursday
		day++
	}
	if day > lastDay {
		day = firstDay
	}
	g.day = day
	y, m, d := civil(day)
	g.date = [11]byte{byte('0' + y/1000), byte('0' + y/100%10), byte('0' + y/10%10), byte('0' + y%10), '-',
		byte('0' + m/10), byte('0' + m%10), '-', byte('0' + d/10), byte('0' + d%10), ','}
}

// row appends the next row to b.
func (g *gen) row(b []byte) []byte {
	var t *ticker
	for t == nil {
		if g.next == len(g.univ) {
			g.next = 0
			g.setDay(g.day + 1)
		}
		if g.rng.Uint64()>>48 < presentPer64K {
			t = &g.univ[g.next]
		}
		g.next++
	}
	prev := t.price
	ret := g.gauss()*t.sigma + (t.base-prev)*revertQ24/prev
	c := max(prev+prev*ret>>24, minPriceMicro)
	t.price = c
	o := max(prev+prev*(g.gauss()*t.sigma*3/10)>>24, minPriceMicro)
	hi, lo := max(o, c), min(o, c)
	hi += hi * (abs(g.gauss()) * t.sigma / 2) >> 24
	lo -= lo * (abs(g.gauss()) * t.sigma / 2) >> 24
	lo = max(lo, minPriceMicro/2)

	b = append(b, g.date[:]...)
	b = append(b, t.prefix...)
	b = appendMicro(b, o)
	b = appendMicro(b, hi)
	b = appendMicro(b, lo)
	b = appendMicro(b, c)
	b = appendMicro(b, c*t.adj>>16)
	v := max(t.volume*(4096+g.gauss()*6)>>12, t.volume>>3)
	b = appendUint(b, uint64(v))
	return append(b, '\n')
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// appendMicro appends v/1e6 with exactly six decimals and a trailing comma.
func appendMicro(b []byte, v int64) []byte {
	b = appendUint(b, uint64(v/1_000_000))
	f := uint64(v % 1_000_000)
	return append(b, '.',
		byte('0'+f/100000), byte('0'+f/10000%10), byte('0'+f/1000%10),
		byte('0'+f/100%10), byte('0'+f/10%10), byte('0'+f%10), ',')
}

func appendUint(b []byte, v uint64) []byte {
	var tmp [20]byte
	i := len(tmp)
	for v >= 10 {
		i--
		tmp[i] = byte('0' + v%10)
		v /= 10
	}
	i--
	tmp[i] = byte('0' + v)
	return append(b, tmp[i:]...)
}

// appendISIN appends a random ISIN for country cc, with a valid check digit.
func appendISIN(b []byte, cc string, g *gen) []byte {
	const alnum = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	start := len(b)
	b = append(b, cc...)
	for range 9 {
		b = append(b, alnum[g.intn(len(alnum))])
	}
	// Luhn over the digit expansion (A=10 .. Z=35), rightmost digit doubled.
	var digits []byte
	for _, c := range b[start:] {
		if c >= 'A' {
			n := c - 'A' + 10
			digits = append(digits, n/10, n%10)
		} else {
			digits = append(digits, c-'0')
		}
	}
	sum := 0
	for i := range digits {
		d := int(digits[len(digits)-1-i])
		if i%2 == 0 {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
	}
	return append(b, byte('0'+(10-sum%10)%10))
}

// civil converts days since 1970-01-01 to a proleptic Gregorian date.
func civil(z int64) (y, m, d int64) {
	z += 719468
	era := z / 146097
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y = yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = doy - (153*mp+2)/5 + 1
	m = mp + 3
	if mp >= 10 {
		m = mp - 9
	}
	if m <= 2 {
		y++
	}
	return y, m, d
}

// writeRows writes Header and then rows from g to w until at least size
// bytes have been written, stopping at the first row boundary at or after
// size. It returns the number of bytes written.
func writeRows(w io.Writer, g *gen, size int64, buf []byte) (int64, error) {
	buf = append(buf[:0], Header...)
	var written int64
	for written+int64(len(buf)) < size {
		buf = g.row(buf)
		if len(buf) > cap(buf)-maxRowLen {
			n, err := w.Write(buf)
			written += int64(n)
			if err != nil {
				return written, err
			}
			buf = buf[:0]
		}
	}
	n, err := w.Write(buf)
	written += int64(n)
	return written, err
}

// WriteCSV writes a synthetic OHLCV CSV file to w: a header line followed by
// rows until at least size bytes have been written (the output ends at the
// first row boundary at or after size, so it overshoots by less than one
// row, about 90 bytes; a size not larger than the header yields just the
// header). It returns the number of bytes written. The output is a pure
// function of size and seed. Generation runs at about 1 GB/s on one core;
// WriteCSV buffers internally (1 MiB writes), so w need not be buffered.
func WriteCSV(w io.Writer, size int64, seed int64) (int64, error) {
	return writeRows(w, newGen(uint64(seed), 0), size, make([]byte, 0, bufSize))
}

// WriteManySmall writes n CSV files named part-00000.csv, part-00001.csv, …
// into dir, creating dir if needed. Each file has a header and about each
// bytes of rows. The files continue one another: together they hold
// consecutive rows of the single stream for seed, so every file has
// different content. The result is deterministic for (n, each, seed).
func WriteManySmall(dir string, n int, each int64, seed int64) error {
	if n < 0 {
		return fmt.Errorf("negative file count %d", n)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	g := newGen(uint64(seed), 1)
	buf := make([]byte, 0, bufSize)
	for i := range n {
		name := filepath.Join(dir, fmt.Sprintf("part-%05d.csv", i))
		f, err := os.Create(name)
		if err != nil {
			return err
		}
		_, err = writeRows(f, g, each, buf)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// Tier is a named benchmark file size.
type Tier struct {
	Name string
	Size int64
}

// Tiers are the standard benchmark sizes, smallest first.
var Tiers = []Tier{
	{"small", 10_000_000},
	{"medium", 200_000_000},
	{"large", 1_200_000_000},
}

// TierByName returns the tier called name. The error for an unknown name
// quotes it and lists the valid names, e.g.
// `"huge": unknown tier (want small, medium or large)`.
func TierByName(name string) (Tier, error) {
	for _, t := range Tiers {
		if t.Name == name {
			return t, nil
		}
	}
	return Tier{}, fmt.Errorf("%q: unknown tier (want %s)", name, tierNames())
}

func tierNames() string {
	names := make([]string, len(Tiers))
	for i, t := range Tiers {
		names[i] = t.Name
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
