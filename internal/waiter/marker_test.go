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
	objects map[string]gcs.Attrs // bucket/name
}

func (m *markers) Attrs(_ context.Context, bucket, name string) (gcs.Attrs, error) {
	a, ok := m.objects[bucket+"/"+name]
	if !ok {
		return gcs.Attrs{}, gcs.ErrNotFound
	}
	return a, nil
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
	objects := map[string]gcs.Attrs{}
	for _, n := range []string{"a", "b", "c"} {
		d.Objects = append(d.Objects, message.DoneObject{Name: "gs://bkt/" + n, Size: 3, CRC32C: 7, Generation: 9})
		objects["bkt/"+n] = gcs.Attrs{Name: n, Size: 3, CRC32C: 7, Generation: 9}
	}
	m := &markers{answers: []error{gcs.ErrNotFound, errors.New("connection reset"), gcs.ErrNotFound}, body: message.Encode(d), objects: objects}
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

// Issue 42 §3: the submitter's role may write .ferry-done/, so a marker is
// a claim: one that says ok over objects GCS does not hold as it says (or
// names none, or is another transfer's) is not believed.
func TestAForgedMarkerIsNotBelieved(t *testing.T) {
	held := map[string]gcs.Attrs{"bkt/x": {Name: "x", Size: 3, CRC32C: 7, Generation: 9}}
	for name, d := range map[string]message.Done{
		"no object named":     {Files: 1},
		"an object not there": {Files: 1, Objects: []message.DoneObject{{Name: "gs://bkt/y", Size: 3, CRC32C: 7}}},
		"other bytes":         {Files: 1, Objects: []message.DoneObject{{Name: "gs://bkt/x", Size: 3, CRC32C: 8, Generation: 9}}},
		"another bucket":      {Files: 1, Objects: []message.DoneObject{{Name: "gs://other/x", Size: 3, CRC32C: 7}}},
		"another transfer":    {TransferID: "t9", Files: 1, Objects: []message.DoneObject{{Name: "gs://bkt/x", Size: 3, CRC32C: 7, Generation: 9}}},
	} {
		d.V, d.Status = message.Version, message.StatusOK
		if d.TransferID == "" {
			d.TransferID = "t1"
		}
		w := NewMarker(&markers{body: message.Encode(d), objects: held}, "bkt", "t1")
		if _, err := w.Wait(context.Background()); !errors.Is(err, ErrUnconfirmed) {
			t.Errorf("%s: %v, want it not believed", name, err)
		}
	}
	ok := message.Done{V: message.Version, TransferID: "t1", Status: message.StatusOK, Files: 1,
		Objects: []message.DoneObject{{Name: "gs://bkt/x", Size: 3, CRC32C: 7, Generation: 9}}}
	if _, err := NewMarker(&markers{body: message.Encode(ok), objects: held}, "bkt", "t1").Wait(context.Background()); err != nil {
		t.Errorf("a true marker: %v", err)
	}
}
