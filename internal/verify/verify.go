// Package verify proves a final object intact the way a reader without ferry
// would: it downloads the object, decompresses it with Go and with the stock
// CLI (zstd -d, gzip -d), and compares the bytes with the source file, along
// with the CRC32C ferry recorded in the object's metadata.
package verify

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
)

// ErrMismatch: the object does not hold the source's bytes.
var ErrMismatch = errors.New("object differs from source")

// objectStore is what verification needs of GCS.
type objectStore interface {
	Attrs(ctx context.Context, bucket, name string) (gcs.Attrs, error)
	NewReader(ctx context.Context, bucket, name string) (io.ReadCloser, error)
}

// Report is what was checked of one object.
type Report struct {
	Object     string
	RawSize    int64
	WireSize   int64
	RawCRC32C  uint32
	WireCRC32C uint32 // what GCS stores and shows
	// CLI names the stock tool that also decompressed it, or "" when none
	// applies (codec none) or it is not installed.
	CLI string
}

// Object checks gs://bucket/name against the file at source.
func Object(ctx context.Context, s objectStore, bucket, name string, c codec.Codec, source string) (Report, error) {
	rep := Report{Object: "gs://" + bucket + "/" + name}
	want, wantSize, err := hashFile(source)
	if err != nil {
		return rep, err
	}
	a, err := s.Attrs(ctx, bucket, name)
	if err != nil {
		return rep, err
	}
	rep.WireSize, rep.WireCRC32C = a.Size, a.CRC32C
	tmp, err := os.CreateTemp("", "ferry-verify-*")
	if err != nil {
		return rep, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	r, err := s.NewReader(ctx, bucket, name)
	if err != nil {
		return rep, err
	}
	wire := crc32c.New()
	n, err := io.Copy(io.MultiWriter(tmp, wire), r)
	r.Close()
	if err != nil {
		return rep, fmt.Errorf("download %s: %w", rep.Object, err)
	}
	if n != a.Size || wire.Sum32() != a.CRC32C {
		return rep, fmt.Errorf("%s: downloaded %d bytes with crc32c %s, GCS says %d bytes with %s: %w", rep.Object, n, crc32c.Base64(wire.Sum32()), a.Size, crc32c.Base64(a.CRC32C), ErrMismatch)
	}

	// Go's decoder.
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return rep, err
	}
	dec, err := codec.NewReader(c, tmp)
	if err != nil {
		return rep, fmt.Errorf("%s: %w", rep.Object, err)
	}
	sum, crc := sha256.New(), crc32c.New()
	rep.RawSize, err = io.Copy(io.MultiWriter(sum, crc), dec)
	dec.Close()
	if err != nil {
		return rep, fmt.Errorf("%s: decompress: %w", rep.Object, err)
	}
	rep.RawCRC32C = crc.Sum32()
	if rep.RawSize != wantSize || !bytes.Equal(sum.Sum(nil), want) {
		return rep, fmt.Errorf("%s: decompresses to %d bytes that differ from %s (%d bytes): %w", rep.Object, rep.RawSize, source, wantSize, ErrMismatch)
	}
	if m := a.Metadata[message.MetaRawCRC32C]; m != fmt.Sprintf("%08x", rep.RawCRC32C) {
		return rep, fmt.Errorf("%s: metadata %s=%s, the bytes have %08x: %w", rep.Object, message.MetaRawCRC32C, m, rep.RawCRC32C, ErrMismatch)
	}
	if m := a.Metadata[message.MetaRawSize]; m != strconv.FormatInt(rep.RawSize, 10) {
		return rep, fmt.Errorf("%s: metadata %s=%s, the bytes are %d: %w", rep.Object, message.MetaRawSize, m, rep.RawSize, ErrMismatch)
	}

	// The stock tool, as a reader without ferry has it.
	tool := map[codec.Codec]string{codec.Zstd: "zstd", codec.Gzip: "gzip"}[c]
	if tool == "" {
		return rep, nil
	}
	if _, err := exec.LookPath(tool); err != nil {
		return rep, nil
	}
	cmd := exec.CommandContext(ctx, tool, "-d", "-c", tmp.Name())
	h := sha256.New()
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = h, &stderr
	if err := cmd.Run(); err != nil {
		return rep, fmt.Errorf("%s: %s -d: %v: %s", rep.Object, tool, err, stderr.String())
	}
	if !bytes.Equal(h.Sum(nil), want) {
		return rep, fmt.Errorf("%s: %s -d output differs from %s: %w", rep.Object, tool, source, ErrMismatch)
	}
	rep.CLI = tool
	return rep, nil
}

func hashFile(path string) ([]byte, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	return h.Sum(nil), n, err
}
