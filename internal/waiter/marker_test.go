package waiter

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
)

// markers answers each look in turn: not found, a network error, then the
// marker.
type markers struct {
	answers []error
	body    []byte
	looks   []string
}

func (m *markers) ReadAll(_ context.Context, bucket, name string) ([]byte, error) {
	m.looks = append(m.looks, bucket+"/"+name)
	if len(m.answers) > 0 {
		err := m.answers[0]
		m.answers = m.answers[1:]
		return nil, err
	}
	if m.body == nil {
		return nil, gcs.ErrNotFound
	}
	return m.body, nil
}

// Issue 18 §5: a submitter without subscription rights waits on the done
// marker; a network error on the way does not end the wait.
func TestMarkerWaitsThroughMissesAndErrors(t *testing.T) {
	d := message.Done{V: message.Version, TransferID: "t1", Status: message.StatusOK, Files: 3}
	m := &markers{answers: []error{gcs.ErrNotFound, errors.New("connection reset"), gcs.ErrNotFound}, body: message.Encode(d)}
	w := NewMarker(m, "bkt", "t1")
	w.Poll = time.Millisecond
	got, err := w.Wait(context.Background())
	if err != nil || got.TransferID != "t1" || got.Files != 3 || len(m.looks) != 4 || m.looks[0] != "bkt/"+message.DoneMarker("t1") {
		t.Fatalf("Wait = %+v, %v after looks %v", got, err, m.looks)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	never := &markers{answers: []error{errors.New("connection refused")}}
	w = NewMarker(never, "bkt", "t2")
	w.Poll = time.Millisecond
	if _, err := w.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), "t2") {
		t.Fatalf("Wait = %v, want the deadline, naming the marker and the last error", err)
	}
}
