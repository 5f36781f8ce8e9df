package gcs

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/ferry-dev/ferry/internal/crc32c"
)

// echoServer answers a multipart upload with the resource GCS would give:
// the name, metadata and content type sent, the size and CRC32C of the
// bytes, generation 1. It does as little as it can, so that a benchmark
// measures the client.
func echoServer(t testing.TB) string { return recordServer(t, nil) }

// sent is an upload request as the server read it.
type sent struct {
	method, path string
	query        map[string][]string
	header       http.Header
	resource     map[string]any // the metadata part
	mediaType    string         // the media part's Content-Type
	data         []byte
}

// recordServer is echoServer, telling record of every upload it reads.
func recordServer(t testing.TB, record func(sent)) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mr := multipart.NewReader(r.Body, params["boundary"])
		var o map[string]any
		part, err := mr.NextPart()
		if err == nil {
			err = json.NewDecoder(part).Decode(&o)
		}
		if err == nil {
			part, err = mr.NextPart()
		}
		var data []byte
		if err == nil {
			data, err = io.ReadAll(part)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if record != nil {
			res := map[string]any{}
			for k, v := range o {
				res[k] = v
			}
			record(sent{method: r.Method, path: r.URL.Path, query: r.URL.Query(), header: r.Header.Clone(), resource: res,
				mediaType: part.Header.Get("Content-Type"), data: data})
		}
		var c [4]byte
		binary.BigEndian.PutUint32(c[:], crc32c.Checksum(data))
		o["size"] = fmt.Sprint(len(data))
		o["crc32c"] = base64.StdEncoding.EncodeToString(c[:])
		o["generation"] = "1"
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(o)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// BenchmarkSmallUpload uploads a 2 KiB object through the client library's
// writer and as a plain request, to a server that does next to nothing:
// the CPU and allocations per upload are the client's.
func BenchmarkSmallUpload(b *testing.B) {
	s, err := NewEmulator(context.Background(), echoServer(b))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	data := bytes.Repeat([]byte("ferry moves files\n"), 2048/18)
	opt := UploadOptions{Size: int64(len(data)), CRC32C: crc32c.Checksum(data), IfAbsent: true, ContentType: "text/plain",
		Metadata: map[string]string{"ferry-transfer": "t1", "ferry-raw-size": "2048"}}
	for _, v := range []struct {
		name string
		up   func(context.Context, string, string, io.Reader, UploadOptions) (Attrs, error)
	}{{"library writer", s.uploadWriter}, {"plain", s.uploadPlain}} {
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := v.up(context.Background(), "b", "o", bytes.NewReader(data), opt); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Issue 41 §5: a small object goes as a request ferry builds itself
// (uploadPlain), a large one through the client library's writer. A real
// bucket must not refuse the one it takes from the other: for the same
// object and options (content type, metadata, CRC32C, a precondition, a
// KMS key) both requests are held to each other field by field, as the
// server reads them: method, path, every query parameter, the content
// type, the object resource's every field, the media part's type and
// bytes. Where they differ the test names the field.
func TestPlainUploadIsTheLibrarysRequest(t *testing.T) {
	var mu sync.Mutex
	var got []sent
	host := recordServer(t, func(r sent) { mu.Lock(); got = append(got, r); mu.Unlock() })
	s, err := NewEmulator(context.Background(), host)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	data := []byte("ferry moves files\n")
	const key = "projects/p/locations/l/keyRings/r/cryptoKeys/k"
	for _, c := range []struct {
		name string
		opt  UploadOptions
	}{
		{"if absent, metadata, content type", UploadOptions{IfAbsent: true, ContentType: "text/plain", Metadata: map[string]string{"ferry-transfer": "t1", "ferry-raw-size": "18"}}},
		{"at a generation, with a KMS key", UploadOptions{IfGeneration: 1234, KMSKey: key}},
		{"no precondition, no content type", UploadOptions{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			mu.Lock()
			got = nil
			mu.Unlock()
			opt := c.opt
			opt.Size, opt.CRC32C = int64(len(data)), crc32c.Checksum(data)
			if _, err := s.uploadWriter(context.Background(), "b", "dir/o 1.txt", bytes.NewReader(data), opt); err != nil {
				t.Fatalf("library: %v", err)
			}
			if _, err := s.uploadPlain(context.Background(), "b", "dir/o 1.txt", bytes.NewReader(data), opt); err != nil {
				t.Fatalf("plain: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(got) != 2 {
				t.Fatalf("%d requests recorded, want 2", len(got))
			}
			lib, plain := got[0], got[1]
			same := func(field string, a, b any) {
				t.Helper()
				if !reflect.DeepEqual(a, b) {
					t.Errorf("%s: the library sends %v, ferry %v", field, a, b)
				}
			}
			same("method", lib.method, plain.method)
			same("path", lib.path, plain.path)
			for k := range merged(lib.query, plain.query) {
				same("query "+k, lib.query[k], plain.query[k])
			}
			lt, _, _ := mime.ParseMediaType(lib.header.Get("Content-Type"))
			pt, _, _ := mime.ParseMediaType(plain.header.Get("Content-Type"))
			same("Content-Type", lt, pt)
			for k := range merged(lib.header, plain.header) {
				if !headerVaries[k] {
					same("header "+k, anyUUID(lib.header[k]), anyUUID(plain.header[k]))
				}
			}
			for k := range merged(lib.resource, plain.resource) {
				same("resource field "+k, lib.resource[k], plain.resource[k])
			}
			same("media Content-Type", lib.mediaType, plain.mediaType)
			same("bytes", string(lib.data), string(plain.data))
			if len(lib.query) == 0 || lib.resource["crc32c"] == nil {
				t.Fatalf("the library's request was not recorded whole: %+v", lib)
			}
		})
	}
}

// merged is the keys of a and b.
func merged[V any](a, b map[string]V) map[string]bool {
	m := map[string]bool{}
	for k := range a {
		m[k] = true
	}
	for k := range b {
		m[k] = true
	}
	return m
}

// headerVaries are the headers whose values differ between any two
// requests (a length, a boundary: Content-Type is compared as a media
// type), not compared by value.
var headerVaries = map[string]bool{"Content-Length": true, "Content-Type": true}

// anyUUID is vs with every UUID (a token drawn afresh for each call) as
// "UUID".
func anyUUID(vs []string) []string {
	var out []string
	for _, v := range vs {
		out = append(out, uuidRE.ReplaceAllString(v, "UUID"))
	}
	return out
}

var uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// The X-Goog-Api-Client ferry sends names the library's version, which
// is go.mod's.
func TestLibraryVersionIsGoMods(t *testing.T) {
	b, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if want := "cloud.google.com/go/storage v" + libraryVersion + "\n"; !strings.Contains(string(b), want) {
		t.Fatalf("go.mod does not require %q: set libraryVersion in plain.go to its version", strings.TrimSpace(want))
	}
}
