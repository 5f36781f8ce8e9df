package waiter

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/queue"
)

// fakeDone delivers a fixed list of messages on one subscription, then
// blocks until its context ends, as a quiet subscription does.
type fakeDone struct {
	msgs          [][]byte
	subs, deleted []string
}

func (f *fakeDone) EnsureSubscription(_ context.Context, s queue.Subscription) error {
	f.subs = append(f.subs, s.ID)
	return nil
}

func (f *fakeDone) DeleteSubscription(_ context.Context, id string) error {
	f.deleted = append(f.deleted, id)
	return nil
}

func (f *fakeDone) Receive(ctx context.Context, _ string, _ queue.ReceiveSettings, h queue.Handler) error {
	for i, m := range f.msgs {
		if err := h(ctx, queue.Message{ID: string(rune('a' + i)), Data: m}); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
	}
	<-ctx.Done()
	return ctx.Err()
}

// TestWaitReturnsOnlyItsTransfersDoneEvent: other transfers' events and
// undecodable messages are passed over; the subscription is removed on
// Close; with no event, Wait ends with its context and names the transfer.
func TestWaitReturnsOnlyItsTransfersDoneEvent(t *testing.T) {
	mine := message.Done{V: message.Version, TransferID: "t-mine", Status: message.StatusOK}
	other := message.Done{V: message.Version, TransferID: "t-other", Status: message.StatusFailed}
	q := &fakeDone{msgs: [][]byte{[]byte("garbage"), message.Encode(other), message.Encode(mine)}}
	ctx := context.Background()
	w, err := New(ctx, q, "ferry-done", "t-mine")
	if err != nil {
		t.Fatal(err)
	}
	d, err := w.Wait(ctx)
	if err != nil || d.TransferID != "t-mine" || d.Status != message.StatusOK {
		t.Fatalf("Wait = %+v, %v", d, err)
	}
	if err := w.Close(ctx); err != nil || len(q.subs) != 1 || len(q.deleted) != 1 || q.deleted[0] != q.subs[0] || !strings.Contains(q.subs[0], "t-mine") {
		t.Fatalf("subscriptions made %v, deleted %v", q.subs, q.deleted)
	}

	q = &fakeDone{msgs: [][]byte{message.Encode(other)}}
	w, _ = New(ctx, q, "ferry-done", "t-mine")
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := w.Wait(tctx); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "t-mine") {
		t.Fatalf("Wait without an event = %v, want the deadline and the transfer named", err)
	}
}
