package engine

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/ferry-dev/ferry/internal/queue"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// heldQueue keeps what is published, for the test to deliver.
type heldQueue struct {
	mu   sync.Mutex
	msgs []queue.Message
}

func (q *heldQueue) Publish(_ context.Context, data []byte, attrs map[string]string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.msgs = append(q.msgs, queue.Message{Data: data, Attributes: attrs, DeliveryAttempt: 1})
	return nil
}

// waitDone runs s.Wait and reports its result on the channel it returns.
func waitDone(s *shardChunks) chan error {
	ch := make(chan error, 1)
	go func() { ch <- s.Wait(context.Background()) }()
	return ch
}

// An agent writes a shard's page only once every chunk of the shard is
// stored: Wait returns once the uploaders acked each message the shard
// published, not before, and not for another shard's; a message that
// fails on its last delivery ends the wait with its error, so that the
// shard is sent again instead of its page naming a chunk never stored.
func TestAShardWaitsForEveryChunkItPublished(t *testing.T) {
	q := &heldQueue{}
	tr := newTracker(q, 5)
	a, b := tr.shard(), tr.shard()
	ctx := context.Background()
	for range 3 {
		testutil.OK(t, a.Publish(ctx, []byte("a"), map[string]string{"transfer_id": "t"}))
	}
	testutil.OK(t, b.Publish(ctx, []byte("b"), nil))
	wa, wb := waitDone(a), waitDone(b)
	ok := tr.handle(func(context.Context, queue.Message) error { return nil })
	failing := tr.handle(func(context.Context, queue.Message) error { return errors.New("GCS said 503") })

	for _, m := range q.msgs[:2] {
		testutil.OK(t, ok(ctx, m))
	}
	// A failure with deliveries left is no end: the message comes again.
	if err := failing(ctx, q.msgs[2]); err == nil {
		t.Fatal("the failing handler's error was lost")
	}
	select {
	case err := <-wa:
		t.Fatalf("shard a stopped waiting (%v) with a chunk not stored", err)
	default:
	}
	testutil.OK(t, ok(ctx, q.msgs[2]))
	testutil.OK(t, <-wa)

	last := q.msgs[3]
	last.DeliveryAttempt = 5
	_ = failing(ctx, last)
	if err := <-wb; err == nil || !strings.Contains(err.Error(), "GCS said 503") || !strings.Contains(err.Error(), "delivery 5") {
		t.Fatalf("shard b's wait after its chunk's last delivery failed: %v", err)
	}
}
