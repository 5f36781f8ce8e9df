package merger

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/benchrow"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/queue"
	"github.com/ferry-dev/ferry/internal/teststack"
)

// BenchmarkMergerHeap is the merger's peak heap over one transfer of
// one-chunk files (FERRY_BENCH_FILES, default 100,000), reported per
// file: every chunk event, then the seal, confirmation, rows and listing.
//
//	go test -run '^$' -bench MergerHeap -benchtime 1x ./internal/merger
func BenchmarkMergerHeap(b *testing.B) {
	n, _ := strconv.Atoi(os.Getenv("FERRY_BENCH_FILES"))
	if n <= 0 {
		n = 100_000
	}
	for range b.N {
		heap, live := mergerHeap(b, n)
		b.ReportMetric(heap/float64(n), "heap-B/file")
		b.ReportMetric(live/float64(n), "live-B/file")
	}
}

// Issue 32 §4: the merger's memory does not grow with the file count
// (events, confirmation, rows and listing stream through pages;
// BenchmarkMergerHeap has the figures). Ten times the files may add at
// most perFile bytes of live heap for each file added: a done object kept
// per file (about 150 bytes) passes that.
func TestMergerMemoryDoesNotGrowWithFileCount(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 55,000 files")
	}
	const n, perFile = 5_000, 64
	_, small := mergerHeap(t, n)
	_, big := mergerHeap(t, 10*n)
	t.Logf("live heap growth: %d files %.1f MiB, %d files %.1f MiB", n, small/(1<<20), 10*n, big/(1<<20))
	if big-small > 9*n*perFile {
		t.Fatalf("the live heap grew %.1f MiB over %d files and %.1f MiB over %d: %.0f bytes for each file added, over %d",
			small/(1<<20), n, big/(1<<20), 10*n, (big-small)/(9*n), perFile)
	}
}

func mergerHeap(t testing.TB, n int) (heap, live float64) {
	st := newMemStoreFor(n)
	man := message.Manifest{V: message.Version, TransferID: "tid-mem", Sealed: true, Bucket: "bkt", Prefix: "tree", Method: "test",
		Codec: "none", ChunkSize: 1 << 20, StartedAt: time.Now().UTC()}
	bodies := map[string][]byte{}
	for i := range n {
		body := []byte(strings.Repeat("x", i%17))
		obj := "tree/src/some/dir" + strconv.Itoa(i%300) + "/file-name-" + strconv.Itoa(i) + ".go"
		f := message.File{Path: obj[5:], Object: obj, Size: int64(len(body)), RawCRC32C: crc32c.Checksum(body),
			WireSize: int64(len(body)), WireCRC32: crc32c.Checksum(body)}
		f.Chunks = []message.ChunkInfo{{Object: obj, RawSize: f.Size, RawCRC32C: f.RawCRC32C, WireSize: f.WireSize, WireCRC32C: f.WireCRC32}}
		man.Files = append(man.Files, f)
		bodies[obj] = body
	}
	// In object order, as the producer writes it; the manifest is put
	// when the chunks are out, before the seal, as the producer does.
	sort.Slice(man.Files, func(i, j int) bool { return man.Files[i].Object < man.Files[j].Object })
	var evs []message.Event
	ev := message.Event{V: message.Version, Type: message.EventChunk, TransferID: man.TransferID, Bucket: "bkt", Worker: "w1"}
	for i, f := range man.Files {
		a := st.put(f.Object, bodies[f.Object], message.FinalMetadata(man.TransferID, f.Size, f.RawCRC32C, "none"))
		ev.Parts = append(ev.Parts, message.EventPart{File: i, Index: 0, Object: f.Object, Generation: a.Generation, Size: a.Size, CRC32C: a.CRC32C, RawBytes: f.Size, Created: time.Now(), Started: time.Now()})
		if len(ev.Parts) == 500 {
			evs = append(evs, ev)
			ev.Parts = nil
		}
	}
	if len(ev.Parts) > 0 {
		evs = append(evs, ev)
	}
	var datas [][]byte
	for _, e := range evs {
		datas = append(datas, message.Encode(e))
	}
	done := &teststack.Recorder{}
	sink, err := benchrow.OpenFile(filepath.Join(t.TempDir(), "rows.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	m := New(Options{Store: st, Done: done, Sink: sink, Version: "test"})
	// The pages are in the store before; the header, which seals, comes
	// after the chunk events.
	var header []byte
	putManifest(t, &man, func(name string, body []byte) error {
		if name == message.ManifestObject(man.TransferID) {
			header = body
			return nil
		}
		return st.memPut(name, body)
	})
	man.Files = nil
	st.bodiless = []string{message.DoneRoot}
	var handleErr error
	var grewLive int64
	grew := teststack.HeapGrowth(func() {
		grewLive = teststack.LiveGrowth(func() {
			handleErr = handleAll(m, datas, man.TransferID, func() { st.put(message.ManifestObject(man.TransferID), header, nil) })
		})
	})
	if handleErr != nil {
		t.Fatal(handleErr)
	}
	var d message.Done
	if msgs := done.Messages(); len(msgs) != 1 || message.Decode(msgs[0].Data, &d) != nil || d.Status != message.StatusOK || d.Files != n {
		t.Fatalf("done events %d, last %+v; want one ok of %d files", len(msgs), d, n)
	}
	// What the summary holds of the objects, whether or not a collection
	// ran while it held them (the live heap is sampled, and a loaded
	// machine may see none).
	if len(d.Objects) > message.MaxDoneInline {
		t.Fatalf("the done event names %d objects inline; at most %d, the rest in its listing", len(d.Objects), message.MaxDoneInline)
	}
	return float64(grew), float64(grewLive)
}

// handleAll hands m every chunk event, seals, then hands it the sealed
// event.
func handleAll(m *Merger, datas [][]byte, tid string, seal func()) error {
	ctx := context.Background()
	for i, d := range datas {
		if err := m.Handle(ctx, queue.Message{ID: strconv.Itoa(i), Data: d}); err != nil {
			return err
		}
	}
	seal()
	sealed := message.Event{V: message.Version, Type: message.EventSealed, TransferID: tid, Bucket: "bkt", At: time.Now()}
	return m.Handle(ctx, queue.Message{ID: "s", Data: message.Encode(sealed)})
}
