package requests

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/producer"
	"github.com/ferry-dev/ferry/internal/queue"
	"github.com/ferry-dev/ferry/internal/teststack"
)

// memStore knows every bucket and keeps nothing: the requests tests are
// about what a request may ask for, not about GCS.
type memStore struct{}

func (memStore) BucketExists(context.Context, string) error                        { return nil }
func (memStore) ReadAll(context.Context, string, string) ([]byte, error)           { return nil, gcs.ErrNotFound }
func (memStore) Delete(context.Context, string, string) error                      { return nil }
func (memStore) Touch(context.Context, string, string, string, string) error       { return nil }
func (memStore) Patch(context.Context, string, gcs.Attrs, map[string]string) error { return nil }
func (memStore) Attrs(context.Context, string, string) (gcs.Attrs, error) {
	return gcs.Attrs{}, gcs.ErrNotFound
}
func (memStore) List(context.Context, string, string, func(gcs.Attrs) error) error { return nil }
func (memStore) PutSmall(context.Context, string, string, []byte, bool, string) (gcs.Attrs, error) {
	return gcs.Attrs{}, nil
}
func (memStore) NewRangeReader(context.Context, string, string, int64, int64) (io.ReadCloser, error) {
	return nil, gcs.ErrNotFound
}

// TestRequestsReadOnlyUnderSourceRoots: producer serve refuses every request
// when FERRY_SOURCE_ROOTS is empty, refuses sources that resolve outside
// the roots (by "..", an absolute path or a link) and buckets outside
// FERRY_BUCKETS, each with one failed done event naming the cause and
// nothing published; a request inside the roots runs.
func TestRequestsReadOnlyUnderSourceRoots(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "exports")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(base, "secret.txt")
	for path, body := range map[string]string{secret: "secret", filepath.Join(root, "ok.csv"): "a,b\n1,2\n"} {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(secret, filepath.Join(root, "link.txt")); err != nil {
		t.Fatal(err)
	}
	req := func(src, bucket string) string {
		return fmt.Sprintf(`{"v":1,"sources":[%q],"destination":"gs://%s/p","chunk_size":1048576}`, src, bucket)
	}
	for _, tc := range []struct {
		name    string
		roots   []string
		buckets []string
		body    string
		want    string // "" means the transfer runs
	}{
		{"no roots configured", nil, nil, req(filepath.Join(root, "ok.csv"), "bkt"), "no FERRY_SOURCE_ROOTS"},
		{"dot-dot", []string{root}, nil, req(root+"/../secret.txt", "bkt"), "outside the source roots (FERRY_SOURCE_ROOTS=" + root},
		{"absolute", []string{root}, nil, req(secret, "bkt"), "outside the source roots"},
		{"symlink out", []string{root}, nil, req(filepath.Join(root, "link.txt"), "bkt"), "outside the source roots"},
		{"directory with a link out", []string{root}, nil, req(root, "bkt"), "link.txt"},
		{"bucket not allowed", []string{root}, []string{"landing"}, req(filepath.Join(root, "ok.csv"), "other"), "FERRY_BUCKETS=landing"},
		{"malformed", []string{root}, nil, `{"v":1,"sources":"x"}`, "request message"},
		{"no_clobber and overwrite", []string{root}, nil, strings.Replace(req(filepath.Join(root, "ok.csv"), "bkt"), `"v":1`, `"v":1,"no_clobber":true,"overwrite":true`, 1), "--no-clobber (-n) and --overwrite"},
		{"skip_unchanged", []string{root}, nil, strings.Replace(req(filepath.Join(root, "ok.csv"), "bkt"), `"v":1`, `"v":1,"skip_unchanged":true,"checksum":true`, 1), ""},
		{"end_key_sha256 not a hash", []string{root}, nil, strings.Replace(req(filepath.Join(root, "ok.csv"), "bkt"), `"v":1`, `"v":1,"end_key_sha256":"secret"`, 1), "end_key_sha256"},
		{"inside", []string{root}, []string{"landing"}, req(filepath.Join(root, "ok.csv"), "landing"), ""},
		{"convert parquet", []string{root}, nil, with(req(filepath.Join(root, "ok.csv"), "bkt"), `"convert":"parquet","schema":[{"name":"a","type":"INT64"},{"name":"b","type":"NUMERIC","precision":"10","scale":"0"}]`), ""},
		{"convert to what ferry does not write", []string{root}, nil, with(req(filepath.Join(root, "ok.csv"), "bkt"), `"convert":"orc"`), `convert "orc": want parquet`},
		{"a schema the header does not name", []string{root}, nil, with(req(filepath.Join(root, "ok.csv"), "bkt"), `"convert":"parquet","schema":[{"name":"a","type":"INT64"}]`), "line 1: the header has 2 columns, the schema 1"},
		{"bq_table without convert", []string{root}, nil, with(req(filepath.Join(root, "ok.csv"), "bkt"), `"bq_table":"proj-1.landing.t"`), "which BigQuery reads gzip'd or uncompressed, not zstd: add --codec gzip"},
		{"bad_rows without a conversion", []string{root}, nil, with(req(filepath.Join(root, "ok.csv"), "bkt"), `"bad_rows":5`), "bad rows 5 without --convert parquet"},
		{"bad_rows past the bound", []string{root}, nil, with(req(filepath.Join(root, "ok.csv"), "bkt"), `"convert":"parquet","bad_rows":10001`), "bad rows 10001: want 0 to 10000"},
		{"an encoding ferry does not read", []string{root}, nil, with(req(filepath.Join(root, "ok.csv"), "bkt"), `"convert":"parquet","encoding":"EBCDIC"`), `encoding "EBCDIC": want UTF-8, ISO-8859-1`},
		{"null markers without a conversion", []string{root}, nil, with(req(filepath.Join(root, "ok.csv"), "bkt"), `"null_markers":["NULL"]`), "null marker without --convert parquet"},
		{"bq_table in a dataset not allowed", []string{root}, nil, with(req(filepath.Join(root, "ok.csv"), "bkt"), `"convert":"parquet","bq_table":"proj-1.landing.t"`), "dataset proj-1.landing is not in FERRY_BQ_LOAD_DATASETS"},
		{"bq_write unknown", []string{root}, nil, with(req(filepath.Join(root, "ok.csv"), "bkt"), `"convert":"parquet","bq_table":"proj-1.landing.t","bq_write":"merge"`), `bq write "merge"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chunks, done := &teststack.Recorder{}, &teststack.Recorder{}
			p := producer.New(producer.Options{Store: memStore{}, Chunks: chunks, Events: &teststack.Recorder{}, SpoolDir: t.TempDir(), Buckets: tc.buckets})
			s := New(p, done, Options{Defaults: Defaults{ChunkSize: 1 << 20}, SourceRoots: tc.roots, Buckets: tc.buckets})
			err := s.Handle(context.Background(), queue.Message{ID: "m1", Data: []byte(tc.body)})
			if tc.want == "" {
				if err != nil || len(chunks.Messages()) != 1 || len(done.Messages()) != 0 {
					t.Fatalf("Handle = %v, %d chunks, %d done events; want the transfer to run", err, len(chunks.Messages()), len(done.Messages()))
				}
				return
			}
			if !errors.Is(err, queue.ErrPermanent) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Handle = %v, want a permanent error naming %q", err, tc.want)
			}
			var d message.Done
			msgs := done.Messages()
			if len(msgs) != 1 || message.Decode(msgs[0].Data, &d) != nil || d.Status != message.StatusFailed || !strings.Contains(d.Error, tc.want) {
				t.Fatalf("done events %v, want one failed event naming %q", msgs, tc.want)
			}
			if len(chunks.Messages()) != 0 {
				t.Fatal("a refused request published chunks")
			}
		})
	}
}

// with adds fields to a request's JSON.
func with(body, fields string) string { return strings.Replace(body, `"v":1`, `"v":1,`+fields, 1) }

// keyStore is memStore keeping the key objects written.
type keyStore struct {
	memStore
	keys map[string][]byte
}

func (s *keyStore) PutSmall(_ context.Context, _, name string, data []byte, _ bool, _ string) (gcs.Attrs, error) {
	if strings.HasPrefix(name, message.KeyRoot) {
		s.keys[name] = data
	}
	return gcs.Attrs{}, nil
}

// Issue 32 §1: a request's end_key_sha256 is listed in the transfer's key
// object beside the producer's own key, so that the requester can cancel
// the transfer with the key it kept.
func TestRequestersKeyOpensItsTransfer(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "ok.csv"), []byte("a,b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mine := message.NewEndKey()
	body := fmt.Sprintf(`{"v":1,"sources":[%q],"destination":"gs://bkt/p","end_key_sha256":%q}`, filepath.Join(root, "ok.csv"), message.KeyHash(mine))
	store := &keyStore{keys: map[string][]byte{}}
	chunks := &teststack.Recorder{}
	p := producer.New(producer.Options{Store: store, Chunks: chunks, Events: &teststack.Recorder{}, SpoolDir: t.TempDir()})
	s := New(p, &teststack.Recorder{}, Options{Defaults: Defaults{ChunkSize: 1 << 20}, SourceRoots: []string{root}})
	if err := s.Handle(context.Background(), queue.Message{ID: "m-key", Data: []byte(body)}); err != nil {
		t.Fatal(err)
	}
	tid := message.NewTransferID("pubsub-message:m-key")
	var k message.Keys
	if err := message.Decode(store.keys[message.KeyObject(tid)], &k); err != nil {
		t.Fatalf("key object of %s: %v (written: %d)", tid, err, len(store.keys))
	}
	if !k.Opens(mine) || len(k.SHA256) != 2 || k.Check(tid) != nil {
		t.Fatalf("key object %+v: want the requester's key and the producer's", k)
	}
}

// progressOnly is a submitter whose progress counters the test moves.
type progressOnly struct{ read, compressed int64 }

func (*progressOnly) Submit(context.Context, producer.Request) (*message.Manifest, error) {
	return nil, errors.New("not used")
}
func (p *progressOnly) Progress() (int64, int64) { return p.read, p.compressed }

// Issue 16 §3: a request stuck past FERRY_REQUEST_STALL (a read hung in the
// kernel) is named for /readyz; progress of any kind, or no request in
// flight, clears it. The clock is the test's.
func TestStalledNamesRequestsThatMakeNoProgress(t *testing.T) {
	p := &progressOnly{}
	s := New(p, &teststack.Recorder{}, Options{})
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	const after = 10 * time.Minute
	if err := s.Stalled(t0, after); err != nil {
		t.Fatalf("idle: %v", err)
	}
	s.inflight.Add(1)
	if err := s.Stalled(t0.Add(time.Minute), after); err != nil {
		t.Fatalf("one request, a minute in: %v", err)
	}
	err := s.Stalled(t0.Add(12*time.Minute), after)
	if err == nil || !strings.Contains(err.Error(), "1 requests in flight walked, read and compressed nothing for 12m0s") {
		t.Fatalf("stuck since the last look with none in flight, 12 minutes ago: %v", err)
	}
	p.read += 4096
	if err := s.Stalled(t0.Add(13*time.Minute), after); err != nil {
		t.Fatalf("after progress: %v", err)
	}
	s.walked.Add(1) // the walk reports found files: progress too
	if err := s.Stalled(t0.Add(30*time.Minute), after); err != nil {
		t.Fatalf("after walking: %v", err)
	}
	if err := s.Stalled(t0.Add(50*time.Minute), after); err == nil {
		t.Fatal("stuck again for 20 minutes: no error")
	}
	s.inflight.Add(-1)
	if err := s.Stalled(t0.Add(51*time.Minute), after); err != nil {
		t.Fatalf("no request in flight: %v", err)
	}
}
