package producer

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// countingStore counts the calls the skip stage makes.
type countingStore struct {
	*gcs.Store
	mu     sync.Mutex
	lists  []string // prefixes listed
	attrsN int
}

func (s *countingStore) List(ctx context.Context, bucket, prefix string, fn func(gcs.Attrs) error) error {
	s.mu.Lock()
	s.lists = append(s.lists, prefix)
	s.mu.Unlock()
	return s.Store.List(ctx, bucket, prefix, fn)
}

func (s *countingStore) Attrs(ctx context.Context, bucket, name string) (gcs.Attrs, error) {
	s.mu.Lock()
	s.attrsN++
	s.mu.Unlock()
	return s.Store.Attrs(ctx, bucket, name)
}

// putFinal stores a final object as ferry would have written it for the
// file at path: its metadata says the file's size, mtime and CRC32C
// (mtime and crc32c may be overridden).
func putFinal(t *testing.T, store *gcs.Store, bucket, object, path string, mtime time.Time, crc *uint32) {
	t.Helper()
	raw, err := os.ReadFile(path)
	testutil.OK(t, err)
	st, err := os.Stat(path)
	testutil.OK(t, err)
	if mtime.IsZero() {
		mtime = st.ModTime()
	}
	c := crc32c.Checksum(raw)
	if crc != nil {
		c = *crc
	}
	md := message.FinalMetadata("earlier", int64(len(raw)), c, "zstd")
	md[message.MetaMtime] = message.FormatMtime(mtime)
	body := []byte("an earlier upload")
	_, err = store.Upload(context.Background(), bucket, object, bytes.NewReader(body), gcs.UploadOptions{
		Size: int64(len(body)), CRC32C: crc32c.Checksum(body), Metadata: md})
	testutil.OK(t, err)
}

// putDone leaves the done marker of transfer tid, ended with status.
func putDone(t *testing.T, store *gcs.Store, bucket, tid, status string) {
	t.Helper()
	d := message.Done{V: message.Version, TransferID: tid, Status: status, Destination: "gs://" + bucket}
	_, err := store.PutSmall(context.Background(), bucket, message.DoneMarker(tid), message.Encode(d), false, "application/json")
	testutil.OK(t, err)
}

// Issue 17 §3: an object another transfer wrote counts as there only once
// that transfer ended ok (or so long ago that its marker is gone). One that
// is still running, failed or was cancelled removes its final objects when
// it ends, so a file skipped over its object would be lost: such a file is
// sent. Each transfer is asked about once, however many objects it wrote.
func TestSkipTrustsOnlyObjectsOfTransfersThatEndedOK(t *testing.T) {
	const bucket = "p-skip-settled"
	gs := teststack.Bucket(t, bucket)
	dir := filepath.Join(t.TempDir(), "tree")
	testutil.OK(t, os.MkdirAll(dir, 0o755))
	writers := map[string]string{"ok": "t-ok", "ok2": "t-ok", "failed": "t-failed", "cancelled": "t-cancelled", "running": "t-running", "old": "t-old"}
	for name, tid := range writers {
		testutil.WriteCSV(t, filepath.Join(dir, name), 3_000, 1)
		raw, err := os.ReadFile(filepath.Join(dir, name))
		testutil.OK(t, err)
		st, err := os.Stat(filepath.Join(dir, name))
		testutil.OK(t, err)
		md := message.FinalMetadata(tid, int64(len(raw)), crc32c.Checksum(raw), "zstd")
		md[message.MetaMtime] = message.FormatMtime(st.ModTime())
		_, err = gs.Upload(context.Background(), bucket, "pre/tree/"+name+".zst", bytes.NewReader(raw), gcs.UploadOptions{Size: int64(len(raw)), CRC32C: crc32c.Checksum(raw), Metadata: md})
		testutil.OK(t, err)
	}
	putDone(t, gs, bucket, "t-ok", message.StatusOK)
	putDone(t, gs, bucket, "t-failed", message.StatusFailed)
	putDone(t, gs, bucket, "t-cancelled", message.StatusCancelled)
	_, err := gs.PutSmall(context.Background(), bucket, message.RunObject("t-running"), []byte("0123456789abcdef"), false, "")
	testutil.OK(t, err)

	for _, flag := range []string{"no-clobber", "skip-unchanged"} {
		t.Run(flag, func(t *testing.T) {
			store := &countingStore{Store: gs}
			p := New(Options{Store: store, Chunks: &teststack.Recorder{}, Events: &teststack.Recorder{}, SpoolDir: t.TempDir(), Concurrency: 2})
			req := Request{Sources: []string{dir}, Destination: "gs://" + bucket + "/pre", Codec: codec.Zstd, ChunkSize: 64 << 10,
				NoClobber: flag == "no-clobber", SkipUnchanged: flag == "skip-unchanged"}
			dry, err := p.DryRun(context.Background(), req)
			testutil.OK(t, err)
			var skipped, sent []string
			for _, s := range dry.Skipped {
				skipped = append(skipped, s.Path)
			}
			for _, f := range dry.Plan.Files {
				sent = append(sent, f.Rel)
			}
			slices.Sort(skipped)
			slices.Sort(sent)
			if want := []string{"tree/ok", "tree/ok2", "tree/old"}; !slices.Equal(skipped, want) {
				t.Errorf("skipped %q, want %q (objects of transfers that ended ok or long ago)", skipped, want)
			}
			if want := []string{"tree/cancelled", "tree/failed", "tree/running"}; !slices.Equal(sent, want) {
				t.Errorf("would send %q, want %q (objects of transfers that are running or did not end ok)", sent, want)
			}
			// -n stages nothing, so it records nothing to replace: a
			// manifest that did would be refused whole by the merger.
			for _, f := range dry.Plan.Files {
				if staged := flag == "skip-unchanged"; (f.Replaces != 0) != staged {
					t.Errorf("%s: %s records replacing generation %d", flag, f.Rel, f.Replaces)
				}
			}
			// Beside each writer's done marker, read once: t-old's run
			// and manifest looked for, t-running's run found, and its
			// lease looked for (none: it may be ending, so it is not
			// taken for dead). Never per object.
			if store.attrsN != 4 {
				t.Errorf("asked %d objects' attributes, want 4: one look per transfer", store.attrsN)
			}
		})
	}
}

// Issue 13 §2: -n skips every file whose final object exists;
// --skip-unchanged those whose object has the source's size and mtime
// (or, with --checksum, its size and CRC32C). Either way the destination is
// listed once, under the prefix the planned objects share, and no object
// is asked about on its own; skipped files are in the manifest with their
// reason, and only the others are sent.
func TestSkipDecidesFromOneListing(t *testing.T) {
	const bucket = "p-skip"
	gs := teststack.Bucket(t, bucket)
	dir := filepath.Join(t.TempDir(), "tree")
	testutil.OK(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	files := map[string]int64{"same.csv": 5_000, "touched.csv": 6_000, "grown.csv": 7_000, "new.csv": 8_000, "foreign.csv": 9_000, "sub/big.csv": 300_000}
	for name, size := range files {
		testutil.WriteCSV(t, filepath.Join(dir, name), size, 1)
	}
	obj := func(name string) string { return "pre/tree/" + name + ".zst" }
	src := func(name string) string { return filepath.Join(dir, name) }
	putFinal(t, gs, bucket, obj("same.csv"), src("same.csv"), time.Time{}, nil)
	putFinal(t, gs, bucket, obj("sub/big.csv"), src("sub/big.csv"), time.Time{}, nil)
	putFinal(t, gs, bucket, obj("touched.csv"), src("touched.csv"), time.Unix(1_000_000, 0), nil) // same bytes, other mtime
	wrong := uint32(1)
	putFinal(t, gs, bucket, obj("grown.csv"), src("grown.csv"), time.Time{}, &wrong) // same mtime, other content...
	testutil.OK(t, os.Truncate(src("grown.csv"), 6_999))                             // ...and now another size
	body := []byte("someone else's object, no ferry metadata")
	_, err := gs.Upload(context.Background(), bucket, obj("foreign.csv"), bytes.NewReader(body), gcs.UploadOptions{Size: int64(len(body)), CRC32C: crc32c.Checksum(body)})
	testutil.OK(t, err)
	// An object outside the tree, under the same prefix, changes nothing.
	_, err = gs.PutSmall(context.Background(), bucket, "pre/other.zst", []byte("x"), false, "")
	testutil.OK(t, err)
	// The transfer that wrote them ended ok: one read of its done marker.
	putDone(t, gs, bucket, "earlier", message.StatusOK)

	for _, tc := range []struct {
		name    string
		req     func(*Request)
		skipped map[string]string // path → reason
	}{
		{"no-clobber", func(r *Request) { r.NoClobber = true }, map[string]string{
			"tree/same.csv": SkipExists, "tree/sub/big.csv": SkipExists, "tree/touched.csv": SkipExists, "tree/grown.csv": SkipExists, "tree/foreign.csv": SkipExists}},
		{"skip-unchanged", func(r *Request) { r.SkipUnchanged = true }, map[string]string{
			"tree/same.csv": SkipUnchanged, "tree/sub/big.csv": SkipUnchanged}},
		{"checksum", func(r *Request) { r.SkipUnchanged, r.Checksum = true, true }, map[string]string{
			"tree/same.csv": SkipSameContent, "tree/sub/big.csv": SkipSameContent, "tree/touched.csv": SkipSameContent}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &countingStore{Store: gs}
			chunks := &teststack.Recorder{}
			p := New(Options{Store: store, Chunks: chunks, Events: &teststack.Recorder{}, SpoolDir: t.TempDir(), Concurrency: 2})
			req := Request{Sources: []string{dir}, Destination: "gs://" + bucket + "/pre", Codec: codec.Zstd, ChunkSize: 64 << 10}
			tc.req(&req)
			man, err := p.Submit(context.Background(), req)
			testutil.OK(t, err)
			// No merger ends it here: free the destination as one would.
			testutil.OK(t, gs.Delete(context.Background(), bucket, message.LeaseObject(man.TransferID)))
			lists := slices.DeleteFunc(store.lists, func(p string) bool { return p == message.LeaseRoot })
			if !slices.Equal(lists, []string{"pre/tree/"}) || store.attrsN != 0 {
				t.Fatalf("listed %q and asked %d objects' attributes; want one listing of pre/tree/ and none", store.lists, store.attrsN)
			}
			got := map[string]string{}
			for _, s := range man.Skipped {
				got[s.Path] = s.Reason
				if s.Object != "pre/"+s.Path+".zst" {
					t.Errorf("skipped %s as object %s", s.Path, s.Object)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.skipped) {
				t.Fatalf("skipped %v, want %v", got, tc.skipped)
			}
			sent := map[string]bool{}
			for _, m := range decodeAll(t, chunks, p.o.SpoolDir) {
				for _, part := range m.c.Parts {
					sent[part.Path] = true
					if m.c.Overwrite != req.SkipUnchanged {
						t.Errorf("chunk of %s: overwrite %v; --skip-unchanged replaces what changed, -n never", part.Path, m.c.Overwrite)
					}
				}
			}
			for _, f := range man.Files {
				if _, skip := tc.skipped[f.Path]; skip || !sent[f.Path] {
					t.Errorf("file %s in the manifest: skipped %v, sent %v", f.Path, skip, sent[f.Path])
				}
			}
			if len(man.Files)+len(man.Skipped) != len(files) || len(sent) != len(man.Files) {
				t.Fatalf("%d files sent (%v) and %d skipped, of %d", len(man.Files), sent, len(man.Skipped), len(files))
			}
			// The progress bar's total: what is sent, skipped files off.
			if p.Planned() != man.Totals.Bytes {
				t.Fatalf("Planned() = %d, want the %d bytes sent", p.Planned(), man.Totals.Bytes)
			}
		})
	}
}

// A tree whose every file is skipped seals an empty manifest at once.
func TestEverythingSkippedSealsAnEmptyTransfer(t *testing.T) {
	const bucket = "p-skip-all"
	gs := teststack.Bucket(t, bucket)
	src := filepath.Join(t.TempDir(), "one.csv")
	testutil.WriteCSV(t, src, 1_000, 1)
	putFinal(t, gs, bucket, "x/one.csv.zst", src, time.Time{}, nil)
	chunks := &teststack.Recorder{}
	p := New(Options{Store: gs, Chunks: chunks, Events: &teststack.Recorder{}, SpoolDir: t.TempDir()})
	man, err := p.Submit(context.Background(), Request{Sources: []string{src}, Destination: "gs://" + bucket + "/x", ChunkSize: 1 << 20, SkipUnchanged: true})
	testutil.OK(t, err)
	if len(man.Files) != 0 || len(man.Skipped) != 1 || len(chunks.Messages()) != 0 || !man.Sealed {
		t.Fatalf("manifest %+v with %d chunk messages; want sealed, nothing sent, one file skipped", man, len(chunks.Messages()))
	}
}

// -n over the objects of transfers that never ended: those of one that no
// longer runs (its ferry cp gone, its lease stale) are skipped and become
// this transfer's (ferry-transfer patched, ferry-adopted naming the dead
// one), so that the dead one's clean-up spares them; those of one that may
// still run (no lease: it is ending) are sent. A dry run says the same and
// patches nothing.
func TestNoClobberAdoptsTheObjectsOfATransferThatNoLongerRuns(t *testing.T) {
	const bucket = "p-skip-adopt"
	gs := teststack.Bucket(t, bucket)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "tree")
	testutil.OK(t, os.MkdirAll(dir, 0o755))
	gone := exec.Command("true")
	testutil.OK(t, gone.Run())
	host, _ := os.Hostname()
	dead, stale, ending := message.NewTransferID(""), message.NewTransferID(""), message.NewTransferID("")
	now := time.Now().Add(message.LeaseStaleAfter + time.Minute)
	for name, tid := range map[string]string{"dead.csv": dead, "stale.csv": stale, "ending.csv": ending} {
		testutil.WriteCSV(t, filepath.Join(dir, name), 3_000, 1)
		body := []byte("the object " + tid + " wrote")
		md := message.FinalMetadata(tid, 3_000, 1, "zstd")
		_, err := gs.Upload(ctx, bucket, "pre/tree/"+name+".zst", bytes.NewReader(body), gcs.UploadOptions{Size: int64(len(body)), CRC32C: crc32c.Checksum(body), Metadata: md})
		testutil.OK(t, err)
		_, err = gs.PutSmall(ctx, bucket, message.RunObject(tid), []byte("0123456789abcdef"), false, "")
		testutil.OK(t, err)
	}
	// dead's ferry cp is gone from this host; stale's lease was last
	// renewed over LeaseStaleAfter ago (the producer's clock is moved on);
	// both leases are for other scopes than this transfer's, so only the
	// objects tell of them.
	for tid, holder := range map[string]string{dead: fmt.Sprintf("%s %d", host, gone.Process.Pid), stale: "another-host 1"} {
		l := message.Lease{V: message.Version, TransferID: tid, Destination: "gs://" + bucket + "/pre", Scope: "pre/", Holder: holder, Renews: true}
		_, err := gs.PutSmall(ctx, bucket, message.LeaseObject(tid), message.Encode(l), true, "application/json")
		testutil.OK(t, err)
	}
	p := New(Options{Store: gs, Chunks: &teststack.Recorder{}, Events: &teststack.Recorder{}, SpoolDir: t.TempDir(), Concurrency: 1,
		Now: func() time.Time { return now }})
	req := Request{Sources: []string{dir}, Destination: "gs://" + bucket + "/pre", Codec: codec.Zstd, ChunkSize: 64 << 10, NoClobber: true}
	skippedOf := func(sk []message.Skipped) []string {
		var paths []string
		for _, s := range sk {
			paths = append(paths, s.Path)
		}
		slices.Sort(paths)
		return paths
	}
	writer := func(name string) (string, string) {
		a, err := gs.Attrs(ctx, bucket, "pre/tree/"+name+".zst")
		testutil.OK(t, err)
		return a.Metadata[message.MetaTransfer], a.Metadata[message.MetaAdopted]
	}
	want := []string{"tree/dead.csv", "tree/stale.csv"}

	dry, err := p.DryRun(ctx, req)
	testutil.OK(t, err)
	if got := skippedOf(dry.Skipped); !slices.Equal(got, want) {
		t.Fatalf("a dry run would skip %q, want %q", got, want)
	}
	if tid, adopted := writer("dead.csv"); tid != dead || adopted != "" {
		t.Fatalf("a dry run patched the dead transfer's object: ferry-transfer %s, ferry-adopted %q", tid, adopted)
	}

	man, err := p.Submit(ctx, req)
	testutil.OK(t, err)
	testutil.OK(t, gs.Delete(ctx, bucket, message.LeaseObject(man.TransferID)))
	if got := skippedOf(man.Skipped); !slices.Equal(got, want) {
		t.Fatalf("skipped %q, want %q", got, want)
	}
	if len(man.Files) != 1 || man.Files[0].Path != "tree/ending.csv" {
		t.Fatalf("sent %+v, want tree/ending.csv only (its transfer may still be ending)", man.Files)
	}
	for name, was := range map[string]string{"dead.csv": dead, "stale.csv": stale} {
		if tid, adopted := writer(name); tid != man.TransferID || adopted != was {
			t.Errorf("%s: ferry-transfer %s, ferry-adopted %q; want %s and %s", name, tid, adopted, man.TransferID, was)
		}
		b, err := gs.ReadAll(ctx, bucket, "pre/tree/"+name+".zst")
		testutil.OK(t, err)
		if string(b) != "the object "+was+" wrote" {
			t.Errorf("%s holds %q after its adoption", name, b)
		}
	}
	if tid, adopted := writer("ending.csv"); tid != ending || adopted != "" {
		t.Errorf("ending.csv: ferry-transfer %s, ferry-adopted %q; want it left to %s", tid, adopted, ending)
	}
}
