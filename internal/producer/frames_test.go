package producer

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/plan"
	"github.com/ferry-dev/ferry/internal/seektable"
	"github.com/ferry-dev/ferry/internal/spool/spooltest"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// runEncoders starts n frame encoders for a test and stops them at its end.
func runEncoders(t *testing.T, n int, c codec.Codec) chan<- frameJob {
	t.Helper()
	jobs := make(chan frameJob)
	done := make(chan struct{})
	for range n {
		encs, err := newFrameEncoders(c, []int{c.DefaultLevel()})
		if err != nil {
			t.Fatal(err)
		}
		go func() { runFrameEncoder(c, encs, jobs); done <- struct{}{} }()
	}
	t.Cleanup(func() {
		close(jobs)
		for range n {
			<-done
		}
	})
	return jobs
}

// TestChunkEncoderCutsFramesWithTheirCRCs: each piece becomes frames of at
// most codec.FrameSize raw bytes (an empty piece one empty frame) that
// decompress, concatenated, to the piece; each frame's CRC32Cs are those of
// its raw and wire bytes.
func TestChunkEncoderCutsFramesWithTheirCRCs(t *testing.T) {
	jobs := runEncoders(t, 2, codec.Zstd)
	enc := newChunkEncoder(context.Background(), jobs)
	pieces := [][]byte{bytes.Repeat([]byte("ferry,"), (codec.FrameSize+100)/6), nil, []byte("one small file")}
	out, err := enc.Encode(pieces, codec.Zstd.DefaultLevel())
	if err != nil {
		t.Fatal(err)
	}
	wantFrames := []int{2, 1, 1}
	for i, frames := range out {
		if len(frames) != wantFrames[i] {
			t.Fatalf("piece %d: %d frames, want %d", i, len(frames), wantFrames[i])
		}
		var wire []byte
		raw := 0
		for _, f := range frames {
			if f.wireCRC != crc32c.Checksum(f.wire) || f.raw > codec.FrameSize {
				t.Fatalf("piece %d: frame of %d raw bytes, wire crc %08x for bytes with %08x", i, f.raw, f.wireCRC, crc32c.Checksum(f.wire))
			}
			if f.rawCRC != crc32c.Checksum(pieces[i][raw:raw+f.raw]) {
				t.Fatalf("piece %d: raw crc32c of a frame is wrong", i)
			}
			raw += f.raw
			wire = append(wire, f.wire...)
		}
		if got := decompress(t, codec.Zstd, wire); !bytes.Equal(got, pieces[i]) {
			t.Fatalf("piece %d: frames decompress to %d bytes, want %d", i, len(got), len(pieces[i]))
		}
	}
}

// TestOneChunkZstdPayloadEndsWithItsSeekTable: a one-chunk file's payload
// is a complete final object: its frames, then a seek table listing them.
// The part's wire size and CRC32C cover the table; Go's decoder and the
// stock zstd CLI read the payload back to the source bytes.
func TestOneChunkZstdPayloadEndsWithItsSeekTable(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "f.csv")
	testutil.WriteCSV(t, src, codec.FrameSize+300_000, 1) // two frames
	pl, err := plan.New(plan.Spec{Sources: []string{src}, Destination: "gs://bkt/p", ChunkSize: 8 << 20}, plan.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(src)
	c := &compressor{enc: newChunkEncoder(context.Background(), runEncoders(t, 2, codec.Zstd)), pl: pl, tid: "t1"}
	parts, err := c.compress(job{pieces: []piece{{f: &pl.Files[0], raw: raw, chunks: 1}}}, 3)
	if err != nil {
		t.Fatal(err)
	}
	p := parts[0]
	payload := bytes.Join(p.segs, nil)
	if int64(len(payload)) != p.part.WireSize || crc32c.Checksum(payload) != p.part.WireCRC32C || p.part.RawCRC32C != crc32c.Checksum(raw) {
		t.Fatalf("part says %d bytes crc %08x raw crc %08x; payload has %d bytes crc %08x, source crc %08x",
			p.part.WireSize, p.part.WireCRC32C, p.part.RawCRC32C, len(payload), crc32c.Checksum(payload), crc32c.Checksum(raw))
	}
	size, err := seektable.TableSize(payload)
	if err != nil {
		t.Fatal(err)
	}
	frames, err := seektable.Parse(payload[int64(len(payload))-size:])
	if err != nil || len(frames) != 2 || frames[0].Raw != codec.FrameSize || int(frames[0].Raw+frames[1].Raw) != len(raw) ||
		int64(frames[0].Wire+frames[1].Wire)+size != int64(len(payload)) {
		t.Fatalf("seek table %v (%v) does not describe the payload", frames, err)
	}
	if !p.part.Final || p.part.Metadata["ferry-mtime"] == "" {
		t.Fatalf("part %+v: want a final object with its source mtime", p.part)
	}
	if got := decompress(t, codec.Zstd, payload); !bytes.Equal(got, raw) {
		t.Fatal("payload does not decompress to the source")
	}
	if zstd, err := exec.LookPath("zstd"); err == nil {
		obj := filepath.Join(dir, "f.csv.zst")
		testutil.OK(t, os.WriteFile(obj, payload, 0o644))
		out, err := exec.Command(zstd, "-d", "-c", obj).Output()
		if err != nil || !bytes.Equal(out, raw) {
			t.Fatalf("stock zstd -d: %v, %d bytes, want %d", err, len(out), len(raw))
		}
	}
}

// TestFailedSubmitLeavesNoGoroutine: when a stage fails (a publish, a
// spool write) or the caller cancels, Submit returns only after every
// goroutine of the pipeline, frame encoders included, has stopped.
func TestFailedSubmitLeavesNoGoroutine(t *testing.T) {
	src := filepath.Join(t.TempDir(), "f.csv")
	testutil.WriteCSV(t, src, 3<<20, 1)
	failing := &teststack.Recorder{Err: errors.New("topic gone")}
	full := spooltest.NewMem()
	full.FailAt, full.Err = 2, errors.New("no space left on device")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		o    Options
		want string
	}{
		{"publish fails", context.Background(), Options{Chunks: failing}, "topic gone"},
		{"spool fails", context.Background(), Options{Chunks: nopPublisher{}, Spool: full}, "no space left"},
		{"cancelled", ctx, Options{Chunks: nopPublisher{}}, "context canceled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			o.Store, o.Events, o.SpoolDir, o.Concurrency, o.MemoryLimit, o.FailGrace = nopStore{}, &teststack.Recorder{}, t.TempDir(), 2, 16<<20, time.Millisecond
			_, err := New(o).Submit(tc.ctx, Request{Sources: []string{src}, Destination: "gs://bkt/x", ChunkSize: 256 << 10})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Submit = %v, want an error with %q", err, tc.want)
			}
			if left := pipelineGoroutines(); len(left) > 0 {
				t.Fatalf("%d pipeline goroutines outlived Submit:\n%s", len(left), strings.Join(left, "\n\n"))
			}
		})
	}
}

// TestFrameBuffersDoNotRatchet: the frame slots of a chunk encoder hold
// about what the frames in flight need, not the largest piece that ever
// landed at each position (issue 31: a real tree's bundles grew them to
// 215 MiB against a 256 MiB budget).
func TestFrameBuffersDoNotRatchet(t *testing.T) {
	jobs := runEncoders(t, 2, codec.Zstd)
	enc := newChunkEncoder(context.Background(), jobs)
	held := func() (n int64) {
		for _, f := range enc.frames {
			n += int64(cap(f.wire))
		}
		return n
	}
	big := make([][]byte, 64)
	for i := range big {
		big[i] = bytes.Repeat([]byte{byte(i)}, 512<<10)
	}
	if _, err := enc.Encode(big, codec.Zstd.DefaultLevel()); err != nil {
		t.Fatal(err)
	}
	after := held()
	if after < 64*(512<<10) {
		t.Fatalf("64 pieces of 512 KiB held %d bytes of frame buffers; want at least their bound", after)
	}
	small := make([][]byte, 64)
	for i := range small {
		small[i] = []byte(strings.Repeat("row,", 256))
	}
	if _, err := enc.Encode(small, codec.Zstd.DefaultLevel()); err != nil {
		t.Fatal(err)
	}
	limit := 64 * keepFrameBuffer(codec.Zstd.Bound(1024))
	if got := held(); got > limit {
		t.Fatalf("after a bundle of 64 files of 1 KiB the slots hold %d bytes (after 64 of 512 KiB: %d); want at most %d", got, after, limit)
	}
}
