package producer

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/plan"
	"github.com/ferry-dev/ferry/internal/seektable"
	"github.com/ferry-dev/ferry/internal/spool/spooltest"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// onlyReader hides a reader's other methods, as a pipe would.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// submitStdin runs a transfer of data as standard input and returns the
// manifest and the chunk messages, decoded.
func submitStdin(t *testing.T, data []byte, o Options, req Request) (*message.Manifest, []sent, error) {
	t.Helper()
	chunks := &teststack.Recorder{}
	o.Store, o.Chunks, o.Spool = nopStore{}, chunks, spooltest.NewMem()
	if o.Events == nil {
		o.Events = &teststack.Recorder{}
	}
	o.Transport, o.MessageMax, o.Concurrency = "pubsub", 4<<20, 2 // payloads inline, to read them back
	req.Sources, req.Stdin = []string{"-"}, onlyReader{bytes.NewReader(data)}
	if req.Destination == "" {
		req.Destination = "gs://bkt/dumps/db.sql"
	}
	if req.ChunkSize == 0 {
		req.ChunkSize = 64 << 10
	}
	man, err := New(o).Submit(context.Background(), req)
	return man, decodeAll(t, chunks, ""), err
}

// Issue 13 §5: standard input of unknown length is cut into chunks that
// start at the chunk size and double every FERRY_MAX_CHUNKS/16 chunks; they
// are staged (their count is unknown until the end) with their frames in
// the manifest, which at the end gives the stream's size and CRC32C and
// the seek table the merger composes last. The chunks' payloads, in order,
// are the stream.
func TestStdinStreamsInGrowingStagedChunks(t *testing.T) {
	data := testutil.CSV(t, 1_400_000, 3)[:1_400_000]
	man, msgs, err := submitStdin(t, data, Options{MaxChunks: 32}, Request{Codec: codec.Zstd})
	if err != nil {
		t.Fatal(err)
	}
	f := man.Files[0]
	if len(man.Files) != 1 || f.Object != "dumps/db.sql.zst" || man.Prefix != "dumps" || f.Size != int64(len(data)) ||
		f.RawCRC32C != crc32c.Checksum(data) || !f.Mtime.IsZero() {
		t.Fatalf("manifest file %+v (prefix %q); want dumps/db.sql.zst of %d bytes, crc32c %08x, no mtime", f, man.Prefix, len(data), crc32c.Checksum(data))
	}
	// MaxChunks 32: chunks double every 2, from 64 KiB.
	wantSizes := []int64{64 << 10, 64 << 10, 128 << 10, 128 << 10, 256 << 10, 256 << 10}
	rest := int64(len(data))
	for _, s := range wantSizes {
		rest -= s
	}
	wantSizes = append(wantSizes, rest) // 512 KiB chunks now; the last is short
	if len(f.Chunks) != len(wantSizes) || len(msgs) != len(wantSizes) {
		t.Fatalf("%d chunks in the manifest, %d messages; want %d", len(f.Chunks), len(msgs), len(wantSizes))
	}
	slices.SortFunc(msgs, func(a, b sent) int { return a.c.Parts[0].Index - b.c.Parts[0].Index }) // published in parallel
	var wire []byte
	for i, m := range msgs {
		p := m.c.Parts[0]
		if p.Final || p.Index != i || p.Chunks != 32 || p.Object != message.ChunkObject(man.TransferID, 0, i) || p.RawSize != wantSizes[i] {
			t.Fatalf("message %d: part %+v; want staged chunk %d of at most 32, %d bytes", i, p, i, wantSizes[i])
		}
		c := f.Chunks[i]
		if c.RawSize != p.RawSize || c.WireCRC32C != p.WireCRC32C || len(c.Frames) == 0 {
			t.Fatalf("manifest chunk %d %+v disagrees with its message %+v", i, c, p)
		}
		wire = append(wire, m.payload...)
	}
	table := f.SealWire()
	if table == nil {
		t.Fatal("no seek table for a composed stream")
	}
	final := append(wire, table...)
	if int64(len(final)) != f.WireSize || crc32c.Checksum(final) != f.WireCRC32 {
		t.Fatalf("chunks and seek table make %d bytes crc %08x; manifest says %d, %08x", len(final), crc32c.Checksum(final), f.WireSize, f.WireCRC32)
	}
	if got := decompress(t, codec.Zstd, final); !bytes.Equal(got, data) {
		t.Fatalf("the composed stream decompresses to %d bytes, want the %d read", len(got), len(data))
	}
	if _, err := seektable.TableSize(final); err != nil {
		t.Fatalf("composed stream: %v", err)
	}
}

// A stream that ends within its first chunk — exactly a chunk, less, or
// nothing — is sent as a file of one chunk: straight to its final name,
// its payload ending with its seek table, no mtime.
func TestStdinOfOneChunkGoesStraightToItsFinalName(t *testing.T) {
	for _, n := range []int64{64 << 10, 1000, 0} {
		data := testutil.CSV(t, n, 3)[:n]
		man, msgs, err := submitStdin(t, data, Options{}, Request{Codec: codec.Zstd})
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != 1 || len(man.Files[0].Chunks) != 1 {
			t.Fatalf("%d bytes: %d messages, %d chunks; want one", n, len(msgs), len(man.Files[0].Chunks))
		}
		p := msgs[0].c.Parts[0]
		if !p.Final || p.Chunks != 1 || p.Object != "dumps/db.sql.zst" || p.Metadata[message.MetaMtime] != "" ||
			p.Metadata[message.MetaRawSize] != strconv.FormatInt(n, 10) {
			t.Fatalf("%d bytes: part %+v; want the final object, one chunk, no mtime", n, p)
		}
		if _, err := seektable.TableSize(msgs[0].payload); err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if got := decompress(t, codec.Zstd, msgs[0].payload); !bytes.Equal(got, data) {
			t.Fatalf("%d bytes: payload decompresses to %d bytes", n, len(got))
		}
	}
}

// A stream longer than FERRY_MAX_CHUNKS chunks can hold fails, naming the
// limit and what raises it, and the transfer is failed for the merger.
func TestStdinLongerThanTheChunksHoldFailsClearly(t *testing.T) {
	events := &teststack.Recorder{}
	// MaxChunks 4: 4 × 64 KiB (every chunk doubles after 1: 64, 128, 256,
	// 512 KiB = 960 KiB at most).
	_, _, err := submitStdin(t, testutil.CSV(t, 1_000_000, 3)[:1_000_000], Options{MaxChunks: 4, Events: events}, Request{Codec: codec.Zstd})
	for _, want := range []string{"standard input: longer than 983040 bytes", "FERRY_MAX_CHUNKS=4", "raise FERRY_MAX_CHUNKS"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("error %v; want it to say %q", err, want)
		}
	}
	if ev := events.Messages(); len(ev) != 1 || !strings.Contains(string(ev[0].Data), `"failed"`) {
		t.Fatalf("events %q; want one failed event", ev)
	}
}

// What standard input cannot do is refused before anything is read.
func TestStdinRefusals(t *testing.T) {
	p := New(Options{Store: nopStore{}, Chunks: nopPublisher{}, Events: nopPublisher{}, Spool: spooltest.NewMem()})
	for _, tc := range []struct {
		req  Request
		want string
	}{
		{Request{}, "standard input is read only by producer submit"},
		{Request{Stdin: strings.NewReader("x"), SkipUnchanged: true}, "--skip-unchanged compares"},
	} {
		tc.req.Sources, tc.req.Destination, tc.req.ChunkSize = []string{"-"}, "gs://bkt/x/y", 1<<20
		_, err := p.Submit(context.Background(), tc.req)
		var input *InputError
		if !errors.As(err, &input) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an input error saying %q", tc.req, err, tc.want)
		}
	}
}

// randReader is an endless stream of incompressible bytes, generated as it
// is read: no copy of it exists anywhere but in the pipeline.
type randReader struct {
	rng  *rand.ChaCha8
	left int64
}

func (r *randReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), r.left)]
	_, _ = r.rng.Read(p)
	r.left -= int64(len(p))
	return len(p), nil
}

// streamHeapGrowth streams size incompressible bytes as standard input
// through FERRY_PRODUCER_MEMORY=64MiB, in chunks that grow from 4 MiB to
// the largest the budget allows, and returns how far the heap grew.
func streamHeapGrowth(t *testing.T, size int64) int64 {
	t.Helper()
	p := New(Options{Store: nopStore{}, Chunks: nopPublisher{}, Events: nopPublisher{}, Spool: spooltest.NewMem(), Concurrency: 2,
		MemoryLimit: 64 << 20, MaxChunks: 16})
	man, growth := heapGrowth(t, func() (*message.Manifest, error) {
		return p.Submit(context.Background(), Request{Sources: []string{"-"}, Destination: "gs://bkt/x/rand.bin", ChunkSize: 4 << 20,
			Codec: codec.Zstd, Stdin: &randReader{rng: rand.NewChaCha8([32]byte{1}), left: size}})
	})
	f := man.Files[0]
	if f.Size != size || f.Chunks[2].RawSize != p.streamMax() {
		t.Fatalf("%d bytes sent, third chunk %d bytes; want %d bytes, chunks grown to %d", f.Size, f.Chunks[2].RawSize, size, p.streamMax())
	}
	return growth
}

// Standard input streams in bounded memory: the heap grows no further for
// a 120 MiB stream than for a 24 MiB one, through the same budget.
func TestStdinMemoryDoesNotGrowWithTheStream(t *testing.T) {
	if testing.Short() {
		t.Skip("compresses 144 MiB")
	}
	small := streamHeapGrowth(t, 24<<20)
	large := streamHeapGrowth(t, 120<<20)
	t.Logf("peak heap growth: %.1f MiB for a 24 MiB stream, %.1f MiB for a 120 MiB stream (budget 64 MiB)",
		float64(small)/(1<<20), float64(large)/(1<<20))
	if large > small+small/4+8<<20 {
		t.Fatalf("heap grew by %.1f MiB for 120 MiB against %.1f MiB for 24 MiB: memory follows the stream",
			float64(large)/(1<<20), float64(small)/(1<<20))
	}
}

// The longest standard input at the defaults, as --help and the README say:
// about 73 GB with the spool (chunks grow to 73 MiB within 256 MiB of
// FERRY_PRODUCER_MEMORY), 9.37 GB with FERRY_TRANSPORT=pubsub (every chunk
// capped to fit a 9 MiB message).
func TestStdinLimitsAtTheDefaults(t *testing.T) {
	for _, tc := range []struct {
		transport string
		chunk     int64
		most      int64
	}{
		{"spool", 73 << 20, (62*32 + 62*64 + 876*73) << 20},
		{"pubsub", 9_371_648, 1000 * 9_371_648},
	} {
		p := New(Options{Store: nopStore{}, Chunks: nopPublisher{}, Events: nopPublisher{}, Transport: tc.transport})
		pl, err := plan.New(plan.Spec{Sources: []string{"-"}, Destination: "gs://bkt/x", ChunkSize: 32 << 20}, p.limits())
		if err != nil {
			t.Fatal(err)
		}
		s := pl.Files[0].Stream
		t.Logf("%s: chunks of %d up to %d bytes; the longest stream is %d bytes (%.2f GB)", tc.transport, s.First, s.Max, s.Most(), float64(s.Most())/1e9)
		if s.Max != tc.chunk || s.Most() != tc.most {
			t.Errorf("%s: largest chunk %d, longest stream %d; want %d and %d", tc.transport, s.Max, s.Most(), tc.chunk, tc.most)
		}
	}
}
