// Package verify proves a final object intact the way a reader without ferry
// would, and the way ferry's own restore does: it downloads the object as
// stored (checked against GCS's CRC32C), decompresses that copy with
// internal/restore (the codec is the object's ferry-codec metadata; sizes
// and CRC32Cs are checked against its metadata) and with the stock CLI
// (zstd -d, gzip -d), and compares both with the source file.
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

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/restore"
)

// ErrMismatch: the object does not hold the source's bytes.
var ErrMismatch = errors.New("object differs from source")

// objectStore is what verification needs of GCS.
type objectStore interface {
	Attrs(ctx context.Context, bucket, name string) (gcs.Attrs, error)
	NewRangeReader(ctx context.Context, bucket, name string, offset, length int64) (io.ReadCloser, error)
}

var _ objectStore = (*gcs.Store)(nil)

// Report is what was checked of one object.
type Report struct {
	Object     string
	Codec      codec.Codec // from the object's metadata
	RawSize    int64
	WireSize   int64
	RawCRC32C  uint32
	WireCRC32C uint32 // what GCS stores and shows
	// CLI names the stock tool that also decompressed it, or "" when none
	// applies (codec none) or it is not installed.
	CLI string
}

// Object checks gs://bucket/name against the file at source. The codec is
// the object's ferry-codec metadata; when c is not empty, the object must
// say c.
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
	if rep.Codec, err = codec.Parse(a.Metadata[message.MetaCodec]); err != nil {
		return rep, fmt.Errorf("%s: metadata %s: %w", rep.Object, message.MetaCodec, err)
	}
	if c != "" && rep.Codec != c {
		return rep, fmt.Errorf("%s: metadata %s=%s, want %s: %w", rep.Object, message.MetaCodec, rep.Codec, c, ErrMismatch)
	}

	dir, err := os.MkdirTemp("", "ferry-verify-*")
	if err != nil {
		return rep, err
	}
	defer os.RemoveAll(dir)
	root, err := os.OpenRoot(dir)
	if err != nil {
		return rep, err
	}
	defer root.Close()

	// The bytes as stored, in parallel ranges checked against GCS's CRC32C.
	stored, err := restore.New(store{s}, restore.Options{AsStored: true})
	if err != nil {
		return rep, err
	}
	if _, err := stored.Object(ctx, root, "wire", bucket, a); err != nil {
		return rep, err
	}
	// Restore's decoder, reading that copy: frames in parallel when the
	// object has a seek table, checked against the metadata.
	wire, err := os.Open(root.Name() + "/wire")
	if err != nil {
		return rep, err
	}
	defer wire.Close()
	dec, err := restore.New(local{a: a, f: wire}, restore.Options{})
	if err != nil {
		return rep, err
	}
	res, err := dec.Object(ctx, root, "raw", bucket, a)
	if err != nil {
		return rep, err
	}
	rep.RawSize, rep.RawCRC32C = res.RawSize, res.RawCRC32C
	got, _, err := hashFile(root.Name() + "/raw")
	if err != nil {
		return rep, err
	}
	if rep.RawSize != wantSize || !bytes.Equal(got, want) {
		return rep, fmt.Errorf("%s: decompresses to %d bytes that differ from %s (%d bytes): %w", rep.Object, rep.RawSize, source, wantSize, ErrMismatch)
	}

	// The stock tool, as a reader without ferry has it.
	tool := map[codec.Codec]string{codec.Zstd: "zstd", codec.Gzip: "gzip"}[rep.Codec]
	if tool == "" {
		return rep, nil
	}
	if _, err := exec.LookPath(tool); err != nil {
		return rep, nil
	}
	cmd := exec.CommandContext(ctx, tool, "-d", "-c", wire.Name())
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

// Find returns the final object of a file whose object name without codec
// extension is base: base.zst, base.gz or base, whichever exists with
// ferry metadata naming that codec.
func Find(ctx context.Context, s objectStore, bucket, base string) (string, error) {
	for _, c := range []codec.Codec{codec.Zstd, codec.Gzip, codec.None} {
		a, err := s.Attrs(ctx, bucket, base+c.Ext())
		if errors.Is(err, gcs.ErrNotFound) {
			continue
		}
		if err != nil {
			return "", err
		}
		if a.Metadata[message.MetaCodec] == string(c) {
			return a.Name, nil
		}
	}
	return "", fmt.Errorf("gs://%s/%s: no ferry object (.zst, .gz or plain) for it: %w", bucket, base, gcs.ErrNotFound)
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

// store adapts objectStore to restore.Store; verification lists nothing.
type store struct{ objectStore }

func (store) List(context.Context, string, string, func(gcs.Attrs) error) error {
	return errors.New("verify: listing is not supported")
}

// local serves one object's ranges from its downloaded copy.
type local struct {
	a gcs.Attrs
	f *os.File
}

func (l local) Attrs(context.Context, string, string) (gcs.Attrs, error) { return l.a, nil }

func (l local) NewRangeReader(_ context.Context, _, _ string, off, n int64) (io.ReadCloser, error) {
	return io.NopCloser(io.NewSectionReader(l.f, off, n)), nil
}

func (local) List(context.Context, string, string, func(gcs.Attrs) error) error {
	return errors.New("verify: listing is not supported")
}

var (
	_ restore.Store = store{}
	_ restore.Store = local{}
)

// Source is one source file and the name of its final object without the
// codec's extension, as producer submit names it (plan.Resolve).
type Source struct {
	Path, Base string
}

// Totals is what Transfer checked.
type Totals struct {
	Objects   int
	Raw, Wire int64
	// CLIs counts the objects each stock tool also decompressed.
	CLIs map[string]int
}

// Transfer checks the final object of every source in bucket, in order,
// calling each (when not nil) with its report, and stops at the first
// object that is missing or differs.
func Transfer(ctx context.Context, s objectStore, bucket string, sources []Source, each func(Source, Report)) (Totals, error) {
	t := Totals{CLIs: map[string]int{}}
	for _, src := range sources {
		name, err := Find(ctx, s, bucket, src.Base)
		if err != nil {
			return t, fmt.Errorf("source %s: %w", src.Path, err)
		}
		rep, err := Object(ctx, s, bucket, name, "", src.Path)
		if err != nil {
			return t, err
		}
		t.Objects++
		t.Raw += rep.RawSize
		t.Wire += rep.WireSize
		t.CLIs[rep.CLI]++
		if each != nil {
			each(src, rep)
		}
	}
	return t, nil
}
