package manifest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
)

// rangeStore lists names as GCS does, in name order. The first two
// ListRange calls wait for each other: a listing in parts that runs them
// one after the other never passes that point.
type rangeStore struct {
	names []string // sorted
	both  sync.WaitGroup

	mu    sync.Mutex
	calls [][2]string
}

func newRangeStore(names []string) *rangeStore {
	s := &rangeStore{names: slices.Sorted(slices.Values(names))}
	s.both.Add(2)
	return s
}

func (s *rangeStore) ReadAll(context.Context, string, string) ([]byte, error) {
	return nil, gcs.ErrNotFound
}

func (s *rangeStore) List(ctx context.Context, bucket, prefix string, fn func(gcs.Attrs) error) error {
	return s.ListRange(ctx, bucket, prefix, "", "", fn)
}

func (s *rangeStore) ListRange(ctx context.Context, _, prefix, start, end string, fn func(gcs.Attrs) error) error {
	s.mu.Lock()
	s.calls = append(s.calls, [2]string{start, end})
	first2 := len(s.calls) <= 2
	s.mu.Unlock()
	if first2 {
		s.both.Done()
		s.both.Wait()
	}
	for _, n := range s.names {
		if strings.HasPrefix(n, prefix) && n >= start && (end == "" || n < end) {
			if err := fn(gcs.Attrs{Name: n}); err != nil {
				return err
			}
		}
	}
	return nil
}

// pagedReader is a Reader of a manifest of len(firsts) pages whose first
// objects were read as firsts (what Check leaves behind).
func pagedReader(store Store, firsts []string) *Reader {
	p := NewReader(store, "b", &message.Manifest{TransferID: "t1", Pages: make([]message.Page, len(firsts))})
	p.firsts = firsts
	return p
}

// A listing at a million files takes a thousand pages: once the pages'
// first objects are known, the parts between them are listed at once,
// and the join still sees every object once, in name order.
func TestAJoinListsThePartsBetweenPagesAtOnceAndInOrder(t *testing.T) {
	var names []string
	for i := range 50 {
		names = append(names, fmt.Sprintf("d/f%03d", i))
	}
	names = append(names, "d/a-before-the-first", "d/f010x-between", "d/zz-after-the-last", "e/other")
	store := newRangeStore(names)
	firsts := []string{"d/f000", "d/f010", "d/f020", "d/f030", "d/f040"}
	p := pagedReader(store, firsts)
	var got []string
	done := make(chan error, 1)
	go func() {
		done <- p.list(context.Background(), "d/", func(a gcs.Attrs) error { got = append(got, a.Name); return nil })
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second): // a hang, not a speed
		t.Fatal("the listing did not end: its parts were listed one after the other")
	}
	var want []string
	for _, n := range store.names {
		if strings.HasPrefix(n, "d/") {
			want = append(want, n)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("listed %v,\nwant %v", got, want)
	}
	if len(store.calls) != len(firsts) {
		t.Errorf("%d listings, want one per page (%d): %v", len(store.calls), len(firsts), store.calls)
	}
}

func TestAJoinThatStopsEarlyStopsEveryPart(t *testing.T) {
	var names []string
	for i := range 5000 {
		names = append(names, fmt.Sprintf("d/f%05d", i))
	}
	store := newRangeStore(names)
	p := pagedReader(store, []string{"d/f00000", "d/f01000", "d/f02000", "d/f03000", "d/f04000"})
	stop := errors.New("enough")
	n := 0
	err := p.list(context.Background(), "d/", func(gcs.Attrs) error {
		if n++; n == 10 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 10 {
		t.Fatalf("list = %v after %d entries, want the callback's error after 10", err, n)
	}
}

func TestWithoutThePagesFirstObjectsAJoinListsOnce(t *testing.T) {
	store := newRangeStore([]string{"d/a", "d/b"})
	store.both.Add(-1) // one listing: nothing to wait for
	p := pagedReader(store, nil)
	p.man.Pages = make([]message.Page, 3)
	var got []string
	if err := p.list(context.Background(), "d/", func(a gcs.Attrs) error { got = append(got, a.Name); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"d/a", "d/b"}) || len(store.calls) != 1 {
		t.Errorf("listed %v in %d listings, want [d/a d/b] in one", got, len(store.calls))
	}
}
