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
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/crc32c"
)

// echoServer answers a multipart upload with the resource GCS would give:
// the name, metadata and content type sent, the size and CRC32C of the
// bytes, generation 1. It does as little as it can, so that a benchmark
// measures the client.
func echoServer(t testing.TB) string {
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
