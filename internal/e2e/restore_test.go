package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/faultproxy"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/plan"
	"github.com/ferry-dev/ferry/internal/producer"
	"github.com/ferry-dev/ferry/internal/restore"
	"github.com/ferry-dev/ferry/internal/seektable"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
	"github.com/ferry-dev/ferry/internal/verify"
)

// summary runs to completion and decodes restore --json.
func summary(t *testing.T, p *proc) restore.Summary {
	t.Helper()
	if code := p.wait(2 * time.Minute); code != 0 {
		t.Fatalf("%s exited %d:\n%s", p.name, code, p.out.String())
	}
	var s restore.Summary
	out := p.out.String()
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &s); err != nil {
		t.Fatalf("%s --json: %v:\n%s", p.name, err, out)
	}
	return s
}

// Fault: kill -9 the restore binary with ranges of a large object written
// and others in flight, then run the same restore again. It keeps what the
// first run proved, fetches the rest, and the output is the source's bytes.
func TestKill9RestoreThenRerun(t *testing.T) {
	bucket := fmt.Sprintf("restore-kill-%d", time.Now().UnixNano())
	fakeGCS.CreateBucket(bucket)
	store, err := gcs.New(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	raw := testutil.CSV(t, 4_000_000, 41)
	small := testutil.CSV(t, 20_000, 42)
	teststack.FerryObject(t, store, bucket, "k/big.csv.zst", raw, teststack.FerryOptions{ChunkSize: 256 << 10, FrameSize: 64 << 10})
	teststack.FerryObject(t, store, bucket, "k/small.csv.gz", small, teststack.FerryOptions{Codec: codec.Gzip})

	// Through a proxy that lets the first ranged reads by and holds every
	// later one for a minute.
	proxy, err := faultproxy.Start("http://"+fakeGCS.Host, faultproxy.Plan{
		Match: func(r *http.Request) bool { return r.Header.Get("Range") != "" },
		Delay: time.Minute,
		Decide: func(n int, _ *http.Request) faultproxy.Fault {
			if n <= 5 {
				return faultproxy.None
			}
			return faultproxy.Slow
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	dest := t.TempDir()
	args := []string{"--json", "--concurrency", "2", "--memory", "16MiB", "--range-size", "64KiB", "gs://" + bucket + "/k", dest}
	runner := &stack{t: t}
	first := runner.start("restore-1", "restore", append(os.Environ(), "STORAGE_EMULATOR_HOST="+hostOf(proxy)), args...)
	journal := filepath.Join(dest, ".big.csv.ferry-part.log")
	teststack.Until(t, time.Minute, "ranges of big.csv in the journal and reads held by the proxy", func() bool {
		b, _ := os.ReadFile(journal)
		return bytes.Count(b, []byte("\n")) >= 3 && proxy.Counts().Slow >= 2
	})
	first.kill9()
	if _, err := os.Stat(filepath.Join(dest, "big.csv")); !os.IsNotExist(err) {
		t.Fatalf("big.csv exists after the kill: %v", err)
	}

	second := runner.start("restore-2", "restore", append(os.Environ(), "STORAGE_EMULATOR_HOST="+fakeGCS.Host), args...)
	s := summary(t, second)
	if s.Objects != 2 || s.Restored+s.Skipped != 2 || s.ResumedBytes == 0 {
		t.Fatalf("second run: %+v; want both objects done and part of big.csv resumed", s)
	}
	for name, want := range map[string][]byte{"big.csv": raw, "small.csv": small} {
		got, err := os.ReadFile(filepath.Join(dest, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: %v, %d bytes; want the source's %d", name, err, len(got), len(want))
		}
	}
	left, _ := filepath.Glob(filepath.Join(dest, ".*"))
	if len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

// A transfer through the real pipeline comes back byte for byte, every
// codec; every zstd object ends with its seek table (brief decision 4), and
// a composed one restores frame by frame from it.
func TestRestoreThroughThePipeline(t *testing.T) {
	s := newStack(t, stackOptions{workers: 2, inlineMax: 4 << 10})
	dir := filepath.Join(t.TempDir(), "data")
	testutil.WriteCSV(t, filepath.Join(dir, "big.csv"), 3_000_000, 51)
	testutil.WriteCSV(t, filepath.Join(dir, "one.csv"), 40_000, 52)
	testutil.WriteCSV(t, filepath.Join(dir, "sub", "two.csv"), 70_000, 53)
	if err := os.WriteFile(filepath.Join(dir, "empty.csv"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []codec.Codec{codec.Zstd, codec.Gzip, codec.None} {
		t.Run(string(c), func(t *testing.T) {
			req := producer.Request{Sources: []string{dir}, Destination: "gs://" + s.bucket + "/" + string(c), Codec: c, ChunkSize: 64 << 10}
			done, err := s.transfer(req)
			if err != nil || done.Status != message.StatusOK {
				t.Fatalf("transfer: %v, done %+v", err, done)
			}
			_, files, err := plan.Resolve(req.Sources, req.Destination, req.Codec)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range files {
				if _, err := verify.Object(context.Background(), s.store, s.bucket, f.Object, c, f.Path); err != nil {
					t.Fatal(err) // restore's decoder and the stock CLI agree with the source
				}
			}

			r, err := restore.New(s.store, restore.Options{RangeSize: 64 << 10, Concurrency: 4, Memory: 16 << 20})
			if err != nil {
				t.Fatal(err)
			}
			dest := t.TempDir()
			sum, err := r.Run(context.Background(), req.Destination, dest)
			if err != nil || sum.Restored != 4 {
				t.Fatalf("restore: %v, %+v", err, sum)
			}
			for _, rel := range []string{"big.csv", "one.csv", "sub/two.csv", "empty.csv"} {
				want, _ := os.ReadFile(filepath.Join(dir, rel))
				got, err := os.ReadFile(filepath.Join(dest, "data", rel))
				if err != nil || !bytes.Equal(got, want) {
					t.Errorf("%s: %v, %d bytes; want the source's %d", rel, err, len(got), len(want))
				}
			}

			if c != codec.Zstd {
				return
			}
			// Every zstd object ends with its seek table, one-chunk and
			// empty files too.
			for _, f := range files {
				stored, err := s.store.ReadAll(context.Background(), s.bucket, f.Object)
				if err != nil {
					t.Fatal(err)
				}
				n, err := seektable.TableSize(stored)
				if err == nil && n <= int64(len(stored)) {
					_, err = seektable.Parse(stored[int64(len(stored))-n:])
				}
				if err != nil {
					t.Errorf("gs://%s/%s (%d bytes) does not end with a seek table: %v", s.bucket, f.Object, len(stored), err)
				}
			}
			a, err := s.store.Attrs(context.Background(), s.bucket, "zstd/data/big.csv.zst")
			if err != nil {
				t.Fatal(err)
			}
			root, err := os.OpenRoot(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			res, err := r.Object(context.Background(), root, "big.csv", s.bucket, a)
			if err != nil {
				t.Fatal(err)
			}
			if res.Method != "frames" {
				t.Fatalf("gs://%s/%s restored by %q, want \"frames\": the composed object has no seek table (brief decision 4: the merger composes one as the last component)", s.bucket, a.Name, res.Method)
			}
		})
	}
}
