package gcs

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"google.golang.org/api/googleapi"
)

// PlainMax is the largest upload sent as one plain request built in memory
// (uploadPlain); larger ones stream through the client library's writer.
//
// The library's writer costs as much CPU as an object write needs to on
// its own for a small object: it sends the body through an io.Pipe fed by
// a goroutine, with fresh buffers for each request, and the collector
// pays for them: a fifth of a small file's CPU in the workers is malloc,
// and a tenth the collector. A plain multipart request from a
// pooled buffer sends the same bytes, with the same checksum for GCS to
// check, and the same preconditions.
const PlainMax = 256 << 10

// userAgent and apiClient are the User-Agent and X-Goog-Api-Client headers
// the client library sends (TestPlainUploadIsTheLibrarysRequest holds
// uploadPlain's request to the library's).
var (
	userAgent = "google-api-go-client/0.5"
	apiClient = "gl-go/" + strings.TrimPrefix(runtime.Version(), "go") + " gccl/" + libraryVersion
)

// libraryVersion is the version of cloud.google.com/go/storage in go.mod
// (TestLibraryVersionIsGoMods holds them together).
const libraryVersion = "1.70.0"

// RequestMemory is what an upload of size bytes holds while it is in
// flight, beside the bytes it reads: a plain request (PlainMax or less)
// its body, copied once into a pooled buffer, with a bounded header and
// the connection's buffers; a larger one the copy buffers between its
// reader and the library's writer. A small file's upload is then sized to
// what it carries, and hundreds fit where a large one's fit.
func RequestMemory(size int64) int64 {
	if size <= PlainMax {
		return max(size, 0) + plainOverhead
	}
	return writerOverhead
}

const (
	plainOverhead  = 16 << 10  // the metadata part, headers and the connection's buffers
	writerOverhead = 128 << 10 // two copy buffers (iobuf.Size) between reader, pipe and connection
)

// plainBufs are the request bodies of plain uploads, reused.
var plainBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// plainObject is the object resource a plain upload sends, and the part
// of the answer it reads.
type plainObject struct {
	Name        string            `json:"name"`
	Bucket      string            `json:"bucket,omitempty"`
	ContentType string            `json:"contentType,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	CRC32C      string            `json:"crc32c,omitempty"`
	// Answered only.
	Size           int64  `json:"size,string,omitempty"`
	Generation     int64  `json:"generation,string,omitempty"`
	ComponentCount int64  `json:"componentCount,omitempty"`
	KMSKeyName     string `json:"kmsKeyName,omitempty"`
	TimeCreated    string `json:"timeCreated,omitempty"`
}

// uploadPlain uploads the opt.Size bytes of r as one multipart request
// built in a pooled buffer: the object's resource (name, content type,
// metadata, and the CRC32C, which GCS checks against the bytes) and the
// bytes. Preconditions and the KMS key go in the query, as the client
// library sends them.
func (s *Store) uploadPlain(ctx context.Context, bucket, name string, r io.Reader, opt UploadOptions) (Attrs, error) {
	where := fmt.Sprintf("upload gs://%s/%s", bucket, name)
	ctx, cancel := withTimeout(ctx, uploadTimeout(opt.Size))
	defer cancel()
	var crc [4]byte
	binary.BigEndian.PutUint32(crc[:], opt.CRC32C)
	meta, err := json.Marshal(plainObject{Name: name, Bucket: bucket, ContentType: opt.ContentType, Metadata: opt.Metadata,
		CRC32C: base64.StdEncoding.EncodeToString(crc[:])})
	if err != nil {
		return Attrs{}, fmt.Errorf("%s: %w", where, err)
	}
	var rnd [12]byte
	_, _ = rand.Read(rnd[:])
	boundary := "ferry" + hex.EncodeToString(rnd[:]) // as random as mime/multipart's
	buf := plainBufs.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 2*PlainMax {
			plainBufs.Put(buf)
		}
	}()
	buf.Reset()
	buf.Grow(int(opt.Size) + len(meta) + 256)
	buf.WriteString("--" + boundary + "\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n")
	buf.Write(meta)
	buf.WriteString("\r\n--" + boundary + "\r\nContent-Type: ")
	typeAt := buf.Len()
	start := typeAt
	if opt.ContentType != "" {
		buf.WriteString(opt.ContentType + "\r\n\r\n")
		start = buf.Len()
	}
	if _, err := buf.ReadFrom(io.LimitReader(r, opt.Size+1)); err != nil {
		return Attrs{}, fmt.Errorf("%s: reading the bytes to send: %w", where, err)
	}
	if n := int64(buf.Len() - start); n != opt.Size {
		return Attrs{}, fmt.Errorf("%s: %d bytes to send, want %d: %w", where, n, opt.Size, ErrChecksum)
	}
	if opt.ContentType == "" {
		// As the library does: the type its first 512 bytes show,
		// written in front of them.
		ct := http.DetectContentType(buf.Bytes()[start:]) + "\r\n\r\n"
		buf.WriteString(ct) // room for it, then move the bytes up
		b := buf.Bytes()
		copy(b[typeAt+len(ct):], b[typeAt:typeAt+int(opt.Size)])
		copy(b[typeAt:], ct)
	}
	buf.WriteString("\r\n--" + boundary + "--\r\n")

	// The name goes in the query as well as in the resource, as the
	// client library sends it: what stands between (a proxy, a log)
	// names the object from the URL.
	q := url.Values{"uploadType": {"multipart"}, "name": {name}, "alt": {"json"}, "prettyPrint": {"false"}, "projection": {"full"}}
	switch {
	case opt.IfAbsent:
		q.Set("ifGenerationMatch", "0")
	case opt.IfGeneration != 0:
		q.Set("ifGenerationMatch", strconv.FormatInt(opt.IfGeneration, 10))
	}
	if key := s.kms(opt.KMSKey); key != "" {
		q.Set("kmsKeyName", key)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.uploadBase+"b/"+url.PathEscape(bucket)+"/o?"+q.Encode(), bytes.NewReader(buf.Bytes()))
	if err != nil {
		return Attrs{}, fmt.Errorf("%s: %w", where, err)
	}
	req.Header.Set("Content-Type", "multipart/related; boundary="+boundary)
	req.Header.Set("User-Agent", userAgent)
	if opt.IfAbsent || opt.IfGeneration != 0 {
		// A call under a precondition may be sent again: GCS knows it
		// by its token, the same for every try, as the library's.
		token, attempt := opt.token, max(opt.attempt, 1)
		if token == "" {
			token = uuid.NewString()
		}
		req.Header.Set("X-Goog-Gcs-Idempotency-Token", token)
		req.Header.Set("X-Goog-Api-Client", "gccl-invocation-id/"+token+" gccl-attempt-count/"+strconv.Itoa(attempt)+" "+apiClient)
	} else {
		req.Header.Set("X-Goog-Api-Client", apiClient)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return Attrs{}, s.fail(ctx, where, err)
	}
	defer resp.Body.Close()
	if err := googleapi.CheckResponse(resp); err != nil {
		return Attrs{}, s.fail(ctx, where, err)
	}
	var o plainObject
	if err := json.NewDecoder(resp.Body).Decode(&o); err != nil {
		return Attrs{}, s.fail(ctx, where, fmt.Errorf("reading the answer: %w", err))
	}
	s.report(nil)
	a := Attrs{Name: o.Name, Size: o.Size, Generation: o.Generation, Metadata: o.Metadata, ContentType: o.ContentType,
		KMSKey: o.KMSKeyName, ComponentCount: o.ComponentCount}
	a.Created, _ = time.Parse(time.RFC3339Nano, o.TimeCreated)
	if c, err := base64.StdEncoding.DecodeString(o.CRC32C); err == nil && len(c) == 4 {
		a.CRC32C = binary.BigEndian.Uint32(c)
	}
	if a.Size != opt.Size || a.CRC32C != opt.CRC32C {
		return a, fmt.Errorf("%s: sent %d bytes, stored %d bytes with crc32c %08x, want %d bytes with crc32c %08x: %w",
			where, opt.Size, a.Size, a.CRC32C, opt.Size, opt.CRC32C, ErrChecksum)
	}
	return a, nil
}
