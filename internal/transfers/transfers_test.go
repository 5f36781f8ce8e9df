package transfers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/benchrow"
	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/localstack"
	"github.com/ferry-dev/ferry/internal/merger"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/producer"
	"github.com/ferry-dev/ferry/internal/queue"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
	"github.com/ferry-dev/ferry/internal/worker"
)

// pubsubHost is the Pub/Sub emulator the cancel tests publish to.
var pubsubHost string

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "ferry-transfers-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	emu, err := localstack.StartPubSub(context.Background(), localstack.PubSubOptions{Kind: os.Getenv("FERRY_TEST_PUBSUB"), Dir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, "pubsub emulator:", err)
		return 1
	}
	defer emu.Stop()
	pubsubHost = emu.Host
	return teststack.MainWithGCS(m)
}

// pipeline is a transfer run by the real producer, worker and merger
// handlers on fake-gcs-server, message by message, so a test can look at
// every state in between.
type pipeline struct {
	t                       *testing.T
	store                   *gcs.Store
	bucket                  string
	chunks, events, wevents *teststack.Recorder
	done                    *teststack.Recorder
	worker                  *worker.Worker
	man                     *message.Manifest
}

func newPipeline(t *testing.T, bucket string) *pipeline {
	p := &pipeline{t: t, store: teststack.Bucket(t, bucket), bucket: bucket, chunks: &teststack.Recorder{},
		events: &teststack.Recorder{}, wevents: &teststack.Recorder{}, done: &teststack.Recorder{}}
	spool := t.TempDir()
	var err error
	if p.worker, err = worker.New(worker.Options{Store: p.store, Events: p.wevents, ID: "w1", MaxAttempts: 5, SpoolDir: spool}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.worker.Close() })
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	testutil.WriteCSV(t, filepath.Join(dir, "big.csv"), 300_000, 7) // five 64 KiB chunks
	testutil.WriteCSV(t, filepath.Join(dir, "small.csv"), 5_000, 7) // one chunk, straight to its final name
	prod := producer.New(producer.Options{Store: p.store, Chunks: p.chunks, Events: p.events, SpoolDir: spool, InlineMax: 1 << 10, Concurrency: 2})
	if p.man, err = prod.Submit(context.Background(), producer.Request{Sources: []string{dir}, Destination: "gs://" + bucket + "/out",
		Codec: codec.Zstd, ChunkSize: 64 << 10}); err != nil {
		t.Fatal(err)
	}
	return p
}

// upload has the worker handle the chunk messages of file (a path suffix)
// whose first part's index is in [from, to).
func (p *pipeline) upload(file string, from, to int) {
	p.t.Helper()
	n := 0
	for _, m := range p.chunks.Messages() {
		c, _, err := message.DecodeChunk(m.Data)
		if err != nil {
			p.t.Fatal(err)
		}
		if part := c.Parts[0]; !strings.HasSuffix(part.Path, file) || part.Index < from || part.Index >= to {
			continue
		}
		if err := p.worker.Handle(context.Background(), queue.Message{ID: "m", Data: m.Data, DeliveryAttempt: 1}); err != nil {
			p.t.Fatal(err)
		}
		n++
	}
	if n != to-from {
		p.t.Fatalf("%d messages of %s chunks %d to %d, want %d", n, file, from, to-1, to-from)
	}
}

// merge has the merger handle every event so far.
func (p *pipeline) merge() {
	p.t.Helper()
	sink, err := benchrow.OpenFile(filepath.Join(p.t.TempDir(), "rows.ndjson"))
	if err != nil {
		p.t.Fatal(err)
	}
	m := merger.New(merger.Options{Store: p.store, Done: p.done, Sink: sink, Version: "test"})
	for _, ev := range append(p.events.Messages(), p.wevents.Messages()...) {
		if err := m.Handle(context.Background(), queue.Message{ID: "e", Data: ev.Data}); err != nil {
			p.t.Fatal(err)
		}
	}
	if len(p.done.Messages()) != 1 {
		p.t.Fatalf("merger published %d done events, want 1", len(p.done.Messages()))
	}
}

func (p *pipeline) file(name string) message.File {
	for _, f := range p.man.Files {
		if strings.HasSuffix(f.Path, name) {
			return f
		}
	}
	p.t.Fatalf("no %s in the manifest", name)
	return message.File{}
}

// TestStatusFollowsATransfer: sealed with nothing uploaded, then part
// uploaded (a whole one-chunk file and two chunks of the other), then ended
// ok with its objects' CRC32Cs as GCS shows them; list agrees each time.
func TestStatusFollowsATransfer(t *testing.T) {
	ctx := context.Background()
	p := newPipeline(t, "tr-follow")
	id := p.man.TransferID
	big, small := p.file("big.csv"), p.file("small.csv")
	if len(big.Chunks) != 5 || len(small.Chunks) != 1 {
		t.Fatalf("big.csv has %d chunks, small.csv %d; the test wants 5 and 1", len(big.Chunks), len(small.Chunks))
	}
	want := Transfer{ID: id, State: StateSealed, Destination: "gs://tr-follow/out", Files: 2, Bytes: big.Size + small.Size}
	check := func(when string, got Transfer, want Transfer) {
		t.Helper()
		got.StartedAt, got.FinishedAt, got.WireStaged, got.Objects = time.Time{}, time.Time{}, 0, nil
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s:\n got  %+v\n want %+v", when, got, want)
		}
	}
	st, err := Status(ctx, p.store, p.bucket, id)
	testutil.OK(t, err)
	check("sealed, nothing uploaded", st, want)

	p.upload("big.csv", 0, 2)
	p.upload("small.csv", 0, 1)
	st, err = Status(ctx, p.store, p.bucket, id)
	testutil.OK(t, err)
	want.FilesDone, want.BytesDone, want.ChunksStaged = 1, small.Size+big.Chunks[0].RawSize+big.Chunks[1].RawSize, 2
	check("part uploaded", st, want)
	list, err := List(ctx, p.store, p.bucket, 10)
	testutil.OK(t, err)
	if len(list) != 1 {
		t.Fatalf("list %+v, want the one transfer", list)
	}
	check("list, part uploaded", list[0], want)

	p.upload("big.csv", 2, 5)
	p.merge()
	st, err = Status(ctx, p.store, p.bucket, id)
	testutil.OK(t, err)
	if st.State != message.StatusOK || st.FilesDone != 2 || st.BytesDone != want.Bytes || st.Files != 2 || len(st.Objects) != 2 || st.FinishedAt.IsZero() {
		t.Fatalf("after the merger: %+v", st)
	}
	for _, o := range st.Objects {
		name := strings.TrimPrefix(o.Name, "gs://tr-follow/")
		a, err := p.store.Attrs(ctx, p.bucket, name)
		testutil.OK(t, err)
		if o.CRC32C != crc32c.Base64(a.CRC32C) || o.Size != a.Size {
			t.Errorf("%s: crc32c %s size %d; GCS has %s and %d", o.Name, o.CRC32C, o.Size, crc32c.Base64(a.CRC32C), a.Size)
		}
	}
	list, err = List(ctx, p.store, p.bucket, 10)
	testutil.OK(t, err)
	if len(list) != 1 || list[0].State != message.StatusOK || list[0].BytesDone != want.Bytes || list[0].Objects != nil {
		t.Fatalf("list after the merger: %+v", list)
	}
	if _, err := Cancel(ctx, p.store, &teststack.Recorder{}, p.bucket, id, message.NewEndKey()); !errors.Is(err, ErrEnded) || !strings.Contains(err.Error(), "already ended ok") {
		t.Fatalf("Cancel of an ended transfer = %v, want ErrEnded", err)
	}
}

// TestCancelPublishesTheEvent: a running transfer (chunks staged, not yet
// sealed) is cancelled by a cancel event on the events topic, which the
// Pub/Sub emulator delivers with the transfer's id and bucket.
func TestCancelPublishesTheEvent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	store := teststack.Bucket(t, "tr-cancel")
	id := message.NewTransferID("")
	_, err := store.PutSmall(ctx, "tr-cancel", message.ChunkObject(id, 0, 0), []byte("zstd bytes"), true, "")
	testutil.OK(t, err)
	st, err := Status(ctx, store, "tr-cancel", id)
	testutil.OK(t, err)
	if st.State != StateRunning || st.ChunksStaged != 1 || st.WireStaged != 10 || st.Files != 0 {
		t.Fatalf("status of an unsealed transfer: %+v", st)
	}

	q, err := queue.Dial(ctx, "ferry-test", nil, queue.WithEmulator(pubsubHost))
	testutil.OK(t, err)
	defer q.Close()
	topic, sub := "tr-cancel-events", "tr-cancel-events-sub"
	testutil.OK(t, q.EnsureTopic(ctx, topic))
	testutil.OK(t, q.EnsureSubscription(ctx, queue.Subscription{ID: sub, Topic: topic, AckDeadline: 10 * time.Second}))
	key := message.NewEndKey()
	if _, err := Cancel(ctx, store, q.Publisher(topic), "tr-cancel", id, key); err != nil {
		t.Fatal(err)
	}
	var got message.Event
	rctx, stop := context.WithCancel(ctx)
	_ = q.Receive(rctx, sub, queue.ReceiveSettings{MaxMessages: 1, MaxBytes: 1 << 20}, func(_ context.Context, m queue.Message) error {
		testutil.OK(t, message.Decode(m.Data, &got))
		stop()
		return nil
	})
	stop()
	if got.Type != message.EventCancel || got.TransferID != id || got.Bucket != "tr-cancel" || got.At.IsZero() || got.Key != key {
		t.Fatalf("event %+v, want a cancel event for %s in tr-cancel carrying its key", got, id)
	}
}

// Issue 32 §1: an operator's key is added to the key object beside the
// submitter's, so both open it; a transfer without a key object has none
// to add to; a key file holds the key and nothing else.
func TestOperatorKeyAndKeyFiles(t *testing.T) {
	ctx := context.Background()
	store := teststack.Bucket(t, "tr-keys")
	id := message.NewTransferID("")
	if _, err := OperatorKey(ctx, store, "tr-keys", id); !errors.Is(err, gcs.ErrNotFound) || !strings.Contains(err.Error(), "has no key object") {
		t.Fatalf("operator key of a transfer without a key object: %v", err)
	}
	submitter := message.NewEndKey()
	k := message.Keys{V: message.Version, TransferID: id, SHA256: []string{message.KeyHash(submitter)}}
	_, err := store.PutSmall(ctx, "tr-keys", message.KeyObject(id), message.Encode(k), true, "application/json")
	testutil.OK(t, err)
	op, err := OperatorKey(ctx, store, "tr-keys", id)
	testutil.OK(t, err)
	b, err := store.ReadAll(ctx, "tr-keys", message.KeyObject(id))
	testutil.OK(t, err)
	var got message.Keys
	testutil.OK(t, message.Decode(b, &got))
	if !got.Opens(submitter) || !got.Opens(op) || got.Opens(message.NewEndKey()) || got.Check(id) != nil {
		t.Fatalf("key object %+v after an operator's key: want the submitter's and the operator's, nothing else", got)
	}

	dir := filepath.Join(t.TempDir(), "keys")
	testutil.OK(t, SaveKey(dir, id, submitter))
	fi, err := os.Stat(filepath.Join(dir, id))
	testutil.OK(t, err)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", fi.Mode().Perm())
	}
	if k, err := LoadKey(filepath.Join(dir, id)); err != nil || k != submitter {
		t.Fatalf("LoadKey: %q, %v", k, err)
	}
	if _, err := LoadKey(filepath.Join(dir, "t-missing")); !errors.Is(err, ErrNoKey) {
		t.Fatalf("LoadKey of a missing file: %v, want ErrNoKey", err)
	}
	if err := SaveKey(dir, "../escape", submitter); err == nil {
		t.Fatal("SaveKey of a transfer id that is not one ferry makes succeeded")
	}
}

// TestUnknownTransfersAndBadIDs: an id the bucket knows nothing of is
// ErrNotFound with a message naming the bucket and where it looked; an id
// that is not one never reaches GCS; rows staged for BigQuery under .ferry/
// are not transfers.
func TestUnknownTransfersAndBadIDs(t *testing.T) {
	ctx := context.Background()
	store := teststack.Bucket(t, "tr-unknown")
	_, err := store.PutSmall(ctx, "tr-unknown", ".ferry/results/transfers/t1.ndjson", []byte("{}\n"), true, "")
	testutil.OK(t, err)
	_, err = Status(ctx, store, "tr-unknown", "t20260101t000000-00000000")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "gs://tr-unknown") || !strings.Contains(err.Error(), ".ferry-done/") {
		t.Fatalf("Status of an unknown id = %v", err)
	}
	for _, bad := range []string{"", "../x", "a/b", "t 1", strings.Repeat("x", 200)} {
		if _, err := Status(ctx, store, "tr-unknown", bad); err == nil || errors.Is(err, ErrNotFound) {
			t.Errorf("Status(%q) = %v, want the id refused", bad, err)
		}
	}
	list, err := List(ctx, store, "tr-unknown", 10)
	if err != nil || len(list) != 0 {
		t.Fatalf("List = %+v, %v; want nothing", list, err)
	}
}

// TestListNewestFirstAndLimited: ended transfers come newest first, at most
// limit of them.
func TestListNewestFirstAndLimited(t *testing.T) {
	ctx := context.Background()
	store := teststack.Bucket(t, "tr-list")
	for i := 0; i < 3; i++ {
		id := fmt.Sprintf("k%d", i)
		d := message.Done{V: message.Version, TransferID: id, Status: message.StatusFailed, Error: "boom", Destination: "gs://tr-list/x"}
		a, err := store.PutSmall(ctx, "tr-list", message.DoneMarker(id), message.Encode(d), true, "application/json")
		testutil.OK(t, err)
		// The next marker must be created later: wait for the clock to
		// pass this one's creation time.
		teststack.Until(t, 10*time.Second, "the clock to pass the marker's creation", func() bool { return time.Now().After(a.Created) })
	}
	list, err := List(ctx, store, "tr-list", 2)
	testutil.OK(t, err)
	if len(list) != 2 || list[0].ID != "k2" || list[1].ID != "k1" || list[0].State != message.StatusFailed || list[0].Error != "boom" {
		t.Fatalf("list %+v, want k2 then k1, failed", list)
	}
}
