package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/queue"
	"github.com/ferry-dev/ferry/internal/ratelimit/ratelimittest"
	"github.com/ferry-dev/ferry/internal/teststack"
)

// Issue 13 §4: once a transfer's done marker exists (cancelled, failed),
// workers drop its chunks without uploading them. The marker is looked up
// at most once per DoneCheckEvery per transfer; "ended" is kept.
func TestChunksOfAnEndedTransferAreDroppedWithoutUploading(t *testing.T) {
	bucket := "w-cancelled"
	gs := testBucket(t, bucket)
	store := &countingStore{objectStore: gs}
	rec := &teststack.Recorder{}
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	dir := t.TempDir()
	w, err := New(Options{Store: store, Events: rec, ID: "w1", MaxAttempts: 5, SpoolDir: dir, DoneCheckEvery: 5 * time.Second, now: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	// Chunk i of a large file, spooled.
	msg := func(i int) (queue.Message, string) {
		b := []byte(fmt.Sprintf("chunk %d of a file being cancelled", i))
		c, _, _ := chunkMsg(t, bucket, b, false)
		c.TransferID, c.Spool = "tid9", fmt.Sprintf("tid9-000000-%05d", i)
		c.Parts[0].Object, c.Parts[0].Index = message.ChunkObject("tid9", 0, i), i
		if err := os.WriteFile(filepath.Join(dir, c.Spool), b, 0o644); err != nil {
			t.Fatal(err)
		}
		return queue.Message{ID: fmt.Sprint(i), Data: message.EncodeChunk(c, nil)}, filepath.Join(dir, c.Spool)
	}
	check := func(step string, wantAttrs, wantUploads int64) {
		t.Helper()
		if a, u := store.markers.Load(), store.uploads.Load(); a != wantAttrs || u != wantUploads {
			t.Fatalf("%s: %d looks at the done marker and %d uploads, want %d and %d", step, a, u, wantAttrs, wantUploads)
		}
	}
	m, _ := msg(0)
	if err := w.Handle(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	check("first chunk", 1, 1) // the marker looked for, the chunk uploaded

	// The transfer is cancelled: the merger leaves its done marker.
	if _, err := gs.PutSmall(context.Background(), bucket, message.DoneMarker("tid9"), []byte(`{}`), false, ""); err != nil {
		t.Fatal(err)
	}
	m, _ = msg(1)
	if err := w.Handle(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	check("inside DoneCheckEvery", 1, 2) // the answer is cached for 5 s

	advance(6 * time.Second)
	m, spool := msg(2)
	if err := w.Handle(context.Background(), m); err != nil {
		t.Fatalf("a dropped chunk is acked: %v", err)
	}
	check("after DoneCheckEvery", 2, 2) // looked again, found, dropped
	if _, err := os.Stat(spool); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("spool file of a dropped chunk still there: %v", err)
	}
	if _, err := gs.Attrs(context.Background(), bucket, message.ChunkObject("tid9", 0, 2)); err == nil {
		t.Fatal("a chunk of an ended transfer was uploaded")
	}
	advance(time.Minute)
	m, _ = msg(3)
	if err := w.Handle(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	check("ended is kept", 2, 2)
	if ev := events(t, rec); len(ev) != 2 {
		t.Fatalf("%d events, want 2: dropped chunks are not announced", len(ev))
	}
}

// The done cache is bounded.
func TestDoneCacheIsBounded(t *testing.T) {
	store := &countingStore{objectStore: testBucket(t, "w-done-cache")}
	c := &doneCache{store: store, every: time.Hour, max: 4, now: time.Now, entries: map[doneKey]*doneEntry{}}
	for i := 0; i < 50; i++ {
		if c.ended(context.Background(), "w-done-cache", fmt.Sprintf("tid%d", i)) {
			t.Fatal("no marker, yet ended")
		}
		if n := c.len(); n > 4 {
			t.Fatalf("%d transfers remembered, bound 4", n)
		}
	}
}

// Issue 13 §3: FERRY_MAX_RATE caps what a worker uploads. Every byte sent
// passes the process's one limiter (checks of the bytes before sending do
// not), in waits no larger than its burst, so the bytes of any span of
// time stay within rate × span + burst.
func TestMaxRateCapsEveryUploadedByte(t *testing.T) {
	const bytesPerSecond = 100_000
	bucket := "w-rate"
	store := testBucket(t, bucket)
	v := ratelimittest.New(bytesPerSecond)
	w, err := New(Options{Store: store, Events: &teststack.Recorder{}, ID: "w1", MaxAttempts: 5, MaxRate: bytesPerSecond, limiter: v})
	if err != nil {
		t.Fatal(err)
	}
	c, payload := bundle(bucket, "tid10", bytes.Repeat([]byte("a"), 150_000), bytes.Repeat([]byte("b"), 90_000), bytes.Repeat([]byte("c"), 60_000))
	var wire int
	for _, p := range payload {
		wire += len(p)
	}
	if err := w.Handle(context.Background(), queue.Message{ID: "m", Data: message.EncodeChunk(c, payload)}); err != nil {
		t.Fatal(err)
	}
	if v.Tokens() != wire {
		t.Fatalf("%d bytes passed the limiter, %d were uploaded", v.Tokens(), wire)
	}
	if v.MaxWait() > v.Burst() {
		t.Fatalf("a wait of %d bytes, above the burst of %d", v.MaxWait(), v.Burst())
	}
	elapsed := v.Elapsed()
	if floor := time.Duration(float64(wire-v.Burst()) / bytesPerSecond * float64(time.Second)); elapsed < floor {
		t.Fatalf("%d bytes in %v of limiter time, faster than %d B/s allows (%v)", wire, elapsed, bytesPerSecond, floor)
	}
	t.Logf("%d bytes uploaded in %v of limiter time (cap %d B/s, burst %d)", wire, elapsed, bytesPerSecond, v.Burst())

	// A redelivery sends the bytes again (and gets 412s): they count too.
	before := v.Tokens()
	if err := w.Handle(context.Background(), queue.Message{ID: "m", Data: message.EncodeChunk(c, payload)}); err != nil {
		t.Fatal(err)
	}
	if v.Tokens()-before != wire {
		t.Fatalf("redelivery: %d bytes through the limiter, %d sent", v.Tokens()-before, wire)
	}
}

// The worker's own limiter is the FERRY_MAX_RATE it was given.
func TestMaxRateMakesOneLimiterPerProcess(t *testing.T) {
	w, err := New(Options{Store: testBucket(t, "w-rate2"), Events: &teststack.Recorder{}, MaxRate: 7_000_000})
	if err != nil {
		t.Fatal(err)
	}
	lim, ok := w.limit.(*rate.Limiter)
	if !ok || lim.Limit() != 7_000_000 || lim.Burst() != 256<<10 {
		t.Fatalf("limiter %#v, want 7 MB/s with a 256 KiB burst", w.limit)
	}
	if w0, _ := New(Options{Store: testBucket(t, "w-rate2"), Events: &teststack.Recorder{}}); w0.limit != nil {
		t.Fatal("a limiter without FERRY_MAX_RATE")
	}
}
