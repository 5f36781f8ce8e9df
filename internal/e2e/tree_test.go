package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/producer"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// oddTree writes a tree with what real trees hold besides files: links to a
// file, a directory, back up (a loop), nowhere and a device; a FIFO and a
// socket. It returns the tree and the files a default walk sends.
func oddTree(t *testing.T) (string, []string) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "tree")
	testutil.OK(t, os.MkdirAll(filepath.Join(root, "dir", "sub"), 0o755))
	testutil.WriteCSV(t, filepath.Join(root, "a.csv"), 20_000, 1)
	testutil.WriteCSV(t, filepath.Join(root, "dir", "sub", "b.csv"), 200_000, 2)
	teststack.OddEntries(t, root, "a.csv", "file-link.csv")
	return root, []string{"tree/a.csv", "tree/dir/sub/b.csv", "tree/file-link.csv"}
}

// listing reads a done event's listing object: final objects and skipped
// files by name.
func (s *stack) listing(d message.Done) (objects map[string]message.ListingEntry, skipped map[string]string) {
	s.t.Helper()
	name, ok := strings.CutPrefix(d.Listing, "gs://"+s.bucket+"/")
	if !ok {
		s.t.Fatalf("listing %q is not in bucket %s", d.Listing, s.bucket)
	}
	body, err := s.store.ReadAll(context.Background(), s.bucket, name)
	if err != nil {
		s.t.Fatal(err)
	}
	objects, skipped = map[string]message.ListingEntry{}, map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e message.ListingEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			s.t.Fatal(err)
		}
		if e.Skipped != "" {
			skipped[e.Path] = e.Skipped
		} else {
			objects[e.Name] = e
		}
	}
	return objects, skipped
}

// Issue 16 §3: a tree with links, a loop, a FIFO, a socket and a device
// goes through the whole stack: every regular file (and the file behind a
// link) lands byte-identical; each of the rest is skipped, counted in the
// done event and named with its reason in the listing; nothing hangs.
func TestRealTreeThroughTheStack(t *testing.T) {
	s := newStack(t, stackOptions{workers: 2, inlineMax: 64 << 10, bundleMax: 128 << 10})
	root, files := oddTree(t)
	req := producer.Request{Sources: []string{root}, Destination: "gs://" + s.bucket + "/odd", Codec: codec.Zstd, ChunkSize: 64 << 10}
	d, err := s.transfer(req)
	if err != nil || d.Status != message.StatusOK {
		t.Fatalf("transfer: %v, done %+v", err, d)
	}
	if d.Files != len(files) || d.FilesSkipped != 6 {
		t.Fatalf("done: %d files, %d skipped; want %d and 6", d.Files, d.FilesSkipped, len(files))
	}
	objects, skipped := s.listing(d)
	for _, f := range files {
		name := "gs://" + s.bucket + "/odd/" + f + ".zst"
		if e, ok := objects[name]; !ok || e.Generation == 0 {
			t.Errorf("listing lacks %s with its generation: %+v", name, e)
		}
	}
	want := map[string]string{
		"tree/dir-link": "symlink to a directory", "tree/dir/sub/up": "symlink to a directory", "tree/dangling": "dangling symlink",
		"tree/zero": "character device", "tree/fifo": "named pipe", "tree/sock": "socket",
	}
	for path, reason := range want {
		if !strings.Contains(skipped[path], reason) {
			t.Errorf("listing: %s skipped for %q, want %q", path, skipped[path], reason)
		}
	}
	s.verifyAll(req)
	s.assertClean()
	if row := s.row(d.TransferID); row.FilesSkipped != 6 || row.Files != len(files) {
		t.Fatalf("row: %d files, %d skipped", row.Files, row.FilesSkipped)
	}

	// -L walks the directory link too and skips the loop; the manifest
	// records the choice, the row and the done event count the skip.
	req.Destination += "-L"
	req.Selection.Symlinks = "follow"
	d, err = s.transfer(req)
	if err != nil || d.Status != message.StatusOK || d.Files != len(files)+1 {
		t.Fatalf("-L: %v, done %+v", err, d)
	}
	_, skipped = s.listing(d)
	if !strings.Contains(skipped["tree/dir/sub/up"], "loop") || !strings.Contains(skipped["tree/dir-link/sub/up"], "loop") {
		t.Fatalf("-L skipped %v, want both ways to the loop named", skipped)
	}
}

// Issue 16 §3: `producer serve` takes the same tree, and a request naming a
// path of several MB, or with a field name of several MB, still gets its
// failed done event: the error echoes a short prefix.
func TestRequestsOfRealTreesAndHugeInputs(t *testing.T) {
	s := newStack(t, stackOptions{workers: 2, inlineMax: 64 << 10})
	feed := s.doneFeed()
	root, files := oddTree(t)
	s.start("producer-serve", "producer", s.env("FERRY_SOURCE_ROOTS="+filepath.Dir(root)), "serve")

	s.publishRequest(fmt.Sprintf(`{"v": 1, "sources": [%q], "destination": "gs://%s/served", "chunk_size": 65536,
		"filters": ["- *.csv", "+ **"], "idempotency_key": "odd-tree"}`, filepath.Join(root, "dir"), s.bucket))
	tid := message.NewTransferID("odd-tree")
	d := feed.next(t, func(d message.Done) bool { return d.TransferID == tid })
	if d.Status != message.StatusOK || d.Files != 0 || d.FilesSkipped != 1 {
		t.Fatalf("filtered request: done %+v, want no file sent and the link skipped", d)
	}
	s.publishRequest(fmt.Sprintf(`{"v": 1, "sources": [%q], "destination": "gs://%s/served", "chunk_size": 65536, "idempotency_key": "odd-tree-2"}`, root, s.bucket))
	tid = message.NewTransferID("odd-tree-2")
	d = feed.next(t, func(d message.Done) bool { return d.TransferID == tid })
	if d.Status != message.StatusOK || d.Files != len(files) || d.FilesSkipped != 6 {
		t.Fatalf("request of the odd tree: done %+v", d)
	}

	huge := strings.Repeat("\u2028/x", 600_000) // 1.8 MB, 10.8 MB JSON-escaped in an error
	for _, tc := range []struct{ key, body string }{
		{"huge-path", fmt.Sprintf(`{"v": 1, "sources": [%q], "destination": "gs://%s/p", "idempotency_key": "huge-path"}`, filepath.Join(root, huge), s.bucket)},
		{"", `{"v": 1, "` + strings.Repeat("f", 8<<20) + `": 1}`},
	} {
		s.publishRequest(tc.body)
		d := feed.next(t, func(d message.Done) bool {
			return d.Status == message.StatusFailed && (tc.key == "" || d.TransferID == message.NewTransferID(tc.key))
		})
		if n := len(message.Encode(d)); n > message.MaxDoneBytes || len(d.Error) > message.MaxErrorBytes {
			t.Fatalf("failed done event of %d bytes (error %d bytes)", n, len(d.Error))
		}
	}
}

// Issue 18 §5: a submitter that may not create subscriptions (terraform's
// FERRY_SUBMIT_WAIT=marker) still waits for its transfer with --wait, on
// the done marker, and reports the same result.
func TestSubmitWaitsOnTheDoneMarker(t *testing.T) {
	s := newStack(t, stackOptions{workers: 1, inlineMax: 64 << 10})
	root, files := oddTree(t)
	p := s.start("producer", "producer", s.env("FERRY_SUBMIT_WAIT=marker"), "submit", "--wait", root, "gs://"+s.bucket+"/marker")
	if code := p.wait(2 * time.Minute); code != 0 {
		t.Fatalf("submit --wait with FERRY_SUBMIT_WAIT=marker: exit %d\n%s", code, tail(p.out.String(), 3000))
	}
	if want := fmt.Sprintf("ok: %d objects", len(files)); !strings.Contains(p.out.String(), want) || !strings.Contains(p.out.String(), "6 files skipped") {
		t.Fatalf("output %s, want %q and the skipped count", tail(p.out.String(), 2000), want)
	}
}
