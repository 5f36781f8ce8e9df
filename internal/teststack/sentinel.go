package teststack

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// Sentinel is a file that a handler under test must never touch, in a
// directory whose listing must not change either. Make the directory's
// other entries first: the listing is taken when the sentinel is made.
type Sentinel struct {
	Path    string
	dir     string
	content []byte
	st      os.FileInfo
	listing string
}

// NewSentinel writes a sentinel file into dir.
func NewSentinel(tb testing.TB, dir string) *Sentinel {
	tb.Helper()
	s := &Sentinel{Path: filepath.Join(dir, "sentinel.txt"), dir: dir, content: []byte("not the handler's to read, write or remove")}
	if err := os.WriteFile(s.Path, s.content, 0o600); err != nil {
		tb.Fatal(err)
	}
	st, err := os.Stat(s.Path)
	if err != nil {
		tb.Fatal(err)
	}
	s.st = st
	s.listing = list(dir)
	return s
}

// Check fails t when the sentinel's bytes, mode or time changed, or when an
// entry appeared in or vanished from its directory.
func (s *Sentinel) Check(t testing.TB) {
	t.Helper()
	got, rerr := os.ReadFile(s.Path)
	now, serr := os.Stat(s.Path)
	if rerr != nil || serr != nil || !bytes.Equal(got, s.content) || !now.ModTime().Equal(s.st.ModTime()) || now.Mode() != s.st.Mode() {
		t.Fatalf("%s was touched: %v %v", s.Path, rerr, serr)
	}
	if after := list(s.dir); after != s.listing {
		t.Fatalf("entries of %s changed: %s, was %s", s.dir, after, s.listing)
	}
}

func list(dir string) string {
	es, _ := os.ReadDir(dir)
	names := make([]string, 0, len(es))
	for _, e := range es {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

// SyncBuffer is a bytes.Buffer that a process's output and a test may use
// at once.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Until polls cond every 20 ms and fails the test with what once d has
// passed without it holding. A deadline, not a sleep: the suite must pass on
// a busy machine, so d is generous and never what a test measures.
func Until(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	UntilSays(t, d, what, func() (bool, string) { return cond(), "" })
}

// UntilSays is Until for a cond that also says what it saw; the failure
// quotes its last word.
func UntilSays(t testing.TB, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, saw := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			if saw != "" {
				saw = ": " + saw
			}
			t.Fatalf("timed out after %v waiting for %s%s", d, what, saw)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
