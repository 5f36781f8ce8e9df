package producer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/plan"
	"github.com/ferry-dev/ferry/internal/spool/spooltest"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(teststack.MainWithGCS(m)) }

// peakHeapGrowth submits a file of size bytes with a 16 MiB buffer budget and
// returns how far the heap grew above where it started.
func peakHeapGrowth(t *testing.T, bucket string, size int64) int64 {
	t.Helper()
	store := teststack.Bucket(t, bucket)
	src := filepath.Join(t.TempDir(), "big.csv")
	testutil.WriteCSV(t, src, size, 1)
	p := New(Options{Store: store, Chunks: &teststack.Recorder{}, Events: &teststack.Recorder{}, SpoolDir: t.TempDir(),
		Concurrency: 2, MemoryLimit: 16 << 20})
	man, growth := heapGrowth(t, func() (*message.Manifest, error) {
		return p.Submit(context.Background(), Request{Sources: []string{src}, Destination: "gs://" + bucket + "/x", ChunkSize: 2 << 20})
	})
	if n := len(man.Files[0].Chunks); n != plan.ChunkCount(man.Files[0].Size, 2<<20) {
		t.Fatalf("%d chunks for %d bytes", n, man.Files[0].Size)
	}
	return growth
}

// TestMemoryDoesNotGrowWithFileSize streams a 16 MiB and a 160 MiB file
// through the same 16 MiB buffer budget: the peak heap must not follow the
// file size.
func TestMemoryDoesNotGrowWithFileSize(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 160 MiB")
	}
	small := peakHeapGrowth(t, "p-mem-small", 16<<20)
	large := peakHeapGrowth(t, "p-mem-large", 160<<20)
	t.Logf("peak heap growth: %.1f MiB for a 16 MiB file, %.1f MiB for a 160 MiB file (budget 16 MiB)",
		float64(small)/(1<<20), float64(large)/(1<<20))
	if large > small+small/4+8<<20 || large > 80<<20 {
		t.Fatalf("heap grew by %.1f MiB for 160 MiB against %.1f MiB for 16 MiB: memory follows file size",
			float64(large)/(1<<20), float64(small)/(1<<20))
	}
}

func TestSubmitPublishesEveryChunkAndSealsAManifest(t *testing.T) {
	store := teststack.Bucket(t, "p-seal")
	dir := filepath.Join(t.TempDir(), "src")
	testutil.OK(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	testutil.WriteCSV(t, filepath.Join(dir, "a.csv"), 300_000, 1)
	testutil.OK(t, os.WriteFile(filepath.Join(dir, "sub", "empty.csv"), nil, 0o644))
	chunks, events := &teststack.Recorder{}, &teststack.Recorder{}
	spool := t.TempDir()
	p := New(Options{Store: store, Chunks: chunks, Events: events, SpoolDir: spool, InlineMax: 1 << 10, Concurrency: 2})
	man, err := p.Submit(context.Background(), Request{Sources: []string{dir}, Destination: "gs://p-seal/pre/", ChunkSize: 64 << 10,
		Codec: codec.Gzip, Method: "m", IdempotencyKey: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	if man.TransferID != message.NewTransferID("k1") {
		t.Fatalf("transfer id %s not derived from the idempotency key", man.TransferID)
	}
	if len(man.Files) != 2 || man.Files[0].Object != "pre/src/a.csv.gz" || man.Files[1].Object != "pre/src/sub/empty.csv.gz" {
		t.Fatalf("files %+v", man.Files)
	}
	type msg struct {
		c       message.Chunk
		payload []byte
	}
	var msgs []msg
	for _, m := range chunks.Messages() {
		c, payload, err := message.DecodeChunk(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, msg{c, payload})
	}
	want := len(man.Files[0].Chunks) + 1
	if len(msgs) != want || len(man.Files[0].Chunks) != 5 {
		t.Fatalf("%d chunk messages for %d chunks", len(msgs), want)
	}
	for _, m := range msgs {
		wire := m.payload
		if m.c.Spool != "" {
			if strings.Contains(m.c.Spool, "/") {
				t.Fatalf("spool name %q is a path; want a name relative to the spool", m.c.Spool)
			}
			wire, _ = os.ReadFile(filepath.Join(spool, m.c.Spool))
		}
		c := m.c.Parts[0]
		if crc32c.Checksum(wire) != c.WireCRC32C || int64(len(wire)) != c.WireSize {
			t.Fatalf("chunk %d of %s: spooled bytes do not match the message", c.Index, c.Path)
		}
		if c.Final != (c.Chunks == 1) {
			t.Fatalf("chunk %+v: only one-chunk files go straight to their final name", c)
		}
	}
	b, err := store.ReadAll(context.Background(), "p-seal", message.ManifestObject(man.TransferID))
	if err != nil {
		t.Fatal(err)
	}
	var stored message.Manifest
	if err := message.Decode(b, &stored); err != nil || !stored.Sealed {
		t.Fatalf("manifest: %v sealed=%v", err, stored.Sealed)
	}
	if ev := events.Messages(); len(ev) != 1 || !strings.Contains(string(ev[0].Data), `"sealed"`) {
		t.Fatalf("events %v", ev)
	}
}

func TestMissingBucketIsNamed(t *testing.T) {
	store := teststack.Bucket(t, "p-exists")
	src := filepath.Join(t.TempDir(), "f.csv")
	testutil.OK(t, os.WriteFile(src, []byte("x"), 0o644))
	p := New(Options{Store: store, Chunks: &teststack.Recorder{}, Events: &teststack.Recorder{}, SpoolDir: t.TempDir()})
	_, err := p.Submit(context.Background(), Request{Sources: []string{src}, Destination: "gs://no-such-bucket/x", ChunkSize: 1 << 20})
	if err == nil || !strings.Contains(err.Error(), "no-such-bucket") {
		t.Fatalf("error = %v, want one naming the bucket", err)
	}
}

// TestStartedOnlyOnceTheTransferReallyStarts: Started is not called for a
// request refused by its checks (a bucket outside FERRY_BUCKETS, a missing
// bucket), and is called once, before the first chunk, for one that starts.
func TestStartedOnlyOnceTheTransferReallyStarts(t *testing.T) {
	store := teststack.Bucket(t, "p-started")
	src := filepath.Join(t.TempDir(), "f.csv")
	testutil.WriteCSV(t, src, 200_000, 1)
	var started []string
	chunks := &teststack.Recorder{}
	chunksAtStart := -1
	p := New(Options{Store: store, Chunks: chunks, Events: &teststack.Recorder{}, SpoolDir: t.TempDir(), Buckets: []string{"p-started", "no-such-bucket"},
		Started: func(id string) { started = append(started, id); chunksAtStart = len(chunks.Messages()) }})
	for _, dest := range []string{"gs://elsewhere/x", "gs://no-such-bucket/x"} {
		_, err := p.Submit(context.Background(), Request{Sources: []string{src}, Destination: dest, ChunkSize: 1 << 20})
		var input *InputError
		if !errors.As(err, &input) {
			t.Fatalf("Submit to %s = %v, want an InputError", dest, err)
		}
		if dest == "gs://elsewhere/x" && !strings.Contains(err.Error(), "FERRY_BUCKETS=p-started,no-such-bucket") {
			t.Fatalf("error %q does not name FERRY_BUCKETS", err)
		}
	}
	if len(started) != 0 {
		t.Fatalf("Started called with %v for transfers that never started", started)
	}
	man, err := p.Submit(context.Background(), Request{Sources: []string{src}, Destination: "gs://p-started/x", ChunkSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(started) != 1 || started[0] != man.TransferID || chunksAtStart != 0 {
		t.Fatalf("Started calls %v (chunks published before: %d), want [%s] before any chunk", started, chunksAtStart, man.TransferID)
	}
}

// TestManifestRecordsTheVersion: the sealed manifest says which ferry wrote
// it (Options.Version, the binary's --version).
func TestManifestRecordsTheVersion(t *testing.T) {
	store := teststack.Bucket(t, "p-version")
	src := filepath.Join(t.TempDir(), "f.csv")
	testutil.WriteCSV(t, src, 1000, 1)
	p := New(Options{Store: store, Chunks: &teststack.Recorder{}, Events: &teststack.Recorder{}, SpoolDir: t.TempDir(), Version: "v1.2.3"})
	man, err := p.Submit(context.Background(), Request{Sources: []string{src}, Destination: "gs://p-version/x", ChunkSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	b, err := store.ReadAll(context.Background(), "p-version", message.ManifestObject(man.TransferID))
	if err != nil {
		t.Fatal(err)
	}
	var stored message.Manifest
	if err := message.Decode(b, &stored); err != nil || stored.FerryVer != "v1.2.3" {
		t.Fatalf("stored manifest: %v, ferry_version %q; want v1.2.3", err, stored.FerryVer)
	}
}

// TestContradictingSkipFlagsAreRefused: flags that contradict each other
// are input errors naming them, before anything is read.
func TestContradictingSkipFlagsAreRefused(t *testing.T) {
	store := teststack.Bucket(t, "p-skipflags")
	src := filepath.Join(t.TempDir(), "f.csv")
	testutil.OK(t, os.WriteFile(src, []byte("x"), 0o644))
	req := Request{Sources: []string{src}, Destination: "gs://p-skipflags/x", ChunkSize: 1 << 20}
	for _, tc := range []struct {
		name string
		req  func(r *Request)
		want string
	}{
		{"no-clobber and overwrite", func(r *Request) { r.NoClobber, r.Overwrite = true, true }, "--no-clobber (-n) and --overwrite"},
		{"no-clobber and skip-unchanged", func(r *Request) { r.NoClobber, r.SkipUnchanged = true, true }, "choose one"},
		{"checksum alone", func(r *Request) { r.Checksum = true }, "--checksum says how --skip-unchanged compares"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := req
			tc.req(&r)
			chunks := &teststack.Recorder{}
			_, err := New(Options{Store: store, Chunks: chunks, Events: &teststack.Recorder{}, SpoolDir: t.TempDir()}).Submit(context.Background(), r)
			var input *InputError
			if !errors.As(err, &input) || !strings.Contains(err.Error(), tc.want) || len(chunks.Messages()) != 0 {
				t.Fatalf("Submit = %v (%d chunks sent), want an input error naming %q", err, len(chunks.Messages()), tc.want)
			}
			if err := Validate(r); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want %q", err, tc.want)
			}
		})
	}
}

// A second transfer reuses the raw buffers the first one left, instead of
// fresh memory: a transfer of several chunks allocates them once per
// Producer.
func TestTransfersReuseRawBuffers(t *testing.T) {
	src := filepath.Join(t.TempDir(), "f.csv")
	testutil.WriteCSV(t, src, 600_000, 1)
	p := New(Options{Store: nopStore{}, Chunks: nopPublisher{}, Events: nopPublisher{}, Spool: spooltest.NewMem(), Concurrency: 2})
	req := Request{Sources: []string{src}, Destination: "gs://bkt/x", ChunkSize: 64 << 10}
	_, err := p.Submit(context.Background(), req)
	testutil.OK(t, err)
	first := p.bufsMade.Load()
	_, err = p.Submit(context.Background(), req)
	testutil.OK(t, err)
	if first == 0 || p.bufsMade.Load() != first {
		t.Fatalf("%d raw buffers made by the first transfer, %d by the second; want the second to reuse them all", first, p.bufsMade.Load()-first)
	}
}

// Issue 16 §2: a transfer of more files than a page holds seals a paged
// manifest: a header of bounded size, then pages whose files, in object
// order, are every file of the tree.
func TestSealWritesAPagedManifestInObjectOrder(t *testing.T) {
	store := teststack.Bucket(t, "p-paged")
	dir := filepath.Join(t.TempDir(), "tree")
	const n = 2*message.PageFiles + 37
	for i := range n {
		// "a.b" before "a": the walk's order is not the objects'.
		sub := filepath.Join(dir, fmt.Sprintf("d%d", i%7))
		testutil.OK(t, os.MkdirAll(sub, 0o755))
		name := fmt.Sprintf("f%d", i)
		if i%2 == 0 {
			name += ".b"
		}
		testutil.OK(t, os.WriteFile(filepath.Join(sub, name), []byte(name), 0o644))
	}
	p := New(Options{Store: store, Chunks: &teststack.Recorder{}, Events: &teststack.Recorder{}, SpoolDir: t.TempDir(), BundleMax: 1 << 20})
	man, err := p.Submit(context.Background(), Request{Sources: []string{dir}, Destination: "gs://p-paged/pre", ChunkSize: 1 << 20, Method: "m"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	b, err := store.ReadAll(ctx, "p-paged", message.ManifestObject(man.TransferID))
	if err != nil {
		t.Fatal(err)
	}
	var header message.Manifest
	if err := message.Decode(b, &header); err != nil {
		t.Fatal(err)
	}
	if !header.Paged() || len(header.Pages) != 3 || header.Totals.Files != n || header.CheckPages() != nil {
		t.Fatalf("header: paged %v, %d pages, totals %+v, %v", header.Paged(), len(header.Pages), header.Totals, header.CheckPages())
	}
	last := ""
	for k := range header.Pages {
		b, err := store.ReadAll(ctx, "p-paged", message.ManifestPage(man.TransferID, header.Run, k))
		if err != nil {
			t.Fatal(err)
		}
		var pg message.FilePage
		if err := message.Decode(b, &pg); err != nil {
			t.Fatal(err)
		}
		for _, f := range pg.Files {
			if f.Object <= last {
				t.Fatalf("page %d: %s after %s: not in object order", k, f.Object, last)
			}
			last = f.Object
		}
	}
}

// Issue 42 §2: an idempotency key names one request. The same key with
// other sources is refused, naming the key and the transfer, before
// anything is written or published; the first request's transfer is left
// as it was, and the same request again is still taken (a retry).
func TestAnIdempotencyKeyNamesOneRequest(t *testing.T) {
	store := teststack.Bucket(t, "p-key")
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.csv"), filepath.Join(dir, "b.csv")
	testutil.WriteCSV(t, a, 10_000, 1)
	testutil.WriteCSV(t, b, 20_000, 1)
	chunks := &teststack.Recorder{}
	p := New(Options{Store: store, Chunks: chunks, Events: &teststack.Recorder{}, SpoolDir: t.TempDir(), Concurrency: 1})
	first := Request{Sources: []string{a}, Destination: "gs://p-key/day", ChunkSize: 1 << 20, Codec: codec.Gzip, IdempotencyKey: "export-2026-12-05"}
	if _, err := p.Submit(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	sent := len(chunks.Messages())
	keys, err := store.ReadAll(context.Background(), "p-key", message.KeyObject(message.NewTransferID(first.IdempotencyKey)))
	testutil.OK(t, err)

	other := first
	other.Sources = []string{b}
	_, err = p.Submit(context.Background(), other)
	var input *InputError
	if !errors.As(err, &input) || !strings.Contains(err.Error(), `idempotency key "export-2026-12-05" already names transfer `+message.NewTransferID(first.IdempotencyKey)) {
		t.Fatalf("the same key for other sources: %v, want an input error naming the key and its transfer", err)
	}
	if n := len(chunks.Messages()); n != sent {
		t.Errorf("%d chunk messages published for the refused request", n-sent)
	}
	if now, _ := store.ReadAll(context.Background(), "p-key", message.KeyObject(message.NewTransferID(first.IdempotencyKey))); !bytes.Equal(now, keys) {
		t.Errorf("the refused request replaced the key object:\n%s\nwas\n%s", now, keys)
	}
	if _, err := p.Submit(context.Background(), first); err != nil {
		t.Fatalf("the same request again: %v", err)
	}
}

// Every field of a request encodes into its digest: an encoding error
// would leave keys unchecked.
func TestRequestDigestCoversEveryOption(t *testing.T) {
	base := Request{Sources: []string{"/d"}, Destination: "gs://b/p", Selection: plan.Selection{Found: func(int, int64) {}}}
	variants := []func(r *Request){
		func(r *Request) { r.Sources = []string{"/e"} },
		func(r *Request) { r.Destination = "gs://b/q" },
		func(r *Request) { r.Overwrite = true },
		func(r *Request) { r.Selection.Filters = []plan.Filter{{Pattern: "*.tmp"}} },
		func(r *Request) { r.Convert = &plan.Convert{BadRows: 3} },
		func(r *Request) { r.Load = &message.Load{Table: "p.d.t"} },
	}
	rel := Request{Sources: []string{"d"}, Destination: "gs://b/p"}
	here := requestDigest(rel)
	t.Chdir(t.TempDir())
	if requestDigest(rel) == here {
		t.Error("the relative source d typed in two directories has one digest: one submitter's files would be taken for the other's")
	}
	seen := map[string]int{requestDigest(base): -1}
	if requestDigest(base) == "" {
		t.Fatal("no digest for a request with a progress callback")
	}
	for i, v := range variants {
		r := base
		v(&r)
		d := requestDigest(r)
		if j, dup := seen[d]; dup || d == "" {
			t.Errorf("variant %d has digest %q, as variant %d", i, d, j)
		}
		seen[d] = i
	}
}
