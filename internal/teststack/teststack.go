// Package teststack gives handler tests real parts to run against without a
// broker: fake-gcs-server in the test process, reached through
// STORAGE_EMULATOR_HOST exactly as the binaries reach it, and a publisher
// that records what a handler published.
package teststack

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/localstack"
)

var server *localstack.GCS

// MainWithGCS starts fake-gcs-server, points STORAGE_EMULATOR_HOST at it,
// runs the tests and stops it. Call it from TestMain.
func MainWithGCS(m *testing.M) int {
	var err error
	server, err = localstack.StartGCS(0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer server.Stop()
	os.Setenv("STORAGE_EMULATOR_HOST", server.Host)
	return m.Run()
}

// Bucket creates a bucket for one test and returns a store and its name.
func Bucket(t testing.TB, name string) *gcs.Store {
	t.Helper()
	if server == nil {
		t.Fatal("teststack: call MainWithGCS from TestMain")
	}
	server.CreateBucket(name)
	s, err := gcs.New(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Published is one recorded message.
type Published struct {
	Data  []byte
	Attrs map[string]string
}

// Recorder is a publisher that keeps what it is given. Set Err to make
// Publish fail. It is safe for concurrent use.
type Recorder struct {
	mu   sync.Mutex
	msgs []Published
	Err  error
}

// Publish records the message, or returns r.Err.
func (r *Recorder) Publish(_ context.Context, data []byte, attrs map[string]string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Err != nil {
		return r.Err
	}
	r.msgs = append(r.msgs, Published{Data: append([]byte(nil), data...), Attrs: attrs})
	return nil
}

// Messages returns a copy of what was published.
func (r *Recorder) Messages() []Published {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Published(nil), r.msgs...)
}
