package gcstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/gcs"
)

// put uploads data to the case's object name, IfAbsent, and fails the case
// on an error.
func (h *harness) put(name string, data []byte) gcs.Attrs {
	h.t.Helper()
	a, err := h.s.PutSmall(context.Background(), h.bucket, h.obj(name), data, true, "application/octet-stream")
	if err != nil {
		h.t.Fatal(err)
	}
	return a
}

// read returns the whole object, failing the case on an error.
func (h *harness) read(name string) []byte {
	h.t.Helper()
	b, err := h.s.ReadAll(context.Background(), h.bucket, h.obj(name))
	if err != nil {
		h.t.Fatal(err)
	}
	return b
}

// payload is n deterministic bytes.
func payload(n int, seed uint32) []byte {
	b := make([]byte, n)
	x := seed | 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// testUploadRoundTrip: what Upload reports is what Attrs reports and what a
// read returns: the same bytes, size and CRC32C.
func testUploadRoundTrip(t *testing.T, h *harness) {
	// Both ways an upload goes: one plain request up to gcs.PlainMax,
	// the client library's writer above.
	for i, n := range []int{0, 2 << 10, gcs.PlainMax, gcs.PlainMax + 1, 300 << 10} {
		name := fmt.Sprintf("o%d", i)
		data := payload(n, uint32(i+1))
		a, err := h.s.Upload(context.Background(), h.bucket, h.obj(name), bytes.NewReader(data),
			gcs.UploadOptions{Size: int64(len(data)), CRC32C: crc32c.Checksum(data), IfAbsent: true})
		if err != nil {
			t.Fatal(err)
		}
		st, err := h.s.Attrs(context.Background(), h.bucket, h.obj(name))
		if err != nil {
			t.Fatal(err)
		}
		if a.Size != int64(len(data)) || a.CRC32C != crc32c.Checksum(data) || a.Generation == 0 ||
			st.Size != a.Size || st.CRC32C != a.CRC32C || st.Generation != a.Generation || st.Name != h.obj(name) || a.Name != st.Name {
			t.Fatalf("%d bytes: upload reported %+v, attrs %+v; sent %d bytes with crc32c %08x", n, a, st, len(data), crc32c.Checksum(data))
		}
		if got := h.read(name); !bytes.Equal(got, data) {
			t.Fatalf("read %d bytes (crc32c %08x), wrote %d", len(got), crc32c.Checksum(got), len(data))
		}
	}
}

// testMetadata: content type and metadata set by an upload and by a compose
// come back from Attrs.
func testMetadata(t *testing.T, h *harness) {
	ctx := context.Background()
	md := map[string]string{"ferry-transfer": "t1", "ferry-raw-crc32c": "123", "ferry-note": "ü ñ"}
	data := []byte("metadata")
	if _, err := h.s.Upload(ctx, h.bucket, h.obj("m"), bytes.NewReader(data), gcs.UploadOptions{
		Size: int64(len(data)), CRC32C: crc32c.Checksum(data), ContentType: "text/csv", Metadata: md}); err != nil {
		t.Fatal(err)
	}
	a, err := h.s.Attrs(ctx, h.bucket, h.obj("m"))
	if err != nil {
		t.Fatal(err)
	}
	if !mapsEqual(a.Metadata, md) {
		t.Errorf("upload: metadata %v, set %v", a.Metadata, md)
	}
	cmd := map[string]string{"ferry-codec": "zstd"}
	c, err := h.s.Compose(ctx, h.bucket, h.obj("c"), []string{h.obj("m"), h.obj("m")}, gcs.ComposeOptions{ContentType: "application/zstd", Metadata: cmd})
	if err != nil {
		t.Fatal(err)
	}
	if !mapsEqual(c.Metadata, cmd) {
		t.Errorf("compose: metadata %v, set %v", c.Metadata, cmd)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// testIfAbsent: an IfAbsent write to an existing object fails with
// ErrPrecondition and leaves the object as it was.
func testIfAbsent(t *testing.T, h *harness) {
	first := h.put("o", []byte("first"))
	_, err := h.s.PutSmall(context.Background(), h.bucket, h.obj("o"), []byte("second"), true, "")
	if !errors.Is(err, gcs.ErrPrecondition) {
		t.Fatalf("IfAbsent upload over an existing object: %v, want ErrPrecondition", err)
	}
	if !strings.Contains(err.Error(), h.obj("o")) {
		t.Errorf("error %q does not name the object", err)
	}
	if got := h.read("o"); string(got) != "first" {
		t.Fatalf("object holds %q after a refused upload, want %q", got, "first")
	}
	if a, _ := h.s.Attrs(context.Background(), h.bucket, h.obj("o")); a.Generation != first.Generation {
		t.Fatalf("generation %d after a refused upload, was %d", a.Generation, first.Generation)
	}
}

// testGeneration: a write conditioned on a generation replaces only that
// generation.
func testGeneration(t *testing.T, h *harness) {
	ctx := context.Background()
	first := h.put("o", []byte("v1"))
	up := func(data string, gen int64) (gcs.Attrs, error) {
		return h.s.Upload(ctx, h.bucket, h.obj("o"), strings.NewReader(data),
			gcs.UploadOptions{Size: int64(len(data)), CRC32C: crc32c.Checksum([]byte(data)), IfGeneration: gen})
	}
	second, err := up("v2", first.Generation)
	if err != nil {
		t.Fatalf("upload conditioned on the live generation: %v", err)
	}
	if second.Generation == first.Generation {
		t.Fatalf("replaced object kept generation %d", first.Generation)
	}
	if _, err := up("v3", first.Generation); !errors.Is(err, gcs.ErrPrecondition) {
		t.Fatalf("upload conditioned on a replaced generation: %v, want ErrPrecondition", err)
	}
	if got := h.read("o"); string(got) != "v2" {
		t.Fatalf("object holds %q, want v2", got)
	}
}

// testTouch: a touch moves an object's Updated time and keeps its bytes
// and Created time (a lease renewed keeps its place in the order of
// leases); a touch of a missing object fails with ErrNotFound, and a
// listing shows the new Updated time.
func testTouch(t *testing.T, h *harness) {
	ctx := context.Background()
	first := h.put("o", []byte("lease"))
	var a gcs.Attrs
	// Updated is at the server's clock's resolution: touch until it moves.
	for i := 0; i < 1000 && !a.Updated.After(first.Updated); i++ {
		if err := h.s.Touch(ctx, h.bucket, h.obj("o"), "ferry-renewed", fmt.Sprint(i)); err != nil {
			t.Fatalf("touch: %v", err)
		}
		var err error
		if a, err = h.s.Attrs(ctx, h.bucket, h.obj("o")); err != nil {
			t.Fatal(err)
		}
	}
	switch {
	case !a.Updated.After(first.Updated):
		t.Fatalf("touched object's Updated %v, not after %v", a.Updated, first.Updated)
	case !a.Created.Equal(first.Created):
		t.Fatalf("touched object created %v, want %v", a.Created, first.Created)
	case string(h.read("o")) != "lease":
		t.Fatalf("touched object holds %q", h.read("o"))
	}
	var listed gcs.Attrs
	if err := h.s.List(ctx, h.bucket, h.obj("o"), func(l gcs.Attrs) error { listed = l; return nil }); err != nil {
		t.Fatal(err)
	}
	if !listed.Updated.Equal(a.Updated) || !listed.Created.Equal(first.Created) {
		t.Fatalf("a listing shows created %v, updated %v; want %v, %v", listed.Created, listed.Updated, first.Created, a.Updated)
	}
	if err := h.s.Touch(ctx, h.bucket, h.obj("gone"), "ferry-renewed", "x"); !errors.Is(err, gcs.ErrNotFound) {
		t.Fatalf("touch of a missing object: %v, want ErrNotFound", err)
	}
}

// testPatch: a patch under the version a listing showed sets its keys and
// keeps the others and the bytes; one under a version replaced since fails
// with ErrPrecondition.
func testPatch(t *testing.T, h *harness) {
	ctx := context.Background()
	v1 := h.put("p", []byte("v1"))
	if _, err := h.s.PutSmall(ctx, h.bucket, h.obj("p"), []byte("the live one"), false, "application/octet-stream"); err != nil {
		t.Fatal(err)
	}
	if err := h.s.Patch(ctx, h.bucket, v1, map[string]string{"ferry-transfer": "t2"}); !errors.Is(err, gcs.ErrPrecondition) {
		t.Fatalf("patch of the replaced generation %d: %v, want ErrPrecondition", v1.Generation, err)
	}
	seen := h.listed("p")
	if err := h.s.Patch(ctx, h.bucket, seen, map[string]string{"ferry-transfer": "t2", "ferry-adopted": "t1"}); err != nil {
		t.Fatalf("patch as listed: %v", err)
	}
	a := h.listed("p")
	switch {
	case a.Metadata["ferry-transfer"] != "t2" || a.Metadata["ferry-adopted"] != "t1":
		t.Fatalf("patched metadata %v", a.Metadata)
	case string(h.read("p")) != "the live one":
		t.Fatalf("patched object holds %q", h.read("p"))
	}
	if err := h.s.Patch(ctx, h.bucket, gcs.Attrs{Name: h.obj("gone"), Generation: 1}, map[string]string{"k": "v"}); !errors.Is(err, gcs.ErrNotFound) && !errors.Is(err, gcs.ErrPrecondition) {
		t.Fatalf("patch of a missing object: %v, want ErrNotFound or ErrPrecondition", err)
	}
}

// testDeleteAsSeen: a delete as a listing showed the object, made after a
// patch (another transfer adopted the object a failed one is removing),
// fails with ErrPrecondition and leaves it; a delete as it is removes it.
func testDeleteAsSeen(t *testing.T, h *harness) {
	ctx := context.Background()
	h.put("d", []byte("adopted"))
	seen := h.listed("d")
	if err := h.s.Patch(ctx, h.bucket, seen, map[string]string{"ferry-transfer": "t2"}); err != nil {
		t.Fatal(err)
	}
	if err := h.s.DeleteAsSeen(ctx, h.bucket, seen); !errors.Is(err, gcs.ErrPrecondition) {
		t.Fatalf("delete as listed before a patch: %v, want ErrPrecondition", err)
	}
	if string(h.read("d")) != "adopted" {
		t.Fatal("a refused delete removed the object")
	}
	if err := h.s.DeleteAsSeen(ctx, h.bucket, h.listed("d")); err != nil {
		t.Fatalf("delete as it is: %v", err)
	}
	if _, err := h.s.Attrs(ctx, h.bucket, h.obj("d")); !errors.Is(err, gcs.ErrNotFound) {
		t.Fatalf("after delete: %v, want ErrNotFound", err)
	}
}

// listed is the object as a listing shows it.
func (h *harness) listed(name string) gcs.Attrs {
	h.t.Helper()
	var seen gcs.Attrs
	if err := h.s.List(context.Background(), h.bucket, h.obj(name), func(a gcs.Attrs) error {
		if a.Name == h.obj(name) {
			seen = a
		}
		return nil
	}); err != nil {
		h.t.Fatal(err)
	}
	if seen.Name == "" {
		h.t.Fatalf("%s not listed", h.obj(name))
	}
	return seen
}

// testChecksumMismatch: an upload whose bytes do not match the CRC32C the
// caller expects fails with ErrChecksum, and nothing is visible.
func testChecksumMismatch(t *testing.T, h *harness) {
	for _, n := range []int{64 << 10, 300 << 10} { // a plain request, the library's writer
		data := payload(n, 2)
		_, err := h.s.Upload(context.Background(), h.bucket, h.obj("bad"), bytes.NewReader(data),
			gcs.UploadOptions{Size: int64(len(data)), CRC32C: crc32c.Checksum(data) ^ 1, IfAbsent: true})
		if !errors.Is(err, gcs.ErrChecksum) {
			t.Fatalf("%d bytes: upload with a wrong crc32c: %v, want ErrChecksum", n, err)
		}
		if _, err := h.s.Attrs(context.Background(), h.bucket, h.obj("bad")); !errors.Is(err, gcs.ErrNotFound) {
			t.Fatalf("%d bytes: after a rejected upload: %v, want ErrNotFound (nothing visible)", n, err)
		}
	}
}

// testRangedReads: NewRangeReader returns exactly the bytes asked for.
func testRangedReads(t *testing.T, h *harness) {
	data := payload(1<<20+17, 3)
	h.put("r", data)
	n := int64(len(data))
	for _, tc := range []struct{ off, length, from, to int64 }{
		{0, -1, 0, n},
		{0, 1, 0, 1},
		{5, 100, 5, 105},
		{1 << 19, 1 << 19, 1 << 19, 1 << 20},
		{n - 10, -1, n - 10, n},
		{n - 10, 1000, n - 10, n}, // past the end: what there is
		{-17, -1, n - 17, n},      // the last 17 bytes
	} {
		r, err := h.s.NewRangeReader(context.Background(), h.bucket, h.obj("r"), tc.off, tc.length)
		if err != nil {
			t.Errorf("range %d+%d: %v", tc.off, tc.length, err)
			continue
		}
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil || !bytes.Equal(got, data[tc.from:tc.to]) {
			t.Errorf("range %d+%d: %d bytes (crc32c %08x), %v; want bytes %d to %d (crc32c %08x)",
				tc.off, tc.length, len(got), crc32c.Checksum(got), err, tc.from, tc.to, crc32c.Checksum(data[tc.from:tc.to]))
		}
	}
}

// testNotFound: every read of a missing object fails with ErrNotFound,
// naming it.
func testNotFound(t *testing.T, h *harness) {
	ctx := context.Background()
	name := h.obj("missing")
	_, err1 := h.s.Attrs(ctx, h.bucket, name)
	_, err2 := h.s.ReadAll(ctx, h.bucket, name)
	_, err3 := h.s.NewRangeReader(ctx, h.bucket, name, 10, 10)
	for i, err := range []error{err1, err2, err3} {
		if !errors.Is(err, gcs.ErrNotFound) || !strings.Contains(err.Error(), name) {
			t.Errorf("call %d on a missing object: %v, want ErrNotFound naming %s", i+1, err, name)
		}
	}
	if err := h.s.BucketExists(ctx, "ferry-no-such-bucket-"+strings.ReplaceAll(h.prefix[8:20], "-", "")); !errors.Is(err, gcs.ErrNotFound) {
		t.Errorf("a missing bucket: %v, want ErrNotFound", err)
	}
}

// testList: List under a prefix returns exactly the objects under it, in
// name order, with their sizes.
func testList(t *testing.T, h *harness) {
	for _, n := range []string{"a/2", "a/1", "a/b/3", "ab/4", "b/5"} {
		h.put(n, []byte(n))
	}
	list := func(prefix string) []string { return h.names(prefix, "", "") }
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"a/", []string{"a/1", "a/2", "a/b/3"}},
		{"a", []string{"a/1", "a/2", "a/b/3", "ab/4"}},
		{"", []string{"a/1", "a/2", "a/b/3", "ab/4", "b/5"}},
		{"zzz", nil},
	} {
		if got := list(tc.prefix); !slices.Equal(got, tc.want) {
			t.Errorf("list %q: %v, want %v", tc.prefix, got, tc.want)
		}
	}
	stop := errors.New("enough")
	n := 0
	err := h.s.List(context.Background(), h.bucket, h.prefix, func(gcs.Attrs) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Errorf("a callback error: List returned %v after %d calls, want it at once", err, n)
	}
}

// names lists the case's objects under prefix from start to end (each
// relative to the case; both "": List, else ListRange), as names relative
// to the case, and
// checks each object's size is its name's length, as put made them.
func (h *harness) names(prefix, start, end string) []string {
	h.t.Helper()
	if start != "" {
		start = h.obj(start)
	}
	if end != "" {
		end = h.obj(end)
	}
	var got []string
	add := func(a gcs.Attrs) error {
		if a.Size != int64(len(strings.TrimPrefix(a.Name, h.prefix))) {
			h.t.Errorf("%s listed with size %d", a.Name, a.Size)
		}
		got = append(got, strings.TrimPrefix(a.Name, h.prefix))
		return nil
	}
	var err error
	if start == "" && end == "" {
		err = h.s.List(context.Background(), h.bucket, h.obj(prefix), add)
	} else {
		err = h.s.ListRange(context.Background(), h.bucket, h.obj(prefix), start, end, add)
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return got
}

// testListRange: a range lists the names from its start, included, to its
// end, excluded, either side open when empty; adjacent ranges are the
// whole listing, each name once.
func testListRange(t *testing.T, h *harness) {
	for _, n := range []string{"a/1", "a/2", "a/3", "a/4", "b/5"} {
		h.put(n, []byte(n))
	}
	list := func(start, end string) []string { return h.names("a/", start, end) }
	for _, tc := range []struct {
		start, end string
		want       []string
	}{
		{"", "a/2", []string{"a/1"}},
		{"a/2", "a/4", []string{"a/2", "a/3"}},
		{"a/4", "", []string{"a/4"}},
		{"a/2x", "a/3x", []string{"a/3"}},
		{"", "", []string{"a/1", "a/2", "a/3", "a/4"}},
	} {
		if got := list(tc.start, tc.end); !slices.Equal(got, tc.want) {
			t.Errorf("list a/ from %q to %q: %v, want %v", tc.start, tc.end, got, tc.want)
		}
	}
}

// testDelete: deleting a missing object is no error; a deleted object is
// gone.
func testDelete(t *testing.T, h *harness) {
	ctx := context.Background()
	if err := h.s.Delete(ctx, h.bucket, h.obj("never")); err != nil {
		t.Fatalf("delete of a missing object: %v", err)
	}
	h.put("d", []byte("x"))
	if err := h.s.Delete(ctx, h.bucket, h.obj("d")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.s.Attrs(ctx, h.bucket, h.obj("d")); !errors.Is(err, gcs.ErrNotFound) {
		t.Fatalf("after delete: %v, want ErrNotFound", err)
	}
	if err := h.s.Delete(ctx, h.bucket, h.obj("d")); err != nil {
		t.Fatalf("second delete: %v", err)
	}
}

// testDeleteGeneration: deleting a generation that is no longer live fails
// with ErrPrecondition and leaves the newer version; the live one goes.
func testDeleteGeneration(t *testing.T, h *harness) {
	ctx := context.Background()
	old := h.put("g", []byte("v1"))
	v2 := []byte("version 2")
	live, err := h.s.Upload(ctx, h.bucket, h.obj("g"), bytes.NewReader(v2), gcs.UploadOptions{Size: int64(len(v2)), CRC32C: crc32c.Checksum(v2)})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.s.DeleteGeneration(ctx, h.bucket, h.obj("g"), old.Generation); !errors.Is(err, gcs.ErrPrecondition) {
		t.Fatalf("delete of the replaced generation %d: %v, want ErrPrecondition", old.Generation, err)
	}
	if got := h.read("g"); !bytes.Equal(got, v2) {
		t.Fatalf("after a refused delete the object holds %q, want %q", got, v2)
	}
	if err := h.s.DeleteGeneration(ctx, h.bucket, h.obj("g"), live.Generation); err != nil {
		t.Fatal(err)
	}
	if _, err := h.s.Attrs(ctx, h.bucket, h.obj("g")); !errors.Is(err, gcs.ErrNotFound) {
		t.Fatalf("after delete of the live generation: %v, want ErrNotFound", err)
	}
	if err := h.s.DeleteGeneration(ctx, h.bucket, h.obj("g"), live.Generation); err != nil {
		t.Fatalf("delete of a gone object: %v", err)
	}
}

// testObjectAndPrefix: GCS names are flat, so "a" and "a/b" are two objects
// that coexist.
func testObjectAndPrefix(t *testing.T, h *harness) {
	h.put("a", []byte("file a"))
	h.put("a/b", []byte("file a/b"))
	if got := h.read("a"); string(got) != "file a" {
		t.Fatalf("a holds %q", got)
	}
	if got := h.read("a/b"); string(got) != "file a/b" {
		t.Fatalf("a/b holds %q", got)
	}
}

// sources uploads n small objects and returns their names and
// concatenation.
func (h *harness) sources(n int) ([]string, []byte) {
	var names []string
	var all []byte
	for i := range n {
		data := payload(1000+i*37, uint32(i+10))
		names = append(names, h.obj(fmt.Sprintf("src/%02d", i)))
		h.put(fmt.Sprintf("src/%02d", i), data)
		all = append(all, data...)
	}
	return names, all
}

// testCompose32: 32 sources compose into their concatenation, with the
// CRC32C combined from theirs.
func testCompose32(t *testing.T, h *harness) {
	names, all := h.sources(gcs.MaxComposeSources)
	a, err := h.s.Compose(context.Background(), h.bucket, h.obj("dst"), names, gcs.ComposeOptions{IfAbsent: true})
	if err != nil {
		t.Fatal(err)
	}
	if a.Size != int64(len(all)) || a.CRC32C != crc32c.Checksum(all) {
		t.Fatalf("composed %d bytes with crc32c %08x, want %d with %08x", a.Size, a.CRC32C, len(all), crc32c.Checksum(all))
	}
	if got := h.read("dst"); !bytes.Equal(got, all) {
		t.Fatalf("composed object reads %d bytes, want the %d of the sources", len(got), len(all))
	}
}

// testCompose33: more than 32 sources is an error, and writes nothing.
func testCompose33(t *testing.T, h *harness) {
	names, _ := h.sources(gcs.MaxComposeSources + 1)
	_, err := h.s.Compose(context.Background(), h.bucket, h.obj("dst"), names, gcs.ComposeOptions{})
	if err == nil || !strings.Contains(err.Error(), "33 sources") {
		t.Fatalf("compose of 33 sources: %v, want an error naming the count", err)
	}
	if _, err := h.s.Attrs(context.Background(), h.bucket, h.obj("dst")); !errors.Is(err, gcs.ErrNotFound) {
		t.Fatalf("after a refused compose: %v, want ErrNotFound", err)
	}
}

// testComposePreconditions: IfAbsent and IfGeneration hold for composes.
func testComposePreconditions(t *testing.T, h *harness) {
	ctx := context.Background()
	names, _ := h.sources(2)
	old := h.put("dst", []byte("old"))
	if _, err := h.s.Compose(ctx, h.bucket, h.obj("dst"), names, gcs.ComposeOptions{IfAbsent: true}); !errors.Is(err, gcs.ErrPrecondition) {
		t.Fatalf("IfAbsent compose over an existing object: %v, want ErrPrecondition", err)
	}
	if _, err := h.s.Compose(ctx, h.bucket, h.obj("dst"), names, gcs.ComposeOptions{IfGeneration: old.Generation + 1}); !errors.Is(err, gcs.ErrPrecondition) {
		t.Fatalf("compose conditioned on a wrong generation: %v, want ErrPrecondition", err)
	}
	if got := h.read("dst"); string(got) != "old" {
		t.Fatalf("dst holds %d bytes after refused composes, want %q", len(got), "old")
	}
	if _, err := h.s.Compose(ctx, h.bucket, h.obj("dst"), names, gcs.ComposeOptions{IfGeneration: old.Generation}); err != nil {
		t.Fatalf("compose conditioned on the live generation: %v", err)
	}
}

// testComposeMissingSource: a compose naming a missing source fails with
// ErrNotFound, and writes nothing.
func testComposeMissingSource(t *testing.T, h *harness) {
	names, _ := h.sources(2)
	names = append(names, h.obj("src/missing"))
	_, err := h.s.Compose(context.Background(), h.bucket, h.obj("dst"), names, gcs.ComposeOptions{})
	if !errors.Is(err, gcs.ErrNotFound) {
		t.Fatalf("compose with a missing source: %v, want ErrNotFound", err)
	}
	if _, err := h.s.Attrs(context.Background(), h.bucket, h.obj("dst")); !errors.Is(err, gcs.ErrNotFound) {
		t.Fatalf("after a failed compose: %v, want ErrNotFound", err)
	}
}

// testKMS: an upload and a compose made with a KMS key are encrypted with
// it, and a Store made WithKMSKey applies it to every write.
func testKMS(t *testing.T, h *harness) {
	key := h.target.KMSKey
	if key == "" {
		t.Skip("no KMS key for this backend (FERRY_TEST_KMS_KEY)")
	}
	ctx := context.Background()
	data := []byte("secret")
	a, err := h.s.Upload(ctx, h.bucket, h.obj("k"), bytes.NewReader(data),
		gcs.UploadOptions{Size: int64(len(data)), CRC32C: crc32c.Checksum(data), KMSKey: key})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(a.KMSKey, key) {
		t.Errorf("upload: encrypted with %q, want %s", a.KMSKey, key)
	}
	c, err := h.s.Compose(ctx, h.bucket, h.obj("kc"), []string{h.obj("k")}, gcs.ComposeOptions{KMSKey: key})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.KMSKey, key) {
		t.Errorf("compose: encrypted with %q, want %s", c.KMSKey, key)
	}
	p, err := h.s.WithKMSKey(key).PutSmall(ctx, h.bucket, h.obj("kp"), data, true, "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p.KMSKey, key) {
		t.Errorf("WithKMSKey: encrypted with %q, want %s", p.KMSKey, key)
	}
}
