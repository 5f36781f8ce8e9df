package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/producer"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// Issue 13 §2, on the whole stack (producer, workers and merger over the
// Pub/Sub emulator and fake-gcs-server): a re-run with --skip-unchanged of
// a tree that is all there sends nothing and ends ok at once, with every
// file counted as skipped in the done event and the row; a re-run of a
// partly uploaded tree (objects gone, a file changed, one touched, one new)
// sends exactly the rest and leaves every object equal to its source; -n
// then skips everything that exists.
func TestRerunSkipsWhatIsThereAndFinishesTheRest(t *testing.T) {
	s := newStack(t, stackOptions{workers: 2, inlineMax: 4 << 10, bundleMax: 32 << 10})
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "tree")
	testutil.OK(t, os.MkdirAll(filepath.Join(dir, "deep", "er"), 0o755))
	var names []string
	for i := range 24 {
		name := fmt.Sprintf("f%02d.csv", i)
		if i%3 == 0 {
			name = filepath.Join("deep", name)
		}
		testutil.WriteCSV(t, filepath.Join(dir, name), int64(2_000+i*700), int64(i))
		names = append(names, name)
	}
	testutil.WriteCSV(t, filepath.Join(dir, "deep", "er", "big.csv"), 300_000, 99) // five chunks, composed
	testutil.OK(t, os.WriteFile(filepath.Join(dir, "empty.csv"), nil, 0o644))
	names = append(names, filepath.Join("deep", "er", "big.csv"), "empty.csv")
	obj := func(name string) string { return "sync/tree/" + filepath.ToSlash(name) + ".zst" }
	req := producer.Request{Sources: []string{dir}, Destination: "gs://" + s.bucket + "/sync", Codec: codec.Zstd, ChunkSize: 64 << 10, SkipUnchanged: true}

	run := func(what string, r producer.Request) (message.Done, int64) {
		t.Helper()
		before := s.chunksPublished.Load()
		done, err := s.transfer(r)
		if err != nil || done.Status != message.StatusOK {
			t.Fatalf("%s: submit %v, done %+v", what, err, done)
		}
		s.settle()
		return done, s.chunksPublished.Load() - before
	}
	generations := func() map[string]int64 {
		g := map[string]int64{}
		testutil.OK(t, s.store.List(ctx, s.bucket, "sync/", func(a gcs.Attrs) error { g[a.Name] = a.Generation; return nil }))
		return g
	}

	done, sent := run("first run", req)
	if len(done.Objects) != len(names) || done.FilesSkipped != 0 || sent == 0 {
		t.Fatalf("first run: %d objects, %d skipped, %d chunk messages; want %d, 0, some", len(done.Objects), done.FilesSkipped, sent, len(names))
	}
	s.verifyAll(req)
	gen1 := generations()

	// Unchanged: nothing is sent, everything is skipped, nothing rewritten.
	done, sent = run("unchanged re-run", req)
	if sent != 0 || len(done.Objects) != 0 || done.FilesSkipped != len(names) || len(done.Skipped) != len(names) {
		t.Fatalf("unchanged re-run: %d chunk messages, %d objects, %d skipped (%d named); want 0, 0, %d", sent, len(done.Objects), done.FilesSkipped, len(done.Skipped), len(names))
	}
	for _, n := range names {
		if !slices.Contains(done.Skipped, "gs://"+s.bucket+"/"+obj(n)) {
			t.Errorf("done event's skipped objects %v do not name gs://%s/%s", done.Skipped, s.bucket, obj(n))
		}
	}
	if row := s.row(done.TransferID); row.FilesSkipped != len(names) || row.Files != 0 || row.Status != message.StatusOK {
		t.Errorf("row of the unchanged re-run: files %d, files_skipped %d, status %s", row.Files, row.FilesSkipped, row.Status)
	}
	if gen2 := generations(); fmt.Sprint(gen2) != fmt.Sprint(gen1) {
		t.Fatalf("objects rewritten by a re-run that skipped everything:\nbefore %v\nafter  %v", gen1, gen2)
	}

	// Partly uploaded: five objects gone (one of them composed), one file
	// grown, one touched (same bytes, new mtime), one new file.
	gone := []string{names[0], names[1], names[5], names[10], "deep/er/big.csv"}
	for _, n := range gone {
		testutil.OK(t, s.store.Delete(ctx, s.bucket, obj(n)))
	}
	grown := names[2]
	f, err := os.OpenFile(filepath.Join(dir, grown), os.O_APPEND|os.O_WRONLY, 0)
	testutil.OK(t, err)
	_, err = f.WriteString("one,more,row\n")
	testutil.OK(t, err)
	testutil.OK(t, f.Close())
	touched := names[3]
	later := time.Now().Add(time.Hour)
	testutil.OK(t, os.Chtimes(filepath.Join(dir, touched), later, later))
	testutil.WriteCSV(t, filepath.Join(dir, "new.csv"), 4_000, 7)
	done, _ = run("partial re-run", req)
	wantSent := map[string]bool{obj(grown): true, obj(touched): true, obj("new.csv"): true}
	for _, n := range gone {
		wantSent[obj(n)] = true
	}
	got := map[string]bool{}
	for _, o := range done.Objects {
		got[o.Name[len("gs://"+s.bucket+"/"):]] = true
	}
	if fmt.Sprint(got) != fmt.Sprint(wantSent) || done.FilesSkipped != len(names)-len(gone)-2 {
		t.Fatalf("partial re-run wrote %v and skipped %d; want %v and %d", got, done.FilesSkipped, wantSent, len(names)-len(gone)-2)
	}
	s.verifyAll(req) // every object, sent now or before, equals its source
	s.assertClean()

	// -n: everything exists now, so everything is skipped.
	nc := req
	nc.SkipUnchanged, nc.NoClobber = false, true
	done, sent = run("no-clobber re-run", nc)
	if sent != 0 || len(done.Objects) != 0 || done.FilesSkipped != len(names)+1 {
		t.Fatalf("-n re-run: %d chunk messages, %d objects, %d skipped; want 0, 0, %d", sent, len(done.Objects), done.FilesSkipped, len(names)+1)
	}
}
