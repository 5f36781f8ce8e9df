package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/producer"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// Issue 42 §1 and §2: an overwrite replaces nothing until the transfer
// is whole, and only what its producer found.

// overwriteTree writes n small files and one larger log under dir, each seeded
// with seed, and returns the sources' names.
func overwriteTree(t *testing.T, dir string, n int, seed int64) []string {
	t.Helper()
	testutil.OK(t, os.MkdirAll(dir, 0o755))
	for i := range n {
		testutil.WriteCSV(t, filepath.Join(dir, fmt.Sprintf("f%02d.csv", i)), 2_000+int64(i)*37, seed+int64(i))
	}
	testutil.WriteCSV(t, filepath.Join(dir, "z-app.log"), 300_000, seed+99)
	return []string{dir}
}

// snapshot is every object under prefix: its generation and bytes.
func (s *stack) snapshot(prefix string) map[string]string {
	s.t.Helper()
	out := map[string]string{}
	for name, a := range s.objects(prefix) {
		b, err := s.store.ReadAll(context.Background(), s.bucket, name)
		testutil.OK(s.t, err)
		out[name] = fmt.Sprintf("generation %d, %d bytes, sha256 %x", a.Generation, len(b), sha256.Sum256(b))
	}
	return out
}

func sameSnapshot(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d objects, want the %d it found", what, len(got), len(want))
	}
	for name, w := range want {
		if g := got[name]; g != w {
			t.Errorf("%s: %s is %q, want %q as it was found", what, name, g, w)
		}
	}
}

// The most ordinary re-sync: --overwrite of a directory of 30 files, where
// the last cannot be read once the other 29 are uploaded (a log rotated
// away, a disk error). The transfer fails, naming it, and every object the
// first run wrote is still there with its bytes: nothing of the failed
// overwrite replaced anything.
func TestAFailedOverwriteLeavesWhatItFound(t *testing.T) {
	s := newStack(t, stackOptions{workers: 2, inlineMax: 4 << 10})
	dir := filepath.Join(t.TempDir(), "logs")
	req := producer.Request{Sources: overwriteTree(t, dir, 29, 1), Destination: "gs://" + s.bucket + "/sync", Codec: codec.Zstd, ChunkSize: 64 << 10}
	if d, err := s.transfer(req); err != nil || d.Status != message.StatusOK || d.Files != 30 {
		t.Fatalf("first run: %v %+v", err, d)
	}
	found := s.snapshot("sync/")

	overwriteTree(t, dir, 29, 1000) // new bytes under every name
	req.Overwrite, req.IdempotencyKey = true, "resync"
	tid := message.NewTransferID(req.IdempotencyKey)
	g := &hook{publisher: s.q.Publisher(s.ps.ChunksTopic), before: func(data []byte) error {
		if !bytes.Contains(data, []byte("z-app.log")) {
			return nil
		}
		// The other 29 files are uploaded (staged, or, before issue
		// 42, over their final objects) when the log fails.
		teststack.Until(t, time.Minute, "the 29 small files to be uploaded", func() bool {
			n := len(s.objects(message.ChunkPrefix(tid)))
			for _, a := range s.objects("sync/") {
				if a.Metadata[message.MetaTransfer] == tid {
					n++
				}
			}
			return n >= 29
		})
		return errors.New("read z-app.log: input/output error")
	}}
	p := producer.New(producer.Options{Store: s.store, Chunks: g, Events: s.q.Publisher(s.ps.ControlTopic), SpoolDir: s.spool, InlineMax: 4 << 10, Concurrency: 1})
	d, err := s.transferWith(p, req)()
	if err == nil || d.Status != message.StatusFailed || !strings.Contains(d.Error, "z-app.log") {
		t.Fatalf("overwrite run: %v %+v, want it failed naming the log", err, d)
	}
	sameSnapshot(t, "after the failed overwrite", s.snapshot("sync/"), found)
	s.assertClean()
}

// hook runs before on every message before it publishes it; an error
// from before is the publish's.
type hook struct {
	publisher
	before func(data []byte) error
}

func (h *hook) Publish(ctx context.Context, data []byte, attrs map[string]string) error {
	if err := h.before(data); err != nil {
		return err
	}
	return h.publisher.Publish(ctx, data, attrs)
}

// Two --overwrite transfers of different bytes to one prefix, interleaved
// (a nightly job that overran into the next night's), when T1's lease no
// longer holds T2 off: T1 lists the destination and is held before its
// first chunk; T2 runs whole and ends ok; then T1 goes on. T1 must not
// replace what T2 wrote after T1 looked: it fails, naming the object that
// changed and T2, and T2's ok stays true, every object its bytes.
func TestAnOlderOverwriteNeverReplacesANewerOnesObjects(t *testing.T) {
	s := newStack(t, stackOptions{workers: 2, inlineMax: 4 << 10})
	dir1, dir2 := filepath.Join(t.TempDir(), "night"), filepath.Join(t.TempDir(), "night")
	req1 := producer.Request{Sources: overwriteTree(t, dir1, 9, 1), Destination: "gs://" + s.bucket + "/nightly", Codec: codec.Zstd, ChunkSize: 64 << 10, Overwrite: true}
	req2 := req1
	req2.Sources = overwriteTree(t, dir2, 9, 500)
	if d, err := s.transfer(req2); err != nil || d.Status != message.StatusOK {
		t.Fatalf("the night before: %v %+v", err, d) // so that both replace
	}

	open, waiting := make(chan struct{}), make(chan struct{})
	var once sync.Once
	g := &hook{publisher: s.q.Publisher(s.ps.ChunksTopic), before: func([]byte) error {
		once.Do(func() { close(waiting); <-open })
		return nil
	}}
	p1 := producer.New(producer.Options{Store: s.store, Chunks: g, Events: s.q.Publisher(s.ps.ControlTopic), SpoolDir: s.spool, InlineMax: 4 << 10, Concurrency: 1})
	overwriteTree(t, dir1, 9, 2000)
	wait1 := s.transferWith(p1, req1)
	<-waiting // T1 has listed what it replaces
	// T1's lease would have T2 refused (TestTheSameCommandTwiceAtOnce…);
	// without it (T1 quiet past FERRY_TRANSFER_TIMEOUT, or a producer
	// from before leases) the generations T1 found still guard T2's ok.
	testutil.OK(t, s.store.Delete(context.Background(), s.bucket, message.LeaseObject(s.leaseHolder())))
	overwriteTree(t, dir2, 9, 3000)
	d2, err := s.transfer(req2)
	if err != nil || d2.Status != message.StatusOK {
		t.Fatalf("T2: %v %+v", err, d2)
	}
	s.verifyAll(req2)
	t2 := s.snapshot("nightly/")
	close(open)
	d1, err := wait1()
	if err == nil && d1.Status == message.StatusOK {
		t.Fatalf("T1 ended ok over T2's objects: %+v", d1)
	}
	if !strings.Contains(d1.Error, "changed since this transfer began") || !strings.Contains(d1.Error, d2.TransferID) {
		t.Errorf("T1's error %q does not say which object changed and who wrote it (T2 is %s)", d1.Error, d2.TransferID)
	}
	sameSnapshot(t, "T2's objects after T1", s.snapshot("nightly/"), t2)
	s.verifyAll(req2) // T2's ok is still true
	s.assertClean()
	if !bytes.Contains([]byte(d1.Error), []byte("nothing was replaced")) {
		t.Errorf("T1's error %q does not say that it replaced nothing", d1.Error)
	}
}
