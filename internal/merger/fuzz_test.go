package merger

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/queue"
	"github.com/ferry-dev/ferry/internal/teststack"
)

// FuzzMergerHandle feeds arbitrary events, and an arbitrary sealed manifest
// in the transfer's staging, to the merger's handler over fake-gcs-server.
// Each run starts from the same staged transfer (three chunks of one file,
// one file a worker wrote to its final name). Whatever arrives:
//   - Handle returns (the event is acked or nacked), without panicking;
//   - an event that does not decode, names what ferry could not have made,
//     or names a bucket FERRY_BUCKETS does not list, fails permanently;
//   - no file but the merger's rows file is touched: a sentinel beside it
//     keeps its bytes and time, and no file appears beside them.
func FuzzMergerHandle(f *testing.F) {
	root := f.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "rows"), 0o755); err != nil {
		f.Fatal(err)
	}
	keep := teststack.NewSentinel(f, root)
	const bucket, tid = "fuzz-m-ok", "tidm"
	store := teststack.Bucket(f, bucket)
	teststack.Bucket(f, "fuzz-m-no")

	// The staged transfer: file 0 of three chunks, file 1 of one.
	chunks := [][]byte{[]byte("first chunk|"), []byte("second chunk|"), []byte("third|")}
	small := []byte("a small file")
	man := message.Manifest{V: message.Version, TransferID: tid, Sealed: true, Bucket: bucket, Prefix: "out", Method: "fuzz",
		Codec: "none", ChunkSize: 1 << 20, StartedAt: time.Unix(1_800_000_000, 0).UTC()}
	f0 := message.File{Path: "a.csv", Object: "out/a.csv"}
	var parts []crc32c.Part
	for j, c := range chunks {
		ci := message.ChunkInfo{Object: message.ChunkObject(tid, 0, j), RawSize: int64(len(c)), RawCRC32C: crc32c.Checksum(c),
			WireSize: int64(len(c)), WireCRC32C: crc32c.Checksum(c)}
		f0.Chunks = append(f0.Chunks, ci)
		parts = append(parts, crc32c.Part{CRC32C: ci.WireCRC32C, Size: ci.WireSize})
		f0.Size += ci.RawSize
		f0.WireSize += ci.WireSize
	}
	f0.RawCRC32C, f0.WireCRC32 = crc32c.CombineAll(parts), crc32c.CombineAll(parts)
	f1 := message.File{Path: "b.csv", Object: "out/b.csv", Size: int64(len(small)), RawCRC32C: crc32c.Checksum(small),
		WireSize: int64(len(small)), WireCRC32: crc32c.Checksum(small)}
	f1.Chunks = []message.ChunkInfo{{Object: f1.Object, RawSize: f1.Size, RawCRC32C: f1.RawCRC32C, WireSize: f1.WireSize, WireCRC32C: f1.WireCRC32}}
	man.Files = []message.File{f0, f1}
	manifest := message.Encode(man)

	ev := func(typ, b string, ps ...message.EventPart) []byte {
		return message.Encode(message.Event{V: message.Version, Type: typ, TransferID: tid, Bucket: b, Worker: "w", Parts: ps, Error: "boom"})
	}
	var all []message.EventPart
	for j, c := range chunks {
		all = append(all, message.EventPart{File: 0, Index: j, Object: message.ChunkObject(tid, 0, j), Size: int64(len(c)), CRC32C: crc32c.Checksum(c)})
	}
	all = append(all, message.EventPart{File: 1, Object: f1.Object, Size: f1.WireSize, CRC32C: f1.WireCRC32})
	zstdMan := man
	zstdMan.Codec = "zstd"
	zstdMan.Files = []message.File{f0}
	zstdMan.Files[0].Chunks = append([]message.ChunkInfo(nil), f0.Chunks...)
	zstdMan.Files[0].Chunks[0].Frames = []message.Frame{{Wire: 5, Raw: 5}}
	f.Add(ev(message.EventChunk, bucket, all...), manifest)
	f.Add(ev(message.EventSealed, bucket), manifest)
	f.Add(ev(message.EventChunk, bucket, all[1]), []byte{})
	f.Add(ev(message.EventFailed, bucket), manifest)
	// Issue 17: a forged report of the one-chunk file with the manifest's
	// size and CRC32C and a made-up generation, and a failed event naming
	// a prefix.
	f.Add(ev(message.EventChunk, bucket, message.EventPart{File: 1, Object: f1.Object, Generation: 1, Size: f1.WireSize, CRC32C: f1.WireCRC32}), manifest)
	f.Add(message.Encode(message.Event{V: message.Version, Type: message.EventFailed, TransferID: tid, Bucket: bucket, Prefix: "out", Error: "x"}), []byte{})
	f.Add(ev(message.EventCancel, bucket), []byte{})
	f.Add(ev(message.EventSealed, "fuzz-m-no"), manifest)
	f.Add(ev(message.EventSealed, bucket), message.Encode(zstdMan))
	f.Add(ev(message.EventSealed, bucket), []byte(`{"v":1,"sealed":true}`))
	f.Add([]byte(`{"v":1,"type":"chunk"}`), manifest)

	ctx := context.Background()
	put := func(name string, b []byte, meta map[string]string) error {
		_, err := store.Upload(ctx, bucket, name, bytes.NewReader(b), gcs.UploadOptions{Size: int64(len(b)), CRC32C: crc32c.Checksum(b), Metadata: meta})
		return err
	}
	f.Fuzz(func(t *testing.T, event, manifest []byte) {
		// Start from the staged transfer each time.
		var g errgroup.Group
		g.Go(func() error { return store.Delete(ctx, bucket, message.DoneMarker(tid)) })
		for j, c := range chunks {
			g.Go(func() error {
				return put(message.ChunkObject(tid, 0, j), c, map[string]string{message.MetaTransfer: tid, message.MetaWorker: "w"})
			})
		}
		g.Go(func() error { return put(f1.Object, small, message.FinalMetadata(tid, f1.Size, f1.RawCRC32C, "none")) })
		g.Go(func() error {
			if len(manifest) > 0 {
				return put(message.ManifestObject(tid), manifest, nil)
			}
			return store.Delete(ctx, bucket, message.ManifestObject(tid))
		})
		if err := g.Wait(); err != nil {
			t.Fatal(err)
		}
		rows := filepath.Join(root, "rows", "rows.ndjson")
		_ = os.Remove(rows)
		_ = os.Remove(strings.TrimSuffix(rows, ".ndjson") + ".chunks.ndjson")
		m := New(Options{Store: store, Done: &teststack.Recorder{}, Sink: sinkAt(t, rows), Version: "fuzz",
			Buckets: config.Buckets{Allowed: []string{bucket}}})

		hctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		returned := make(chan error, 1)
		go func() { returned <- m.Handle(hctx, queue.Message{ID: "fuzz", Data: event}) }()
		var err error
		select {
		case err = <-returned:
		case <-time.After(time.Minute): // its context ends after 20s
			t.Fatalf("Handle did not return a minute after its 20s deadline: the event would be neither acked nor nacked: %q", event)
		}

		var e message.Event
		derr := message.Decode(event, &e)
		if derr == nil {
			derr = checkEvent(&e)
		}
		if derr == nil && e.Bucket != bucket {
			derr = errors.New("bucket not allowed")
		}
		if derr != nil && !errors.Is(err, queue.ErrPermanent) {
			t.Fatalf("malformed or refused event (%v) got %v, want a permanent error", derr, err)
		}
		keep.Check(t)
	})
}
