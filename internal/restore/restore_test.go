package restore_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/restore"
	"github.com/ferry-dev/ferry/internal/seektable"
	"github.com/ferry-dev/ferry/internal/teststack"
)

func TestMain(m *testing.M) { os.Exit(teststack.MainWithGCS(m)) }

var bucketSeq atomic.Int64

// newBucket returns a store and a fresh bucket for one test.
func newBucket(t *testing.T) (*gcs.Store, string) {
	t.Helper()
	name := strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "-"))
	name = strings.Trim(fmt.Sprintf("r%d-%.40s", bucketSeq.Add(1), name), "-")
	return teststack.Bucket(t, name), name
}

// csv returns n bytes of CSV-like text that compresses about as the seeds'
// data does.
func csv(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, seed))
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "%d,%s,%d.%02d,%x\n", i, []string{"alpha", "beta", "gamma"}[rng.IntN(3)], rng.IntN(100000), rng.IntN(100), rng.Uint32())
	}
	return b.Bytes()[:n]
}

// options keep ranges small, so that small test objects are cut into many.
func options() restore.Options {
	return restore.Options{RangeSize: 64 << 10, Concurrency: 4, Memory: 16 << 20}
}

func newRestorer(t *testing.T, s restore.Store, o restore.Options) *restore.Restorer {
	t.Helper()
	r, err := restore.New(s, o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// stockDecompress checks that the stored object decompresses with the stock
// CLI to raw, as a reader without ferry has it.
func stockDecompress(t *testing.T, s *gcs.Store, bucket, name string, c codec.Codec, raw []byte) {
	t.Helper()
	tool := map[codec.Codec]string{codec.Zstd: "zstd", codec.Gzip: "gzip"}[c]
	if tool == "" {
		return
	}
	if _, err := exec.LookPath(tool); err != nil {
		t.Logf("%s not installed; stock check skipped", tool)
		return
	}
	stored, err := s.ReadAll(context.Background(), bucket, name)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(tool, "-d", "-c")
	cmd.Stdin = bytes.NewReader(stored)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s -d gs://%s/%s: %v: %s", tool, bucket, name, err, stderr.String())
	}
	if !bytes.Equal(out.Bytes(), raw) {
		t.Fatalf("%s -d gs://%s/%s: %d bytes that differ from the source's %d", tool, bucket, name, out.Len(), len(raw))
	}
}

// countingStore counts range reads in flight, to show the bound holds.
type countingStore struct {
	restore.Store
	mu            sync.Mutex
	inFlight, max int
	reads         atomic.Int64
	// failAfter, when positive, fails every range read after that many.
	failAfter int64
}

func (c *countingStore) NewRangeReader(ctx context.Context, bucket, name string, off, n int64) (io.ReadCloser, error) {
	if k := c.reads.Add(1); c.failAfter > 0 && k > c.failAfter {
		return nil, fmt.Errorf("connection refused (injected after %d reads)", c.failAfter)
	}
	rc, err := c.Store.NewRangeReader(ctx, bucket, name, off, n)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.inFlight++
	c.max = max(c.max, c.inFlight)
	c.mu.Unlock()
	return &countedReader{rc, c}, nil
}

type countedReader struct {
	io.ReadCloser
	c *countingStore
}

func (r *countedReader) Close() error {
	r.c.mu.Lock()
	r.c.inFlight--
	r.c.mu.Unlock()
	return r.ReadCloser.Close()
}

func TestRestoredBytesEqualTheSource(t *testing.T) {
	s, bucket := newBucket(t)
	cases := []struct {
		name, object string
		raw          []byte
		store        func(name string, raw []byte)
		codec        codec.Codec
		method       string
		output       string
	}{
		{name: "zstd composite of 40 chunks in a two-level tree", object: "p/tree.csv.zst", raw: csv(40*64<<10-123, 1), codec: codec.Zstd, method: "frames", output: "tree.csv",
			store: func(n string, raw []byte) {
				teststack.FerryObject(t, s, bucket, n, raw, teststack.FerryOptions{ChunkSize: 64 << 10, FrameSize: 16 << 10})
			}},
		{name: "zstd one chunk with its table", object: "p/one.csv.zst", raw: csv(900<<10, 2), codec: codec.Zstd, method: "frames", output: "one.csv",
			store: func(n string, raw []byte) {
				teststack.FerryObject(t, s, bucket, n, raw, teststack.FerryOptions{ChunkSize: 1 << 20, FrameSize: 64 << 10})
			}},
		{name: "zstd 0 bytes", object: "p/empty.csv.zst", raw: []byte{}, codec: codec.Zstd, method: "stream", output: "empty.csv",
			store: func(n string, raw []byte) { teststack.FerryObject(t, s, bucket, n, raw, teststack.FerryOptions{}) }},
		{name: "zstd without a seek table", object: "p/old.csv.zst", raw: csv(600<<10, 3), codec: codec.Zstd, method: "stream", output: "old.csv",
			store: func(n string, raw []byte) {
				teststack.FerryObject(t, s, bucket, n, raw, teststack.FerryOptions{ChunkSize: 100 << 10, FrameSize: 50 << 10, NoTable: true})
			}},
		{name: "gzip of 5 chunks", object: "p/g.csv.gz", raw: csv(500<<10, 4), codec: codec.Gzip, method: "stream", output: "g.csv",
			store: func(n string, raw []byte) {
				teststack.FerryObject(t, s, bucket, n, raw, teststack.FerryOptions{Codec: codec.Gzip, ChunkSize: 100 << 10, FrameSize: 50 << 10})
			}},
		{name: "none of 3 chunks", object: "p/n.bin", raw: csv(300<<10, 5), codec: codec.None, method: "ranges", output: "n.bin",
			store: func(n string, raw []byte) {
				teststack.FerryObject(t, s, bucket, n, raw, teststack.FerryOptions{Codec: codec.None, ChunkSize: 100 << 10})
			}},
		{name: "plain object", object: "p/plain.csv.zst", raw: csv(333<<10, 6), method: "ranges", output: "plain.csv.zst",
			store: func(n string, raw []byte) {
				if _, err := s.PutSmall(context.Background(), bucket, n, raw, false, ""); err != nil {
					t.Fatal(err)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.store(c.object, c.raw)
			stockDecompress(t, s, bucket, c.object, c.codec, c.raw)
			cs := &countingStore{Store: s}
			o := options()
			r := newRestorer(t, cs, o)
			dest := t.TempDir()
			a, err := s.Attrs(context.Background(), bucket, c.object)
			if err != nil {
				t.Fatal(err)
			}
			root, err := os.OpenRoot(dest)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			res, err := r.Object(context.Background(), root, c.output, bucket, a)
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(dest, c.output))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, c.raw) {
				t.Fatalf("restored %d bytes that differ from the source's %d", len(got), len(c.raw))
			}
			if res.Method != c.method || res.Codec != string(c.codec) || res.RawCRC32C != crc32c.Checksum(c.raw) {
				t.Fatalf("result %+v, want method %s, codec %q, raw crc32c %08x", res, c.method, c.codec, crc32c.Checksum(c.raw))
			}
			if cs.max > o.Concurrency {
				t.Fatalf("%d range reads in flight, Concurrency is %d", cs.max, o.Concurrency)
			}
			if c.method != "stream" && cs.reads.Load() < 3 {
				t.Fatalf("%d range reads for a %d-byte object in 64 KiB ranges", cs.reads.Load(), a.Size)
			}
			assertOnly(t, dest, c.output)
		})
	}
}

// assertOnly fails unless dest holds exactly the files names (no temporary
// files left behind).
func assertOnly(t *testing.T, dest string, names ...string) {
	t.Helper()
	var got []string
	_ = filepath.WalkDir(dest, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dest, p)
			got = append(got, filepath.ToSlash(rel))
		}
		return nil
	})
	sort.Strings(got)
	sort.Strings(names)
	if strings.Join(got, "\n") != strings.Join(names, "\n") {
		t.Fatalf("destination holds %q, want %q", got, names)
	}
}

// tree stores files (relative path → bytes) under prefix with mixed codecs,
// and returns what a restore must produce.
func tree(t *testing.T, s *gcs.Store, bucket, prefix string, n int) map[string][]byte {
	t.Helper()
	want := map[string][]byte{}
	codecs := []codec.Codec{codec.Zstd, codec.Gzip, codec.None}
	for i := range n {
		rel := fmt.Sprintf("d%d/sub%d/file-%03d.csv", i%3, i%2, i)
		raw := csv(1000+i*517, uint64(100+i))
		c := codecs[i%3]
		teststack.FerryObject(t, s, bucket, prefix+"/"+rel+c.Ext(), raw, teststack.FerryOptions{Codec: c, ChunkSize: 4 << 10, FrameSize: 2 << 10})
		want[rel] = raw
	}
	return want
}

func readTree(t *testing.T, dest string) map[string][]byte {
	t.Helper()
	got := map[string][]byte{}
	err := filepath.WalkDir(dest, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dest, p)
		b, err := os.ReadFile(p)
		got[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func assertTree(t *testing.T, dest string, want map[string][]byte) {
	t.Helper()
	got := readTree(t, dest)
	for rel, b := range want {
		if !bytes.Equal(got[rel], b) {
			t.Errorf("%s: restored %d bytes that differ from the source's %d", rel, len(got[rel]), len(b))
		}
	}
	for rel := range got {
		if _, ok := want[rel]; !ok {
			t.Errorf("%s restored, but no such source", rel)
		}
	}
}

func TestRestorePrefixOfManyFiles(t *testing.T) {
	s, bucket := newBucket(t)
	want := tree(t, s, bucket, "run-1/data", 60)
	// ferry's own objects, and a sibling prefix that must not match.
	for _, n := range []string{".ferry/t1/manifest.json", ".ferry-done/t1.json", "run-10/x.csv"} {
		if _, err := s.PutSmall(context.Background(), bucket, n, []byte("{}"), false, ""); err != nil {
			t.Fatal(err)
		}
	}
	dest := t.TempDir()
	r := newRestorer(t, s, options())
	sum, err := r.Run(context.Background(), "gs://"+bucket+"/run-1", dest)
	if err != nil {
		t.Fatal(err)
	}
	assertTree(t, filepath.Join(dest), prefixed("data/", want))
	if sum.Objects != 60 || sum.Restored != 60 || sum.Failed != 0 {
		t.Fatalf("summary %+v, want 60 objects restored", sum)
	}

	// The whole bucket: ferry's own prefixes are skipped.
	all := t.TempDir()
	sum, err = newRestorer(t, s, options()).Run(context.Background(), "gs://"+bucket, all)
	if err != nil {
		t.Fatal(err)
	}
	w := prefixed("run-1/data/", want)
	w["run-10/x.csv"] = []byte("{}")
	assertTree(t, all, w)
	if sum.Objects != 61 {
		t.Fatalf("summary %+v, want 61 objects", sum)
	}
}

func prefixed(p string, m map[string][]byte) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range m {
		out[p+k] = v
	}
	return out
}

func TestRestoreAgainSkipsRefusesAndOverwrites(t *testing.T) {
	s, bucket := newBucket(t)
	want := tree(t, s, bucket, "p", 6)
	dest := t.TempDir()
	src := "gs://" + bucket + "/p"
	if _, err := newRestorer(t, s, options()).Run(context.Background(), src, dest); err != nil {
		t.Fatal(err)
	}
	sum, err := newRestorer(t, s, options()).Run(context.Background(), src, dest)
	if err != nil || sum.Skipped != 6 || sum.Restored != 0 || sum.WireBytes != 0 {
		t.Fatalf("second run: %v, summary %+v; want all 6 skipped, nothing downloaded", err, sum)
	}

	changed := filepath.Join(dest, "d1", "sub1", "file-001.csv")
	if err := os.WriteFile(changed, []byte("edited by hand\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err = newRestorer(t, s, options()).Run(context.Background(), src, dest)
	if !errors.Is(err, restore.ErrExists) || !strings.Contains(err.Error(), changed) || !strings.Contains(err.Error(), "--overwrite") {
		t.Fatalf("third run: %v; want an error naming %s and --overwrite", err, changed)
	}
	if sum.Failed != 1 || sum.Skipped != 5 {
		t.Fatalf("summary %+v, want 1 failed, 5 skipped", sum)
	}
	if b, _ := os.ReadFile(changed); string(b) != "edited by hand\n" {
		t.Fatalf("%s was replaced without --overwrite", changed)
	}

	o := options()
	o.Overwrite = true
	if _, err := newRestorer(t, s, o).Run(context.Background(), src, dest); err != nil {
		t.Fatal(err)
	}
	assertTree(t, dest, want)
}

func TestRestoreSingleObject(t *testing.T) {
	s, bucket := newBucket(t)
	raw := csv(200<<10, 7)
	teststack.FerryObject(t, s, bucket, "a/b/report.csv.zst", raw, teststack.FerryOptions{ChunkSize: 64 << 10, FrameSize: 16 << 10})
	// Into an existing directory: the object's base name, without .zst.
	dir := t.TempDir()
	if _, err := newRestorer(t, s, options()).Run(context.Background(), "gs://"+bucket+"/a/b/report.csv.zst", dir); err != nil {
		t.Fatal(err)
	}
	// To a file name.
	file := filepath.Join(t.TempDir(), "new", "r.csv")
	if _, err := newRestorer(t, s, options()).Run(context.Background(), "gs://"+bucket+"/a/b/report.csv.zst", file); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(dir, "report.csv"), file} {
		if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, raw) {
			t.Fatalf("%s: %v, %d bytes, want the source's %d", p, err, len(got), len(raw))
		}
	}
	// ferry-mtime, when the object has it, is the output's modification time.
	mtime := time.Date(2025, 1, 2, 3, 4, 5, 123456789, time.UTC)
	teststack.FerryObject(t, s, bucket, "a/b/dated.csv.gz", raw, teststack.FerryOptions{Codec: codec.Gzip,
		Metadata: map[string]string{"ferry-mtime": mtime.Format(time.RFC3339Nano)}})
	if _, err := newRestorer(t, s, options()).Run(context.Background(), "gs://"+bucket+"/a/b/dated.csv.gz", dir); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "dated.csv")); err != nil || !fi.ModTime().Equal(mtime) {
		t.Fatalf("dated.csv: %v, modified %v; want %v", err, fi.ModTime(), mtime)
	}

	_, err := newRestorer(t, s, options()).Run(context.Background(), "gs://"+bucket+"/nothing/here", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "gs://"+bucket+"/nothing/here/") {
		t.Fatalf("missing source: %v, want an error naming it", err)
	}
	_, err = newRestorer(t, s, options()).Run(context.Background(), "s3://x/y", t.TempDir())
	if !errors.Is(err, restore.ErrUsage) || !strings.Contains(err.Error(), "s3://x/y") {
		t.Fatalf("bad source: %v, want a usage error naming it", err)
	}
}

// rewrite stores data under name with metadata m, as a bad actor or a bad
// disk replacing the object would: GCS computes the CRC32C of what it gets.
func rewrite(t *testing.T, s *gcs.Store, bucket, name string, data []byte, m map[string]string) {
	t.Helper()
	_, err := s.Upload(context.Background(), bucket, name, bytes.NewReader(data), gcs.UploadOptions{
		Size: int64(len(data)), CRC32C: crc32c.Checksum(data), Metadata: m})
	if err != nil {
		t.Fatal(err)
	}
}

// flipStore flips the byte at offset at of every object it reads, as a
// faulty network or disk would, while the object's CRC32C stays GCS's.
type flipStore struct {
	restore.Store
	at int64
}

func (f *flipStore) NewRangeReader(ctx context.Context, bucket, name string, off, n int64) (io.ReadCloser, error) {
	rc, err := f.Store.NewRangeReader(ctx, bucket, name, off, n)
	if err != nil || f.at < off || f.at >= off+n {
		return rc, err
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return nil, err
	}
	if i := f.at - off; i < int64(len(b)) {
		b[i] ^= 0x5a
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

// byteRange extracts "bytes A-B" from an error.
var byteRange = regexp.MustCompile(`bytes (\d+)-(\d+)`)

func TestCorruptObjectIsCaughtAndLeavesNoOutput(t *testing.T) {
	s, bucket := newBucket(t)
	ctx := context.Background()
	type store func(name string, raw []byte)
	ferry := func(o teststack.FerryOptions) store {
		return func(n string, raw []byte) { teststack.FerryObject(t, s, bucket, n, raw, o) }
	}
	cases := []struct {
		name    string
		store   store
		at      float64 // where the byte is flipped, as a fraction of the object
		keepCRC bool    // the server keeps reporting the original CRC32C
		// exact: the error names the range holding the flipped byte, not
		// just the whole object.
		exact bool
	}{
		{"zstd frames", ferry(teststack.FerryOptions{ChunkSize: 64 << 10, FrameSize: 16 << 10}), 0.5, false, true},
		{"zstd frames, stale crc32c", ferry(teststack.FerryOptions{ChunkSize: 64 << 10, FrameSize: 16 << 10}), 0.3, true, true},
		{"zstd stream", ferry(teststack.FerryOptions{ChunkSize: 64 << 10, FrameSize: 16 << 10, NoTable: true}), 0.5, false, true},
		{"gzip", ferry(teststack.FerryOptions{Codec: codec.Gzip, ChunkSize: 64 << 10, FrameSize: 16 << 10}), 0.5, false, true},
		{"none", ferry(teststack.FerryOptions{Codec: codec.None, ChunkSize: 64 << 10}), 0.5, false, false},
		{"plain, stale crc32c", func(n string, raw []byte) {
			if _, err := s.PutSmall(ctx, bucket, n, raw, false, ""); err != nil {
				t.Fatal(err)
			}
		}, 0.7, true, false},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := fmt.Sprintf("c/%d.csv.zst", i)
			c.store(name, csv(640<<10, uint64(10+i)))
			a, err := s.Attrs(ctx, bucket, name)
			if err != nil {
				t.Fatal(err)
			}
			stored, err := s.ReadAll(ctx, bucket, name)
			if err != nil {
				t.Fatal(err)
			}
			at := int64(float64(len(stored)) * c.at)
			var st restore.Store = s
			if c.keepCRC {
				// The bytes change on the way, GCS's CRC32C does not.
				st = &flipStore{Store: s, at: at}
			} else {
				stored[at] ^= 0x5a
				rewrite(t, s, bucket, name, stored, a.Metadata)
			}

			dest := t.TempDir()
			_, err = newRestorer(t, st, options()).Run(ctx, "gs://"+bucket+"/"+name, filepath.Join(dest, "out"))
			if !errors.Is(err, restore.ErrCorrupt) || !strings.Contains(err.Error(), "gs://"+bucket+"/"+name+" bytes ") {
				t.Fatalf("restore of an object with byte %d flipped: %v; want ErrCorrupt naming the object and a byte range", at, err)
			}
			m := byteRange.FindStringSubmatch(err.Error())
			lo, _ := strconv.ParseInt(m[1], 10, 64)
			hi, _ := strconv.ParseInt(m[2], 10, 64)
			if at < lo || at > hi {
				t.Fatalf("error names bytes %d-%d, the flipped byte is %d: %v", lo, hi, at, err)
			}
			if testing.Verbose() {
				t.Log(err)
			}
			if c.exact && hi-lo+1 >= int64(len(stored)) {
				t.Fatalf("error names the whole object (bytes %d-%d), want the range holding byte %d: %v", lo, hi, at, err)
			}
			assertOnly(t, dest)
		})
	}
}

func TestTruncatedForeignAndPlainObjects(t *testing.T) {
	s, bucket := newBucket(t)
	ctx := context.Background()
	raw := csv(300<<10, 20)
	meta := func(c, size, crc string) map[string]string {
		return map[string]string{"ferry-codec": c, "ferry-raw-size": size, "ferry-raw-crc32c": crc}
	}
	good := teststack.FerryObject(t, s, bucket, "src/good.csv.zst", raw, teststack.FerryOptions{ChunkSize: 64 << 10, FrameSize: 16 << 10})
	stored, err := s.ReadAll(ctx, bucket, "src/good.csv.zst")
	if err != nil {
		t.Fatal(err)
	}
	put := func(name string, data []byte, m map[string]string) { rewrite(t, s, bucket, name, data, m) }
	put("x/cut-table.csv.zst", stored[:len(stored)-5], good.Metadata)
	n, err := seektable.TableSize(stored)
	if err != nil {
		t.Fatal(err)
	}
	put("x/cut-frames.csv.zst", append(append([]byte{}, stored[:len(stored)/2]...), stored[int64(len(stored))-n:]...), good.Metadata)
	put("x/bad-table.csv.zst", append(append([]byte{}, stored[:len(stored)/2]...), stored[len(stored)-20:]...), good.Metadata)
	put("x/not-zstd.csv.zst", raw, good.Metadata)
	put("x/lz4.csv.lz4", raw, meta("lz4", "307200", "00000000"))
	put("x/half.csv.zst", stored, map[string]string{"ferry-codec": "zstd"})
	put("x/big-claim.csv.zst", stored, meta("zstd", "100", good.Metadata["ferry-raw-crc32c"]))

	for name, want := range map[string]string{
		"x/cut-table.csv.zst":  "zstd: unexpected EOF",
		"x/cut-frames.csv.zst": "frames hold",
		"x/bad-table.csv.zst":  "(seek table)",
		"x/not-zstd.csv.zst":   "zstd",
		"x/lz4.csv.lz4":        `unknown codec "lz4"`,
		"x/half.csv.zst":       "incomplete ferry metadata",
		"x/big-claim.csv.zst":  "metadata says 100",
	} {
		t.Run(name, func(t *testing.T) {
			dest := t.TempDir()
			_, err := newRestorer(t, s, options()).Run(ctx, "gs://"+bucket+"/"+name, dest+"/")
			if !errors.Is(err, restore.ErrCorrupt) || !strings.Contains(err.Error(), "gs://"+bucket+"/"+name) || !strings.Contains(err.Error(), want) {
				t.Fatalf("got %v; want ErrCorrupt naming the object and %q", err, want)
			}
			if testing.Verbose() {
				t.Log(err)
			}
			assertOnly(t, dest)
		})
	}

	// An object ferry did not write comes back as stored, checked against
	// its CRC32C, under its own name.
	plain := csv(500<<10, 21)
	if _, err := s.PutSmall(ctx, bucket, "y/archive.tar.zst", plain, false, ""); err != nil {
		t.Fatal(err)
	}
	dest := t.TempDir()
	sum, err := newRestorer(t, s, options()).Run(ctx, "gs://"+bucket+"/y", dest)
	if err != nil || sum.Restored != 1 {
		t.Fatalf("plain object: %v, %+v", err, sum)
	}
	assertTree(t, dest, map[string][]byte{"archive.tar.zst": plain})
}

func TestNamesThatEscapeTheDestinationAreRefused(t *testing.T) {
	s, bucket := newBucket(t)
	ctx := context.Background()
	outside := t.TempDir()
	dest := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dest, "link")); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{
		"p/../../escape.txt":  `".."`,
		"p/a//b.txt":          "empty path element",
		"p/link/through.txt":  "escapes",
		"p/.x.csv.ferry-part": "reserved",
		"p/ok.txt":            "",
	}
	for n := range names {
		if _, err := s.PutSmall(ctx, bucket, n, []byte("data of "+n), false, ""); err != nil {
			t.Fatal(err)
		}
	}
	sum, err := newRestorer(t, s, options()).Run(ctx, "gs://"+bucket+"/p", dest)
	if err == nil || sum.Failed != 4 || sum.Restored != 1 {
		t.Fatalf("%v, summary %+v; want 4 refused, 1 restored", err, sum)
	}
	for n, want := range names {
		if want == "" {
			continue
		}
		found := false
		for _, e := range sum.Errors {
			found = found || strings.Contains(e, "gs://"+bucket+"/"+n) && strings.Contains(e, want)
		}
		if !found {
			t.Errorf("no error names %s with %q: %q", n, want, sum.Errors)
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("restore wrote outside the destination: %v", entries)
	}
	if b, err := os.ReadFile(filepath.Join(dest, "ok.txt")); err != nil || string(b) != "data of p/ok.txt" {
		t.Fatalf("ok.txt: %v %q", err, b)
	}
}

func TestInterruptedRestoreResumes(t *testing.T) {
	s, bucket := newBucket(t)
	ctx := context.Background()
	raw := csv(3<<20, 30)
	teststack.FerryObject(t, s, bucket, "big.csv.zst", raw, teststack.FerryOptions{ChunkSize: 256 << 10, FrameSize: 32 << 10})
	dest := t.TempDir()
	o := options()
	o.Attempts = 1
	o.Concurrency = 1 // in order, so that the ranges before the failure are done
	// The network goes away after the look for its transfer's listing
	// (it has none), the tail and 4 ranges.
	cs := &countingStore{Store: s, failAfter: 6}
	_, err := newRestorer(t, cs, o).Run(ctx, "gs://"+bucket+"/big.csv.zst", dest+"/")
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("first run: %v, want the injected failure", err)
	}
	if _, err := os.Stat(filepath.Join(dest, "big.csv")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("output exists after a failed run: %v", err)
	}
	log, err := os.ReadFile(filepath.Join(dest, ".big.csv.ferry-part.log"))
	if err != nil || bytes.Count(log, []byte("\n")) != 5 {
		t.Fatalf("journal %q (%v), want a header and 4 ranges", log, err)
	}

	sum, err := newRestorer(t, s, options()).Run(ctx, "gs://"+bucket+"/big.csv.zst", dest+"/")
	if err != nil {
		t.Fatal(err)
	}
	if sum.ResumedBytes == 0 || sum.ResumedBytes >= int64(len(raw)) {
		t.Fatalf("summary %+v, want part of the file resumed", sum)
	}
	assertTree(t, dest, map[string][]byte{"big.csv": raw})
}

func TestOptionsAreChecked(t *testing.T) {
	for _, o := range []restore.Options{
		{Concurrency: -1},
		{Concurrency: 64, Memory: 64 << 20},
		{RangeSize: 1000},
	} {
		if _, err := restore.New(nil, o); err == nil {
			t.Errorf("options %+v accepted", o)
		}
	}
}

// Issue 42 §4: a 210-byte object name and an object named by the digest
// restore once used for the long name's temporary file were written
// through one temporary file at once, and the file reported restored held
// a mix of both. Temporary names no other object can have: both come back
// as their own bytes. And an object whose name a directory holds (x beside
// x/y) fails, leaving no temporary file behind.
func TestCraftedNamesNeverShareATemporaryFile(t *testing.T) {
	s, bucket := newBucket(t)
	ctx := context.Background()
	long := strings.Repeat("L", 210)
	sum := sha256.Sum256([]byte(long))
	short := hex.EncodeToString(sum[:16])
	objects := map[string][]byte{long: csv(300<<10, 1), short: csv(300<<10, 2)}
	for n, b := range objects {
		if _, err := s.PutSmall(ctx, bucket, "p/"+n, b, false, ""); err != nil {
			t.Fatal(err)
		}
	}
	dest := t.TempDir()
	got, err := newRestorer(t, s, options()).Run(ctx, "gs://"+bucket+"/p", dest)
	if err != nil || got.Restored != 2 {
		t.Fatalf("%v, summary %+v; want both restored", err, got)
	}
	assertTree(t, dest, objects)

	s2, bucket2 := newBucket(t)
	for _, n := range []string{"q/x", "q/x/y"} {
		if _, err := s2.PutSmall(ctx, bucket2, n, []byte(n), false, ""); err != nil {
			t.Fatal(err)
		}
	}
	dest2 := t.TempDir()
	_, _ = newRestorer(t, s2, options()).Run(ctx, "gs://"+bucket2+"/q", dest2)
	err = filepath.WalkDir(dest2, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".ferry-part") {
			return fmt.Errorf("a temporary file stayed: %s", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	// A tree the producer accepts: a directory .q.ferry-part/ beside a
	// file q, whose temporary name it is. Both come back, restored at
	// once: x's directory may be wanted while q writes its temporary
	// file, or q may choose its name while x's directory is being made.
	// Many such directories, so that restores meet in every order; and
	// one where an interrupted restore left q's temporary file.
	s3, bucket3 := newBucket(t)
	tree := map[string][]byte{}
	for i := range 24 {
		d, q := fmt.Sprintf("d%02d/", i), "q"
		if i%2 == 1 {
			q = "-q" // listed before its directories, not after
		}
		tree[d+q] = csv(256<<10, uint64(i))
		tree[d+"."+q+".ferry-part/x"] = []byte("inside " + d)
		tree[d+"."+q+".1.ferry-part/y"] = []byte("and this")
	}
	for n, b := range tree {
		if _, err := s3.PutSmall(ctx, bucket3, "r/"+n, b, false, ""); err != nil {
			t.Fatal(err)
		}
	}
	dest3 := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dest3, "d02"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dest3, "d02", ".q.ferry-part"), []byte("left by an interrupted run"), 0o644); err != nil {
		t.Fatal(err)
	}
	o3 := options()      // 4 objects at once
	for run := range 2 { // the second run finds it all restored
		if got, err := newRestorer(t, s3, o3).Run(ctx, "gs://"+bucket3+"/r", dest3); err != nil || got.Restored+got.Skipped != int64(len(tree)) {
			t.Fatalf("run %d: %v, summary %+v; want all %d restored", run, err, got, len(tree))
		}
	}
	assertTree(t, dest3, tree)
}

// Issue 42 §4: a.gz beside a.zst (the same file sent twice with two
// codecs) both restore to a. Whichever comes first, neither is left
// under the name, and both are named as failed; a third object beside
// them restores as usual. Small objects first restored in full before the
// second is listed, and large ones whose restores overlap.
func TestTwoObjectsOfOneNameLeaveNeither(t *testing.T) {
	for _, size := range []int{2 << 10, 3 << 20} {
		s, bucket := newBucket(t)
		teststack.FerryObject(t, s, bucket, "p/a.gz", csv(size, 1), teststack.FerryOptions{Codec: codec.Gzip, ChunkSize: 1 << 20})
		teststack.FerryObject(t, s, bucket, "p/a.zst", csv(size, 2), teststack.FerryOptions{ChunkSize: 1 << 20})
		b := csv(1000, 3)
		teststack.FerryObject(t, s, bucket, "p/b.zst", b, teststack.FerryOptions{})
		dest := t.TempDir()
		got, err := newRestorer(t, s, options()).Run(context.Background(), "gs://"+bucket+"/p", dest)
		if !errors.Is(err, restore.ErrCollision) || got.Failed != 2 || got.Restored != 1 {
			t.Fatalf("%d bytes: %v, summary %+v; want a and its twin failed, b restored", size, err, got)
		}
		assertTree(t, dest, map[string][]byte{"b": b})
	}
}

// Issue 42 §4: a file is reported restored only once its bytes are read
// back where they lie: another process that writes to the temporary file
// after the download (here, one byte) fails the object, and nothing is
// left under its name or beside it.
func TestAFileIsRestoredOnlyAsItIsReadBack(t *testing.T) {
	s, bucket := newBucket(t)
	ctx := context.Background()
	b := csv(300<<10, 5)
	if _, err := s.PutSmall(ctx, bucket, "p/a.csv", b, false, ""); err != nil {
		t.Fatal(err)
	}
	for _, meddle := range []bool{false, true} {
		dest := t.TempDir()
		r := newRestorer(t, s, options())
		restore.SetWritten(r, func(p string) {
			if !meddle {
				return
			}
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err == nil {
				_, err = f.WriteAt([]byte{'#'}, 1000)
				f.Close()
			}
			if err != nil {
				t.Error(err)
			}
		})
		got, err := r.Run(ctx, "gs://"+bucket+"/p", dest)
		if !meddle {
			if err != nil || got.Restored != 1 {
				t.Fatalf("%v %+v", err, got)
			}
			assertTree(t, dest, map[string][]byte{"a.csv": b})
			continue
		}
		if !errors.Is(err, restore.ErrCorrupt) || got.Restored != 0 || got.Failed != 1 || !strings.Contains(err.Error(), "read back") {
			t.Fatalf("a temporary file changed after its download: %v, summary %+v; want it failed, read back", err, got)
		}
		assertTree(t, dest, map[string][]byte{})
	}
}

// barrierStore holds the first n range reads of objects under prefix
// until all n have begun: a restore that keeps fewer in flight never gets
// past them.
type barrierStore struct {
	restore.Store
	prefix string
	all    sync.WaitGroup
	calls  atomic.Int64
	n      int64
}

func (b *barrierStore) NewRangeReader(ctx context.Context, bucket, name string, off, n int64) (io.ReadCloser, error) {
	if strings.HasPrefix(name, b.prefix) && b.calls.Add(1) <= b.n {
		b.all.Done()
		b.all.Wait()
	}
	return b.Store.NewRangeReader(ctx, bucket, name, off, n)
}

// Small objects are one request each and bound by its round trip: they
// download through the window (16 at first, more while the rate grows),
// each holding what it needs of the memory, not one of the Concurrency
// slots that large objects' ranges share.
func TestSmallObjectsDownloadMoreAtOnceThanTheSlots(t *testing.T) {
	s, bucket := newBucket(t)
	want := tree(t, s, bucket, "p", 48)
	const atOnce = 16 // the window's start
	bs := &barrierStore{Store: s, prefix: "p/", n: atOnce}
	bs.all.Add(atOnce)
	o := options()
	o.Concurrency = 2
	r := newRestorer(t, bs, o)
	dest := t.TempDir()
	done := make(chan error, 1)
	go func() { _, err := r.Run(context.Background(), "gs://"+bucket+"/p", dest); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second): // a hang, not a speed
		t.Fatalf("%d small objects were never downloading at once with 2 slots: %d reads began", atOnce, bs.calls.Load())
	}
	assertTree(t, dest, want)
}
