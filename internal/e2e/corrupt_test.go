package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/localstack"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/producer"
	"github.com/ferry-dev/ferry/internal/queue"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// Fault 4: every chunk message is published twice. Exactly one final object
// and one benchmark row.
func TestEveryChunkPublishedTwice(t *testing.T) {
	s := newStack(t, stackOptions{workers: 2, inlineMax: 4 << 10, duplicateChunks: true})
	dir := filepath.Join(t.TempDir(), "dups")
	testutil.WriteCSV(t, filepath.Join(dir, "big.csv"), 1_500_000, 21)
	testutil.WriteCSV(t, filepath.Join(dir, "one.csv"), 20_000, 22)
	req := producer.Request{Sources: []string{dir}, Destination: "gs://" + s.bucket + "/dup", Codec: codec.Zstd, ChunkSize: 64 << 10}
	done, err := s.transfer(req)
	if err != nil || done.Status != message.StatusOK {
		t.Fatalf("transfer: %v, done %+v", err, done)
	}
	s.verifyAll(req)
	s.assertClean()
	var finals []string
	_ = s.store.List(context.Background(), s.bucket, "dup/", func(a gcs.Attrs) error { finals = append(finals, a.Name); return nil })
	if len(finals) != 2 {
		t.Fatalf("final objects %v, want 2", finals)
	}
	// Late duplicates must not add a row: wait until every copy of every
	// chunk message, and every event they caused, has been handled.
	s.settle()
	if rows := rowsOf(t, s.results, done.TransferID); len(rows) != 1 {
		t.Fatalf("%d rows, want 1", len(rows))
	}
}

// corruptingPublisher flips one byte of a spool file after the producer
// wrote it and before its message reaches the workers, as a failing disk
// would.
type corruptingPublisher struct {
	p      publisher
	spool  string
	target int // chunk index whose spool file to corrupt
}

func (c corruptingPublisher) Publish(ctx context.Context, data []byte, attrs map[string]string) error {
	m, _, err := message.DecodeChunk(data)
	if err == nil && m.Parts[0].Index == c.target && m.Spool != "" {
		path := filepath.Join(c.spool, m.Spool)
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		b[len(b)/2] ^= 0x40
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return err
		}
	}
	return c.p.Publish(ctx, data, attrs)
}

// Fault 5: a spool chunk corrupted after publishing is caught by CRC32C
// before upload; the transfer fails naming the file and the chunk, no final
// object, staging cleaned, and the message is not retried forever: it is
// acked and copied to the dead-letter topic.
func TestCorruptSpoolChunkFailsTheTransfer(t *testing.T) {
	s := newStack(t, stackOptions{workers: 2, inlineMax: 4 << 10})
	s.prod = producer.New(producer.Options{Store: s.store, Events: s.q.Publisher(s.ps.ControlTopic),
		Chunks: corruptingPublisher{p: s.q.Publisher(s.ps.ChunksTopic), spool: s.spool, target: 7}, SpoolDir: s.spool, InlineMax: 4 << 10})
	src := filepath.Join(t.TempDir(), "victim.csv")
	testutil.WriteCSV(t, src, 1_000_000, 23)
	done, err := s.transfer(producer.Request{Sources: []string{src}, Destination: "gs://" + s.bucket + "/bad", Codec: codec.Zstd, ChunkSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != message.StatusFailed || !strings.Contains(done.Error, "victim.csv chunk 7") || !strings.Contains(done.Error, "corrupt") {
		t.Fatalf("done %+v, want failed naming victim.csv chunk 7", done)
	}
	if _, err := s.store.Attrs(context.Background(), s.bucket, "bad/victim.csv.zst"); !errors.Is(err, gcs.ErrNotFound) {
		t.Fatalf("final object exists after a failed transfer: %v", err)
	}
	s.assertClean()
	if row := s.row(done.TransferID); row.Status != "failed" || !strings.Contains(row.Error, "chunk 7") {
		t.Fatalf("row %+v", row)
	}

	// The corrupt chunk's message sits on the dead-letter topic, once.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var dead []queue.Message
	_ = s.q.Receive(ctx, localstack.DeadLetterSubscription(s.ps.ChunksDeadLetter), queue.ReceiveSettings{MaxMessages: 10, MaxBytes: 1 << 20},
		func(_ context.Context, m queue.Message) error {
			dead = append(dead, m)
			cancel()
			return nil
		})
	if len(dead) != 1 || !strings.Contains(dead[0].Attributes["ferry_error"], "chunk 7") {
		t.Fatalf("dead-lettered %d messages (%v), want the corrupt chunk's", len(dead), dead)
	}
}

// Fault 7, second half: with overwrite, an existing destination is replaced
// atomically: readers see the old object or the new one, never a mix.
func TestOverwriteReplacesAtomically(t *testing.T) {
	s := newStack(t, stackOptions{workers: 2, inlineMax: 4 << 10})
	dir := t.TempDir()
	src := filepath.Join(dir, "data.csv")
	testutil.WriteCSV(t, src, 800_000, 24)
	small := filepath.Join(dir, "small.csv")
	testutil.WriteCSV(t, small, 10_000, 25)
	req := producer.Request{Sources: []string{src, small}, Destination: "gs://" + s.bucket + "/ow", Codec: codec.Zstd, ChunkSize: 64 << 10}
	if d, err := s.transfer(req); err != nil || d.Status != message.StatusOK {
		t.Fatalf("first transfer: %v %+v", err, d)
	}
	old, _ := s.store.Attrs(context.Background(), s.bucket, "ow/data.csv.zst")

	testutil.WriteCSV(t, src, 900_000, 26) // new content under the same names
	testutil.WriteCSV(t, small, 12_000, 27)
	req.Overwrite = true
	stop := watchFinals(t, s, map[string]string{"big": "ow/data.csv.zst", "small": "ow/small.csv.zst"})
	d, err := s.transfer(req)
	seen := stop()
	if err != nil || d.Status != message.StatusOK {
		t.Fatalf("overwrite transfer: %v %+v", err, d)
	}
	s.verifyAll(req)
	s.assertClean()
	now, _ := s.store.Attrs(context.Background(), s.bucket, "ow/data.csv.zst")
	if now.Generation == old.Generation {
		t.Fatal("object not replaced")
	}
	for _, a := range seen {
		if a.Name == "ow/data.csv.zst" && a.Generation != old.Generation && a.Generation != now.Generation {
			t.Errorf("a third version of the object was visible: %+v", a)
		}
		isOld := a.Generation == old.Generation && a.CRC32C == old.CRC32C
		isNew := a.Generation == now.Generation && a.CRC32C == now.CRC32C
		if a.Name == "ow/data.csv.zst" && !isOld && !isNew {
			t.Errorf("a mixed object was visible: %+v", a)
		}
	}
}
