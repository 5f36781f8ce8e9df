package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/localstack"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/producer"
	"github.com/ferry-dev/ferry/internal/testutil"
	"github.com/ferry-dev/ferry/internal/waiter"
)

// scaleFiles is the tree of TestTwoHundredThousandFilesThroughTheStack.
const scaleFiles = 200_000

// Issue 16: a tree of 200,000 files goes through the whole stack (producer,
// two workers and the merger over the Pub/Sub emulator, fake-gcs-server's
// filesystem backend, whose writes do not scan the bucket): the done event
// arrives within its bound, every object exists, and the listing object
// names every file. The producer pages the manifest (200 pages) and the
// merger joins it with one listing of the destination.
func TestTwoHundredThousandFilesThroughTheStack(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	root := t.TempDir()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		// A tmpfs, when there is one: the server's files cost no disk.
		if root, err = os.MkdirTemp("/dev/shm", "ferry-e2e-scale-"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(root) })
	}
	g, err := localstack.StartGCSWith(localstack.GCSOptions{StorageRoot: filepath.Join(root, "gcs")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Stop)
	s := newStack(t, stackOptions{workers: 2, bundleMax: 256 << 10, inlineMax: 256 << 10, gcs: g})

	src := filepath.Join(root, "tree")
	want := make([]string, 0, scaleFiles) // object names, in order
	for i := range scaleFiles {
		dir := filepath.Join(src, fmt.Sprintf("d%03d", i/1000))
		if i%1000 == 0 {
			testutil.OK(t, os.MkdirAll(dir, 0o755))
		}
		name := fmt.Sprintf("f%06d.txt", i)
		testutil.OK(t, os.WriteFile(filepath.Join(dir, name), []byte(name), 0o644))
		want = append(want, fmt.Sprintf("big/tree/d%03d/%s.zst", i/1000, name))
	}
	slices.Sort(want)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	req := producer.Request{Sources: []string{src}, Destination: "gs://" + s.bucket + "/big", ChunkSize: 1 << 20, Method: "e2e-scale"}
	req.TransferID = message.NewTransferID("")
	w, err := waiter.New(ctx, s.q, s.ps.DoneTopic, req.TransferID)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Close(context.Background()) }()
	man, err := s.prod.Submit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !man.Paged() || man.Totals.Files != scaleFiles {
		t.Fatalf("manifest: paged %v, %d files; want %d in pages", man.Paged(), man.Totals.Files, scaleFiles)
	}
	done, err := w.Wait(ctx)
	if err != nil {
		t.Fatalf("no done event: %v", err)
	}
	if n := len(message.Encode(done)); done.Status != message.StatusOK || done.Files != scaleFiles || n > message.MaxDoneBytes {
		t.Fatalf("done event: %s, %d files, %d bytes (bound %d): %s", done.Status, done.Files, n, message.MaxDoneBytes, done.Error)
	}
	t.Logf("done event: %d bytes for %d files", len(message.Encode(done)), done.Files)

	// Every object exists, as the bucket lists it.
	i := 0
	err = s.store.List(ctx, s.bucket, "big/", func(a gcs.Attrs) error {
		if i < len(want) && a.Name == want[i] && a.Metadata[message.MetaTransfer] == req.TransferID {
			i++
			return nil
		}
		return fmt.Errorf("the bucket holds %s where %d objects of the transfer were expected first", a.Name, i)
	})
	if err != nil || i != scaleFiles {
		t.Fatalf("%d of %d objects listed: %v", i, scaleFiles, err)
	}

	// The listing object names every file, in order.
	r, err := s.store.NewReader(ctx, s.bucket, message.ListingObject(req.TransferID))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		var e message.ListingEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		if n >= len(want) || e.Name != "gs://"+s.bucket+"/"+want[n] || e.Generation == 0 {
			t.Fatalf("listing line %d: %+v, want %s", n+1, e, want[min(n, len(want)-1)])
		}
		n++
	}
	if err := sc.Err(); err != nil || n != scaleFiles {
		t.Fatalf("listing names %d files (%v), want %d", n, err, scaleFiles)
	}
	if left := s.staging(); len(left) != 0 && !strings.HasPrefix(left[0], message.DoneRoot) {
		t.Fatalf("staging left: %d objects, first %s", len(left), left[0])
	}
}
