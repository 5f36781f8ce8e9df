package localstack

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"

	"github.com/ferry-dev/ferry/internal/crc32c"
)

// upload writes data to name with the Go client, in one request
// (chunk 0) or resumable in chunks of chunk bytes.
func upload(c *storage.Client, name string, data []byte, chunk int, edit func(*storage.Writer)) (*storage.ObjectAttrs, error) {
	return uploadIf(c.Bucket("b").Object(name), data, chunk, edit)
}

func uploadIf(o *storage.ObjectHandle, data []byte, chunk int, edit func(*storage.Writer)) (*storage.ObjectAttrs, error) {
	w := o.NewWriter(context.Background())
	w.ChunkSize = chunk
	w.ContentType = "application/zstd"
	w.ContentEncoding = "identity"
	w.CacheControl = "no-store"
	w.Metadata = map[string]string{"ferry-codec": "zstd", "k": "v"}
	if edit != nil {
		edit(w)
	}
	if _, err := w.Write(data); err != nil {
		_ = w.Close()
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return w.Attrs(), nil
}

// On the filesystem backend the shim takes uploads itself, and what it
// stores is what the fake would: the same bytes, CRC32C and MD5 (of the
// bytes), content type and encoding, cache control, metadata and storage
// class, in one request and resumable in one or several chunks.
func TestFilesystemUploadsAreTheFakes(t *testing.T) {
	const chunk = 256 << 10
	cases := []struct {
		name  string
		size  int
		chunk int
	}{
		{"one request", 70_001, 0},
		{"one request, empty", 0, 0},
		{"resumable, several chunks", 4*chunk + 17, chunk},
		{"resumable, whole chunks", 2 * chunk, chunk},
		{"resumable, empty", 0, chunk},
	}
	fakeG, fake := startGCS(t, GCSOptions{})
	fileG, file := startGCS(t, GCSOptions{StorageRoot: t.TempDir()})
	for i, tc := range cases {
		data := randomBytes(tc.size, uint64(i))
		name := fmt.Sprintf("dir/%d", i)
		want, err := upload(fake, name, data, tc.chunk, nil)
		if err != nil {
			t.Fatalf("%s: the fake: %v", tc.name, err)
		}
		got, err := upload(file, name, data, tc.chunk, nil)
		if err != nil {
			t.Fatalf("%s: the shim: %v", tc.name, err)
		}
		sum := md5.Sum(data)
		if back := read(t, file, name); !bytes.Equal(back, data) {
			t.Errorf("%s: read back %d bytes that differ from the %d uploaded", tc.name, len(back), len(data))
		}
		if got.Size != int64(len(data)) || got.CRC32C != crc32c.Checksum(data) || !bytes.Equal(got.MD5, sum[:]) {
			t.Errorf("%s: size %d crc32c %08x md5 %x, want %d %08x %x", tc.name, got.Size, got.CRC32C, got.MD5, len(data), crc32c.Checksum(data), sum)
		}
		for _, f := range []struct {
			what      string
			fake, got any
		}{
			{"content type", want.ContentType, got.ContentType},
			{"content encoding", want.ContentEncoding, got.ContentEncoding},
			{"cache control", want.CacheControl, got.CacheControl},
			{"metadata", want.Metadata, got.Metadata},
			{"storage class", want.StorageClass, got.StorageClass},
			{"md5", want.MD5, got.MD5},
		} {
			if fmt.Sprint(f.fake) != fmt.Sprint(f.got) {
				t.Errorf("%s: %s: fake %v, shim %v", tc.name, f.what, f.fake, f.got)
			}
		}
		// A listing shows it as a GET does.
		a, err := file.Bucket("b").Object(name).Attrs(context.Background())
		if err != nil || a.Generation != got.Generation || a.CRC32C != got.CRC32C {
			t.Errorf("%s: attrs %+v, %v; want generation %d", tc.name, a, err, got.Generation)
		}
	}
	if n := fileG.Stats().Uploads; n != int64(len(cases)) {
		t.Errorf("the shim stored %d uploads on the filesystem backend, want all %d", n, len(cases))
	}
	if n := fakeG.Stats().Uploads; n != 0 {
		t.Errorf("the shim stored %d uploads on the memory backend, want none (the fake's)", n)
	}
}

// The shim's uploads refuse what Cloud Storage refuses, and leave the
// object as it was: bytes that do not match the CRC32C or MD5 the client
// declared (400), and a write whose generation precondition fails (412).
func TestFilesystemUploadsRefuse(t *testing.T) {
	_, c := startGCS(t, GCSOptions{StorageRoot: t.TempDir()})
	old := []byte("the object as it was")
	if _, err := upload(c, "o", old, 0, nil); err != nil {
		t.Fatal(err)
	}
	data := randomBytes(300_000, 9)
	for _, chunk := range []int{0, 256 << 10} {
		for _, tc := range []struct {
			name string
			o    *storage.ObjectHandle
			edit func(*storage.Writer)
			code int
		}{
			{"a wrong CRC32C", c.Bucket("b").Object("o"), func(w *storage.Writer) { w.CRC32C, w.SendCRC32C = crc32c.Checksum(data)^1, true }, 400},
			{"a wrong MD5", c.Bucket("b").Object("o"), func(w *storage.Writer) { w.MD5 = make([]byte, 16) }, 400},
			{"an object that exists", c.Bucket("b").Object("o").If(storage.Conditions{DoesNotExist: true}), nil, 412},
			{"another generation", c.Bucket("b").Object("o").If(storage.Conditions{GenerationMatch: 1}), nil, 412},
		} {
			_, err := uploadIf(tc.o, data, chunk, tc.edit)
			var ge *googleapi.Error
			if !errors.As(err, &ge) || ge.Code != tc.code {
				t.Errorf("chunk %d, %s: %v, want a %d", chunk, tc.name, err, tc.code)
			}
			if got := read(t, c, "o"); !bytes.Equal(got, old) {
				t.Errorf("chunk %d, %s: the object is now %d bytes, want it as it was", chunk, tc.name, len(got))
			}
		}
	}
	// And the precondition that holds lets the write through.
	a, err := c.Bucket("b").Object("o").Attrs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := uploadIf(c.Bucket("b").Object("o").If(storage.Conditions{GenerationMatch: a.Generation}), data, 256<<10, nil); err != nil {
		t.Fatal(err)
	}
	if got := read(t, c, "o"); !bytes.Equal(got, data) {
		t.Errorf("after a write at the live generation: %d bytes, want the %d written", len(got), len(data))
	}
}

// A resumable upload answers as Cloud Storage does between its chunks (308
// with the range it holds), takes a chunk sent again, and is no object
// (not listed, not readable) until its last byte arrived.
func TestFilesystemResumableProtocol(t *testing.T) {
	g, c := startGCS(t, GCSOptions{StorageRoot: t.TempDir()})
	base := "http://" + g.Host
	do := func(method, u, contentRange string, body []byte) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, u, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if contentRange != "" {
			req.Header.Set("Content-Range", contentRange)
		}
		if method == http.MethodPost {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp
	}
	resp := do(http.MethodPost, base+"/upload/storage/v1/b/b/o?uploadType=resumable", "", []byte(`{"name":"r/obj","metadata":{"k":"v"}}`))
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusOK || !strings.Contains(loc, "upload_id="+uploadIDPrefix) {
		t.Fatalf("start: %s, Location %q", resp.Status, loc)
	}
	data := []byte("0123456789abcdefghij")
	for _, step := range []struct {
		rng       string
		body      []byte
		status    int
		wantRange string
	}{
		{"bytes 0-9/*", data[:10], http.StatusPermanentRedirect, "bytes=0-9"},
		{"bytes */*", nil, http.StatusPermanentRedirect, "bytes=0-9"},            // what arrived?
		{"bytes 5-14/*", data[5:15], http.StatusPermanentRedirect, "bytes=0-14"}, // overlaps what arrived
	} {
		resp := do(http.MethodPut, loc, step.rng, step.body)
		if resp.StatusCode != step.status || resp.Header.Get("Range") != step.wantRange {
			t.Fatalf("%s: %s, Range %q; want %d, %q", step.rng, resp.Status, resp.Header.Get("Range"), step.status, step.wantRange)
		}
		var names []string
		eachName(t, c, "", func(n string) { names = append(names, n) })
		if len(names) != 0 {
			t.Fatalf("after %s: listed %q, want nothing until the upload ends", step.rng, names)
		}
		if _, err := c.Bucket("b").Object("r/obj").Attrs(context.Background()); !errors.Is(err, storage.ErrObjectNotExist) {
			t.Fatalf("after %s: attrs: %v, want no object yet", step.rng, err)
		}
	}
	if resp := do(http.MethodPut, loc, "bytes 20-24/*", []byte("later")); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a chunk past what arrived: %s, want 400", resp.Status)
	}
	resp = do(http.MethodPut, loc, "bytes 15-19/20", data[15:])
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("last chunk: %s %s", resp.Status, b)
	}
	if got := read(t, c, "r/obj"); !bytes.Equal(got, data) {
		t.Errorf("read back %q, want %q", got, data)
	}
	var names []string
	eachName(t, c, "", func(n string) { names = append(names, n) })
	if len(names) != 1 || names[0] != "r/obj" {
		t.Errorf("listed %q, want [r/obj]", names)
	}
	if resp := do(http.MethodPut, loc, "bytes */20", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("the ended upload again: %s, want 404", resp.Status)
	}
	// A cancelled upload leaves nothing.
	resp = do(http.MethodPost, base+"/upload/storage/v1/b/b/o?uploadType=resumable&name="+url.QueryEscape("r/cancelled"), "", nil)
	loc = resp.Header.Get("Location")
	do(http.MethodPut, loc, "bytes 0-9/*", data[:10])
	if resp := do(http.MethodDelete, loc, "", nil); resp.StatusCode != 499 {
		t.Errorf("cancel: %s, want 499", resp.Status)
	}
	names = nil
	eachName(t, c, "", func(n string) { names = append(names, n) })
	if len(names) != 1 {
		t.Errorf("after a cancelled upload: listed %q, want [r/obj]", names)
	}
}

// An upload to a bucket named ".." (escaped in the path as GCS would
// never see it) is not the shim's to take: nothing is written beside the
// storage root, whatever the fake then answers.
func TestAnUploadCannotLeaveTheStorageRoot(t *testing.T) {
	parent := t.TempDir()
	root := filepath.Join(parent, "gcs")
	g, _ := startGCS(t, GCSOptions{StorageRoot: root})
	body := "--b\r\nContent-Type: application/json\r\n\r\n{\"name\":\"escaped\"}\r\n--b\r\nContent-Type: text/plain\r\n\r\nx\r\n--b--\r\n"
	req, err := http.NewRequest(http.MethodPost, "http://"+g.Host+"/upload/storage/v1/b/%2E%2E/o?uploadType=multipart", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "multipart/related; boundary=b")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if _, err := os.Stat(filepath.Join(parent, "escaped")); err == nil {
		t.Fatalf("an upload to bucket .. wrote %s, outside the storage root (answer %s)", filepath.Join(parent, "escaped"), resp.Status)
	}
	if n := g.Stats().Uploads; n != 0 {
		t.Errorf("the shim took %d uploads to bucket ..", n)
	}
}
