package producer

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/plan"
	"github.com/ferry-dev/ferry/internal/ratelimit/ratelimittest"
	"github.com/ferry-dev/ferry/internal/spool/spooltest"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
)

func writeRandom(t testing.TB, path string, n int, seed uint64) []byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 9))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPubSubTransportCarriesEveryPayloadInline: with FERRY_TRANSPORT=pubsub
// every chunk's bytes ride in its message, none in the spool, and chunks of
// incompressible data are capped so that every message fits
// FERRY_MESSAGE_MAX, for each codec.
func TestPubSubTransportCarriesEveryPayloadInline(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "random.bin")
	raw := writeRandom(t, src, 3<<20, 1)
	const max = 1 << 20
	for _, c := range []codec.Codec{codec.Zstd, codec.Gzip, codec.None} {
		t.Run(string(c), func(t *testing.T) {
			chunks, spool := &teststack.Recorder{}, spooltest.NewMem()
			p := New(Options{Store: nopStore{}, Chunks: chunks, Events: &teststack.Recorder{}, Spool: spool,
				Transport: config.TransportPubSub, MessageMax: max, InlineMax: 1 << 10, Concurrency: 2})
			man, err := p.Submit(context.Background(), Request{Sources: []string{src}, Destination: "gs://bkt/x", Codec: c, ChunkSize: 32 << 20})
			if err != nil {
				t.Fatal(err)
			}
			if spool.Writes() != 0 {
				t.Fatalf("%d spool writes with the pubsub transport", spool.Writes())
			}
			capSize := plan.MessageChunkCap(c, max)
			msgs := decodeAll(t, chunks, "")
			if len(msgs) != plan.ChunkCount(int64(len(raw)), capSize) || len(man.Files[0].Chunks) != len(msgs) {
				t.Fatalf("%d messages for %d bytes at a cap of %d", len(msgs), len(raw), capSize)
			}
			for _, m := range msgs {
				pt := m.c.Parts[0]
				if m.size > max || m.c.Spool != "" || pt.RawSize > capSize {
					t.Fatalf("chunk %d: message of %d bytes (spool %q), %d raw bytes; want ≤ %d inline, ≤ %d raw", pt.Index, m.size, m.c.Spool, pt.RawSize, max, capSize)
				}
				if crc32c.Checksum(m.payload) != pt.WireCRC32C {
					t.Fatalf("chunk %d: payload CRC32C differs from the header's", pt.Index)
				}
				if got := decompress(t, c, m.payload); !bytes.Equal(got, raw[pt.RawOffset:pt.RawOffset+pt.RawSize]) {
					t.Fatalf("chunk %d does not decompress to its source bytes", pt.Index)
				}
			}
		})
	}
}

// TestSpoolTransportInlinesOnlySmallPayloads: with the spool transport a
// payload above FERRY_INLINE_MAX goes to a spool file named in the message,
// one at or below it rides inside.
func TestSpoolTransportInlinesOnlySmallPayloads(t *testing.T) {
	dir := t.TempDir()
	big, small := filepath.Join(dir, "big.bin"), filepath.Join(dir, "small.bin")
	writeRandom(t, big, 300<<10, 2)
	writeRandom(t, small, 2<<10, 3)
	chunks, spoolDir := &teststack.Recorder{}, t.TempDir()
	p := New(Options{Store: nopStore{}, Chunks: chunks, Events: &teststack.Recorder{}, SpoolDir: spoolDir, InlineMax: 8 << 10})
	if _, err := p.Submit(context.Background(), Request{Sources: []string{big, small}, Destination: "gs://bkt/x", ChunkSize: 64 << 10}); err != nil {
		t.Fatal(err)
	}
	spooled, inline := 0, 0
	for _, m := range decodeAll(t, chunks, spoolDir) {
		pt := m.c.Parts[0]
		switch {
		case pt.WireSize > 8<<10 && m.c.Spool != "":
			spooled++
		case pt.WireSize <= 8<<10 && m.c.Spool == "":
			inline++
		default:
			t.Fatalf("%s chunk %d: %d wire bytes, spool %q", pt.Path, pt.Index, pt.WireSize, m.c.Spool)
		}
		if crc32c.Checksum(m.payload) != pt.WireCRC32C {
			t.Fatalf("%s chunk %d: bytes differ from the header", pt.Path, pt.Index)
		}
	}
	if spooled != 5 || inline != 1 {
		t.Fatalf("%d spooled and %d inline chunks, want 5 and 1", spooled, inline)
	}
}

// TestPublishErrorFailsTheTransferNamingTheChunk: a publish that fails
// fails Submit with the chunk named, and a failed event tells the merger.
func TestPublishErrorFailsTheTransferNamingTheChunk(t *testing.T) {
	src := filepath.Join(t.TempDir(), "f.csv")
	testutil.WriteCSV(t, src, 100_000, 1)
	events := &teststack.Recorder{}
	p := New(Options{Store: nopStore{}, Chunks: &teststack.Recorder{Err: errors.New("topic ferry-chunks: permission denied")}, Events: events, SpoolDir: t.TempDir(), FailGrace: time.Millisecond})
	_, err := p.Submit(context.Background(), Request{Sources: []string{src}, Destination: "gs://bkt/x", ChunkSize: 64 << 10})
	if err == nil || !strings.Contains(err.Error(), "publish chunk") || !strings.Contains(err.Error(), "f.csv") || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("Submit = %v, want the chunk, file and cause named", err)
	}
	var ev message.Event
	if msgs := events.Messages(); len(msgs) != 1 || message.Decode(msgs[0].Data, &ev) != nil || ev.Type != message.EventFailed || !strings.Contains(ev.Error, "permission denied") {
		t.Fatalf("events %v, want one failed event with the cause", events.Messages())
	}
}

// TestPubSubRefusesAFileTooLargeForTheCap: a file that would need more than
// FERRY_MAX_CHUNKS chunks at the message cap is refused before anything is
// read, naming the file, its size, the cap and the variable to raise.
func TestPubSubRefusesAFileTooLargeForTheCap(t *testing.T) {
	src := filepath.Join(t.TempDir(), "huge.bin")
	f, err := os.Create(src)
	testutil.OK(t, err)
	testutil.OK(t, f.Truncate(20<<20))
	f.Close()
	chunks := &teststack.Recorder{}
	p := New(Options{Store: nopStore{}, Chunks: chunks, Events: &teststack.Recorder{}, Transport: config.TransportPubSub,
		MessageMax: 1 << 20, MaxChunks: 10})
	_, err = p.Submit(context.Background(), Request{Sources: []string{src}, Destination: "gs://bkt/x", ChunkSize: 32 << 20})
	var input *InputError
	if !errors.As(err, &input) {
		t.Fatalf("Submit = %v, want an InputError", err)
	}
	for _, want := range []string{src, "20971520 bytes", "983040", "FERRY_MESSAGE_MAX=1048576", "raise FERRY_MAX_CHUNKS to at least 22"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not name %q", err, want)
		}
	}
	if len(chunks.Messages()) != 0 {
		t.Fatal("chunks were published for a refused file")
	}
}

// pacedRecorder checks, at every publish, that the limiter has let through
// at least every byte published so far, this message included.
type pacedRecorder struct {
	teststack.Recorder
	lim       *ratelimittest.Virtual
	mu        sync.Mutex
	published int
	early     int // publishes that came before their bytes were paced
}

func (r *pacedRecorder) Publish(ctx context.Context, data []byte, attrs map[string]string) error {
	r.mu.Lock()
	r.published += len(data)
	if r.lim.Tokens() < r.published {
		r.early++
	}
	r.mu.Unlock()
	return r.Recorder.Publish(ctx, data, attrs)
}

// Issue 13 §3: with FERRY_TRANSPORT=pubsub the producer's chunk messages
// carry the data, and FERRY_MAX_RATE paces them: every byte published
// passed the producer's one limiter first, in waits no larger than its
// burst, so the bytes of any span stay within rate × span + burst. The
// limiter runs on a virtual clock: no wall time is measured.
func TestMaxRatePacesEveryPublishedByte(t *testing.T) {
	const bytesPerSecond = 1_000_000
	src := filepath.Join(t.TempDir(), "random.bin")
	raw := writeRandom(t, src, 3<<20, 4)
	v := ratelimittest.New(bytesPerSecond)
	chunks := &pacedRecorder{lim: v}
	p := New(Options{Store: nopStore{}, Chunks: chunks, Events: &teststack.Recorder{}, Spool: spooltest.NewMem(),
		Transport: config.TransportPubSub, MessageMax: 1 << 20, Concurrency: 2, MaxRate: bytesPerSecond, limiter: v})
	if _, err := p.Submit(context.Background(), Request{Sources: []string{src}, Destination: "gs://bkt/x", Codec: codec.Zstd, ChunkSize: 32 << 20}); err != nil {
		t.Fatal(err)
	}
	msgs := chunks.Messages()
	sent := 0
	for _, m := range msgs {
		sent += len(m.Data)
	}
	if len(msgs) < 3 || sent < len(raw) {
		t.Fatalf("%d messages of %d bytes for %d incompressible bytes", len(msgs), sent, len(raw))
	}
	if v.Tokens() != sent || chunks.early != 0 {
		t.Fatalf("%d bytes passed the limiter for %d published; %d messages published before their bytes were paced", v.Tokens(), sent, chunks.early)
	}
	if v.MaxWait() > v.Burst() {
		t.Fatalf("a wait of %d bytes, above the burst of %d", v.MaxWait(), v.Burst())
	}
	if floor := time.Duration(float64(sent-v.Burst()) / bytesPerSecond * float64(time.Second)); v.Elapsed() < floor {
		t.Fatalf("%d bytes in %v of limiter time, faster than %d B/s allows (%v)", sent, v.Elapsed(), bytesPerSecond, floor)
	}
	t.Logf("%d messages, %d bytes published in %v of limiter time (cap %d B/s, burst %d)", len(msgs), sent, v.Elapsed(), bytesPerSecond, v.Burst())
}

// Without FERRY_MAX_RATE the producer has no limiter; with it, one of that
// rate.
func TestMaxRateMakesOneLimiter(t *testing.T) {
	p := New(Options{Store: nopStore{}, Chunks: nopPublisher{}, Events: nopPublisher{}, MaxRate: 7_000_000})
	if lim, ok := p.o.limiter.(*rate.Limiter); !ok || lim.Limit() != 7_000_000 {
		t.Fatalf("limiter %#v, want 7 MB/s", p.o.limiter)
	}
	if p0 := New(Options{Store: nopStore{}, Chunks: nopPublisher{}, Events: nopPublisher{}}); p0.o.limiter != nil {
		t.Fatal("a limiter without FERRY_MAX_RATE")
	}
}
