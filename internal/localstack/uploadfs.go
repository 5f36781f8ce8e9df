package localstack

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Uploads on the filesystem backend.
//
// fake-gcs-server reads every upload into memory, copies it into a buffer
// again when it stores it, and hashes it twice (CRC32C and MD5, once to
// check what the client declared, once to store). A resumable upload is
// worse: each chunk is appended to what came before, and the CRC32C and
// MD5 of everything so far are computed again, so that a 1.2 GB upload in
// the Go client's 16 MiB chunks hashes about 45 GB. That cost is the
// fake's, not the client's, and it is what made every large-file row of
// make bench measure the fake. So on the filesystem backend (where the
// fake keeps attributes in an extended attribute) the shim takes uploads
// itself, the way a server that streams does:
//   - the body goes to a file in the bucket's directory as it arrives,
//     hashed once on the way (CRC32C and MD5, as Cloud Storage computes
//     both for an upload);
//   - what the client declared (crc32c, md5Hash) is checked against that,
//     a 400 when it differs, as Cloud Storage answers;
//   - the preconditions are checked, the attributes set on the file, and
//     the file renamed into place: a reader sees the old object or the
//     whole new one;
//   - the answer is the fake's own resource of the new object.
//
// What it does not take (an ACL, a retention, the XML API, the
// "X-Goog-Upload-Command" protocol, a body it cannot read the way the fake
// would) goes to the fake unchanged.

// uploadMetadata is the object resource a multipart upload's first part
// or a resumable upload's start carries.
type uploadMetadata struct {
	Name               string            `json:"name"`
	Bucket             string            `json:"bucket"`
	ContentType        string            `json:"contentType"`
	ContentEncoding    string            `json:"contentEncoding"`
	ContentDisposition string            `json:"contentDisposition"`
	ContentLanguage    string            `json:"contentLanguage"`
	CacheControl       string            `json:"cacheControl"`
	StorageClass       string            `json:"storageClass"`
	CustomTime         string            `json:"customTime"`
	Md5Hash            string            `json:"md5Hash"`
	Crc32c             string            `json:"crc32c"`
	Metadata           map[string]string `json:"metadata"`
	// Any of these sends the upload to the fake.
	ACL           json.RawMessage `json:"acl"`
	PredefinedACL string          `json:"predefinedAcl"`
	Retention     json.RawMessage `json:"retention"`
}

// uploadPrefix names the files of uploads in progress in a bucket's
// directory; listings leave them out (see listNames).
const uploadPrefix = ".ferry-upload-"

// uploadIDPrefix marks the shim's own resumable upload ids.
const uploadIDPrefix = "ferry-"

// fileUpload is an object being written to the filesystem backend.
type fileUpload struct {
	bucket, name string
	attrs        fsAttrs
	// ifMatch and ifNotMatch are the upload's generation preconditions.
	ifMatch, ifNotMatch *int64
	declaredMD5         string
	declaredCRC         string

	mu      sync.Mutex // one request at a time writes a resumable upload
	f       *os.File
	size    int64
	crc     hash.Hash32
	md5     hash.Hash
	started time.Time
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// isUploadPath matches /upload/storage/v1/b/BUCKET/o (with or without a
// trailing slash) and returns the bucket.
func isUploadPath(r *http.Request) (string, bool) {
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/upload"+apiPrefix)
	if !ok {
		return "", false
	}
	b, ok := strings.CutSuffix(strings.TrimSuffix(rest, "/"), "/o")
	if !ok || b == "" || strings.Contains(b, "/") {
		return "", false
	}
	bucket, err := url.PathUnescape(b)
	return bucket, err == nil
}

// upload answers r when it is an upload the shim takes, and reports
// whether it did; when not, r is as it came (its body unread) for the fake.
func (s *shim) upload(w http.ResponseWriter, r *http.Request) bool {
	if !s.fastUploads || !s.xattrs() {
		return false
	}
	bucket, ok := isUploadPath(r)
	if !ok {
		return false
	}
	q := r.URL.Query()
	if id := q.Get("upload_id"); id != "" {
		if !strings.HasPrefix(id, uploadIDPrefix) {
			return false // the fake's own session
		}
		s.resumableChunk(w, r, id)
		return true
	}
	if r.Method != http.MethodPost || q.Get("predefinedAcl") != "" || q.Get("kmsKeyName") != "" ||
		r.Header.Get("X-Goog-Upload-Command") != "" {
		return false
	}
	if dir, ok := bucketDir(s.root, bucket); !ok {
		return false // a bucket name no bucket has: the fake answers
	} else if _, err := os.Stat(dir); err != nil {
		return false // no such bucket: the fake's 404
	}
	switch q.Get("uploadType") {
	case "media":
		md := uploadMetadata{Name: q.Get("name"), ContentType: r.Header.Get("Content-Type"),
			CacheControl: r.Header.Get("Cache-Control"), ContentDisposition: r.Header.Get("Content-Disposition"),
			ContentLanguage: r.Header.Get("Content-Language"), CustomTime: q.Get("customTime")}
		for k := range r.Header {
			if key, ok := strings.CutPrefix(strings.ToLower(k), "x-goog-meta-"); ok {
				if md.Metadata == nil {
					md.Metadata = map[string]string{}
				}
				md.Metadata[key] = r.Header.Get(k)
			}
		}
		u, ok := s.newUpload(w, r, bucket, md)
		if ok {
			s.finish(w, r, u, r.Body)
		}
		return ok
	case "multipart":
		return s.multipartUpload(w, r, bucket)
	case "resumable":
		return s.startResumable(w, r, bucket)
	}
	return false
}

// gsutilBoundary is gsutil's unquoted multipart boundary, which Go's MIME
// parser refuses; the fake quotes it the same way.
var gsutilBoundary = regexp.MustCompile(`boundary=(=+[^;]+)`)

// multipartUpload takes a multipart/related upload: its first part is the
// object's resource, its second the bytes.
func (s *shim) multipartUpload(w http.ResponseWriter, r *http.Request, bucket string) bool {
	ct := gsutilBoundary.ReplaceAllString(r.Header.Get("Content-Type"), `boundary="$1"`)
	_, params, err := mime.ParseMediaType(ct)
	if err != nil || params["boundary"] == "" {
		return false
	}
	// What the reader takes from the body until the resource is read is
	// kept, so that the fake can be given the body whole.
	rec := &recorder{r: r.Body, keep: true}
	mr := multipart.NewReader(rec, params["boundary"])
	giveBack := func() bool {
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(rec.kept.Bytes()), r.Body), r.Body}
		return false
	}
	part, err := mr.NextPart()
	if err != nil {
		return giveBack()
	}
	var md uploadMetadata
	if err := json.NewDecoder(io.LimitReader(part, 1<<20)).Decode(&md); err != nil {
		return giveBack()
	}
	if n := r.URL.Query().Get("name"); n != "" {
		md.Name = n
	}
	if !s.takes(bucket, md) {
		return giveBack()
	}
	media, err := mr.NextPart()
	if err != nil {
		return giveBack()
	}
	if ct := media.Header.Get("Content-Type"); ct != "" {
		md.ContentType = ct
	}
	u, ok := s.newUpload(w, r, bucket, md)
	if !ok {
		return giveBack()
	}
	rec.keep, rec.kept = false, bytes.Buffer{}
	s.finish(w, r, u, media)
	return true
}

// recorder keeps what is read through it while keep is set.
type recorder struct {
	r    io.Reader
	keep bool
	kept bytes.Buffer
}

func (c *recorder) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if c.keep {
		c.kept.Write(p[:n])
	}
	return n, err
}

// takes reports whether the shim writes an object of this resource in
// bucket itself.
func (s *shim) takes(bucket string, md uploadMetadata) bool {
	if len(md.ACL) > 0 && string(md.ACL) != "null" || md.PredefinedACL != "" || len(md.Retention) > 0 && string(md.Retention) != "null" {
		return false
	}
	if md.Bucket != "" && md.Bucket != bucket {
		return false
	}
	_, err := s.objectFile(bucket, md.Name)
	return err == nil
}

// objectFile is where the filesystem backend keeps bucket/name; an error
// for a name it would not keep as a file (empty, ending in "/", leaving the
// bucket's directory, or one of the shim's own).
func (s *shim) objectFile(bucket, name string) (string, error) {
	dir, ok := bucketDir(s.root, bucket)
	if !ok {
		return "", fmt.Errorf("%w: bucket %q", errNotHere, bucket)
	}
	p := filepath.Join(dir, filepath.FromSlash(name))
	if name == "" || strings.HasSuffix(name, "/") || !strings.HasPrefix(p, dir+string(filepath.Separator)) ||
		strings.HasPrefix(filepath.Base(p), uploadPrefix) || strings.HasPrefix(filepath.Base(p), composePrefix) {
		return "", fmt.Errorf("%w: object name %q", errNotHere, name)
	}
	return p, nil
}

// newUpload opens the file an upload of md into bucket is written to. When
// it answers the client itself (a bad request), ok is true and u nil.
func (s *shim) newUpload(w http.ResponseWriter, r *http.Request, bucket string, md uploadMetadata) (u *fileUpload, ok bool) {
	if !s.takes(bucket, md) {
		return nil, false
	}
	q := r.URL.Query()
	u = &fileUpload{bucket: bucket, name: md.Name, declaredMD5: md.Md5Hash, declaredCRC: md.Crc32c,
		crc: crc32.New(castagnoli), md5: md5.New(), started: time.Now()}
	for _, c := range []struct {
		key string
		to  **int64
	}{{"ifGenerationMatch", &u.ifMatch}, {"ifGenerationNotMatch", &u.ifNotMatch}} {
		if v := q.Get(c.key); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("Invalid argument: %s %q", c.key, v))
				return nil, true
			}
			*c.to = &n
		}
	}
	enc := q.Get("contentEncoding")
	if enc == "" {
		enc = md.ContentEncoding
	}
	ct := md.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	u.attrs = fsAttrs{StorageClass: md.StorageClass, ContentType: ct, ContentEncoding: enc,
		ContentDisposition: md.ContentDisposition, ContentLanguage: md.ContentLanguage, CacheControl: md.CacheControl,
		CustomTime: md.CustomTime, Metadata: md.Metadata}
	if u.attrs.StorageClass == "" {
		u.attrs.StorageClass = "STANDARD"
	}
	dir, _ := bucketDir(s.root, bucket) // takes checked it
	f, err := os.CreateTemp(dir, uploadPrefix+"*")
	if err != nil {
		writeError(w, http.StatusInternalServerError, "upload of "+md.Name+": "+err.Error())
		return nil, true
	}
	u.f = f
	return u, true
}

// write appends what r gives to the upload, hashing it on the way.
func (u *fileUpload) write(r io.Reader) (int64, error) {
	n, err := io.Copy(u.f, io.TeeReader(r, io.MultiWriter(u.crc, u.md5)))
	u.size += n
	return n, err
}

// discard removes an upload's file.
func (u *fileUpload) discard() {
	_ = u.f.Close()
	_ = os.Remove(u.f.Name())
}

// finish writes the rest of the upload from body and stores the object;
// u nil means newUpload answered already.
func (s *shim) finish(w http.ResponseWriter, r *http.Request, u *fileUpload, body io.Reader) {
	if u == nil {
		return
	}
	if _, err := u.write(body); err != nil {
		u.discard()
		writeError(w, http.StatusBadRequest, "upload of "+u.name+": reading the body: "+err.Error())
		return
	}
	s.store(w, r, u)
}

// store checks what the client declared and the preconditions, and puts
// the upload's file in place of the object.
func (s *shim) store(w http.ResponseWriter, r *http.Request, u *fileUpload) {
	defer u.discard() // once renamed, the remove finds nothing
	crc := base64.StdEncoding.EncodeToString(u.crc.Sum(nil))
	sum := base64.StdEncoding.EncodeToString(u.md5.Sum(nil))
	if u.declaredMD5 != "" && u.declaredMD5 != sum {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Provided MD5 hash %q doesn't match calculated MD5 hash %q.", u.declaredMD5, sum))
		return
	}
	if u.declaredCRC != "" && u.declaredCRC != crc {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Provided CRC32C %q doesn't match calculated CRC32C %q.", u.declaredCRC, crc))
		return
	}
	path, err := s.objectFile(u.bucket, u.name)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	s.writes.Lock()
	defer s.writes.Unlock()
	live := int64(0)
	var prev fsAttrs
	if old, err := os.Open(path); err == nil {
		prev, err = readFSAttrs(old)
		_ = old.Close()
		if err == nil {
			live = prev.Generation
		}
	}
	if u.ifMatch != nil && *u.ifMatch != live || u.ifNotMatch != nil && *u.ifNotMatch == live {
		writeError(w, http.StatusPreconditionFailed, "At least one of the pre-conditions you specified did not hold.")
		return
	}
	now := time.Now().UTC()
	a := u.attrs
	a.Generation = max(now.UnixNano()/1000, live+1)
	a.Created = now.Format("2006-01-02T15:04:05.999999Z07:00")
	a.Updated = a.Created
	a.Crc32c, a.Md5Hash, a.Etag = crc, sum, sum
	encoded, err := json.Marshal(a)
	if err == nil {
		err = unix.Fsetxattr(int(u.f.Fd()), fsMetadataKey, encoded, 0)
	}
	if err == nil {
		err = u.f.Close()
	}
	if err == nil {
		err = os.MkdirAll(filepath.Dir(path), 0o700)
	}
	if err == nil {
		err = os.Rename(u.f.Name(), path)
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, "storing "+u.name+": "+err.Error())
		return
	}
	s.mu.Lock()
	s.stats.Uploads++
	s.mu.Unlock()
	s.resource(w, r, u.bucket, u.name, a.Generation)
}

// resource answers with the fake's own resource of bucket/name at gen.
func (s *shim) resource(w http.ResponseWriter, r *http.Request, bucket, name string, gen int64) {
	get := r.Clone(r.Context())
	get.Method = http.MethodGet
	get.URL = &url.URL{Path: apiPrefix + bucket + "/o/" + name,
		RawPath:  apiPrefix + url.PathEscape(bucket) + "/o/" + url.PathEscape(name),
		RawQuery: url.Values{"generation": {strconv.FormatInt(gen, 10)}, "projection": {"full"}}.Encode()}
	get.RequestURI = get.URL.RequestURI()
	get.Body, get.ContentLength = http.NoBody, 0
	get.Header = r.Header.Clone()
	get.Header.Del("Content-Range")
	get.Header.Del("Content-Type")
	s.next.ServeHTTP(w, get)
}

// resumableTTL is how long a resumable upload nobody writes to is kept.
const resumableTTL = time.Hour

// startResumable starts a resumable upload: its body is the object's
// resource (or nothing, the name then in the query).
func (s *shim) startResumable(w http.ResponseWriter, r *http.Request, bucket string) bool {
	raw, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		writeError(w, http.StatusBadRequest, "resumable upload: reading the request body: "+err.Error())
		return true
	}
	giveBack := func() bool {
		r.Body = io.NopCloser(bytes.NewReader(raw))
		return false
	}
	var md uploadMetadata
	if len(bytes.TrimSpace(raw)) > 0 && json.Unmarshal(raw, &md) != nil {
		return giveBack()
	}
	if n := r.URL.Query().Get("name"); n != "" {
		md.Name = n
	}
	if ct := r.Header.Get("X-Upload-Content-Type"); ct != "" && md.ContentType == "" {
		md.ContentType = ct
	}
	u, ok := s.newUpload(w, r, bucket, md)
	if !ok {
		return giveBack()
	}
	if u == nil {
		return true
	}
	id := fmt.Sprintf("%s%d-%s", uploadIDPrefix, time.Now().UnixNano(), strings.TrimPrefix(filepath.Base(u.f.Name()), uploadPrefix))
	s.mu.Lock()
	for old, o := range s.uploads {
		if time.Since(o.started) > resumableTTL {
			delete(s.uploads, old) // a client that went away
			o.discard()
		}
	}
	s.uploads[id] = u
	s.mu.Unlock()
	loc := baseURL(r) + "/upload/storage/v1/b/" + url.PathEscape(bucket) + "/o?" +
		url.Values{"uploadType": {"resumable"}, "name": {md.Name}, "upload_id": {id}}.Encode()
	w.Header().Set("Location", loc)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(map[string]string{"kind": "storage#object", "bucket": bucket, "name": md.Name})
	return true
}

// baseURL is the scheme and host r was sent to.
func baseURL(r *http.Request) string {
	scheme := "http"
	switch {
	case r.Header.Get("X-Forwarded-Proto") != "":
		scheme = r.Header.Get("X-Forwarded-Proto")
	case r.TLS != nil:
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// resumableChunk takes one request of a resumable upload: bytes at an
// offset (Content-Range "bytes A-B/TOTAL", TOTAL "*" while unknown), a
// question about what arrived ("bytes */TOTAL" with no body), or a cancel
// (DELETE). Bytes the server has already are skipped, as Cloud Storage
// does when a client sends a chunk again.
func (s *shim) resumableChunk(w http.ResponseWriter, r *http.Request, id string) {
	s.mu.Lock()
	u := s.uploads[id]
	s.mu.Unlock()
	if u == nil {
		writeError(w, http.StatusNotFound, "No such upload: "+id)
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.started = time.Now()
	end := func() {
		s.mu.Lock()
		delete(s.uploads, id)
		s.mu.Unlock()
	}
	if r.Method == http.MethodDelete {
		end()
		u.discard()
		w.WriteHeader(499)
		return
	}
	if r.Method != http.MethodPut && r.Method != http.MethodPost {
		writeError(w, http.StatusBadRequest, "resumable upload: method "+r.Method)
		return
	}
	start, total, err := contentRange(r.Header.Get("Content-Range"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if start < 0 {
		start = u.size
	}
	whole := total == -2 // no Content-Range: the body is the object
	if start > u.size {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("resumable upload of %s: a chunk at byte %d, but %d bytes arrived", u.name, start, u.size))
		return
	}
	if _, err := io.CopyN(io.Discard, r.Body, u.size-start); err != nil && !errors.Is(err, io.EOF) {
		writeError(w, http.StatusBadRequest, "resumable upload of "+u.name+": "+err.Error())
		return
	}
	if _, err := u.write(r.Body); err != nil {
		writeError(w, http.StatusServiceUnavailable, "resumable upload of "+u.name+": reading the body: "+err.Error())
		return
	}
	if whole {
		total = u.size
	}
	if total >= 0 && u.size > total {
		end()
		u.discard()
		writeError(w, http.StatusBadRequest, fmt.Sprintf("resumable upload of %s: %d bytes arrived, more than the %d declared", u.name, u.size, total))
		return
	}
	if total < 0 || u.size < total {
		if u.size > 0 {
			w.Header().Set("Range", fmt.Sprintf("bytes=0-%d", u.size-1))
		}
		if _, no308 := r.Header["X-Guploader-No-308"]; no308 {
			w.Header().Set("X-Http-Status-Code-Override", "308") // the Go client
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusPermanentRedirect)
		return
	}
	end()
	s.store(w, r, u)
}

// contentRange reads a resumable upload's Content-Range: the offset of
// the bytes sent (-1 for "*" or no header) and the total (-1 while
// unknown). No header means the body is the whole object.
func contentRange(h string) (start, total int64, err error) {
	if h == "" {
		return -1, -2, nil // -2: the total is what arrives
	}
	rest, ok := strings.CutPrefix(h, "bytes ")
	rng, tot, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 {
		return 0, 0, fmt.Errorf("Content-Range %q: want bytes A-B/TOTAL", h)
	}
	total = -1
	if tot != "*" {
		if total, err = strconv.ParseInt(tot, 10, 64); err != nil || total < 0 {
			return 0, 0, fmt.Errorf("Content-Range %q: total %q", h, tot)
		}
	}
	if rng == "*" {
		return -1, total, nil
	}
	a, _, ok := strings.Cut(rng, "-")
	if start, err = strconv.ParseInt(a, 10, 64); !ok || err != nil || start < 0 {
		return 0, 0, fmt.Errorf("Content-Range %q: range %q", h, rng)
	}
	return start, total, nil
}
