package worker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/queue"
	"github.com/ferry-dev/ferry/internal/teststack"
)

// FuzzWorkerHandle feeds arbitrary chunk messages to the worker's handler,
// over fake-gcs-server, with a real spool directory beside a sentinel file
// (and a link to it inside the spool). Whatever arrives:
//   - nothing outside the spool directory is touched: the sentinel keeps
//     its bytes and time, and no file appears or vanishes beside the spool;
//   - Handle returns (the message is acked or nacked), without panicking;
//   - a message that does not decode, or names a bucket FERRY_BUCKETS does
//     not list, fails permanently.
func FuzzWorkerHandle(f *testing.F) {
	root := f.TempDir()
	spool := filepath.Join(root, "spool")
	if err := os.MkdirAll(spool, 0o755); err != nil {
		f.Fatal(err)
	}
	keep := teststack.NewSentinel(f, root)
	sentinel := keep.Path
	testBucket(f, "fuzz-w-no")
	store := testBucket(f, "fuzz-w-ok")

	// Seeds: the shapes a producer sends, and the attacks of issue 8.
	frame := []byte("a compressed frame")
	part := func(obj string, final bool, file int, b []byte) message.Part {
		p := message.Part{Object: obj, Final: final, File: file, Path: "f", Chunks: 1, RawSize: int64(len(b)),
			WireSize: int64(len(b)), WireCRC32C: crc32c.Checksum(b)}
		if !final {
			p.Chunks, p.Index = 3, 1
		}
		return p
	}
	chunk := func(bucket, spoolName string, parts ...message.Part) message.Chunk {
		return message.Chunk{V: message.Version, TransferID: "tidf", Bucket: bucket, Codec: "zstd", Spool: spoolName, Key: testChunkKey, Parts: parts}
	}
	staging := part(message.ChunkObject("tidf", 0, 1), false, 0, frame)
	f.Add(message.EncodeChunk(chunk("fuzz-w-ok", "", staging), [][]byte{frame}), uint8(1))
	f.Add(message.EncodeChunk(chunk("fuzz-w-ok", "", part("p/a", true, 1, frame), part("p/b", true, 2, []byte("b"))), [][]byte{frame, []byte("b")}), uint8(1))
	f.Add(message.EncodeChunk(chunk("fuzz-w-ok", "tidf-000000-00001", staging), nil), uint8(2))
	f.Add(message.EncodeChunk(chunk("fuzz-w-ok", "tidf-link", staging), nil), uint8(5))
	f.Add(message.EncodeChunk(chunk("fuzz-w-ok", sentinel, staging), nil), uint8(1))
	f.Add(message.EncodeChunk(chunk("fuzz-w-ok", "tidf-../sentinel.txt", staging), nil), uint8(1))
	f.Add(message.EncodeChunk(chunk("fuzz-w-no", "", staging), [][]byte{frame}), uint8(1))
	f.Add(message.EncodeChunk(chunk("fuzz-w-ok", "", staging), [][]byte{[]byte("a compressed framE")}), uint8(1))
	f.Add([]byte("FRYC\x00\x00\x00\x02{}"), uint8(0))

	f.Fuzz(func(t *testing.T, data []byte, attempt uint8) {
		// The spool as a producer left it: a chunk, and a link out.
		if err := os.WriteFile(filepath.Join(spool, "tidf-000000-00001"), frame, 0o644); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(spool, "tidf-link")
		if _, err := os.Lstat(link); err != nil {
			if err := os.Symlink(sentinel, link); err != nil {
				t.Fatal(err)
			}
		}
		w, err := New(Options{Store: store, Events: &teststack.Recorder{}, ID: "fuzz", MaxAttempts: 5, SpoolDir: spool,
			Buckets: config.Buckets{Allowed: []string{"fuzz-w-ok"}}})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		returned := make(chan error, 1)
		go func() {
			returned <- w.Handle(ctx, queue.Message{ID: "fuzz", Data: data, DeliveryAttempt: int(attempt % 7)})
		}()
		select {
		case err = <-returned:
		case <-time.After(time.Minute): // its context ends after 20s
			c, _, derr := message.DecodeChunk(data)
			t.Fatalf("Handle did not return a minute after its 20s deadline: the message would be neither acked nor nacked (%v): %+v", derr, c)
		}

		c, _, derr := message.DecodeChunk(data)
		if (derr != nil || c.Bucket != "fuzz-w-ok") && !errors.Is(err, queue.ErrPermanent) {
			t.Fatalf("malformed or refused message (%v) got %v, want a permanent error", derr, err)
		}
		keep.Check(t)
	})
}
