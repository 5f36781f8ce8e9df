package localstack

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"
	"golang.org/x/sys/unix"

	"github.com/ferry-dev/ferry/internal/crc32c"
)

// StatsPath is where the shim in front of fake-gcs-server answers with its
// Stats as JSON (GET), on the same port as the storage API.
const StatsPath = "/_ferry/stats"

// DenyPath takes a permission away from every caller on a bucket (POST
// ?bucket=B&permission=P) or gives it back (DELETE): the shim's
// testIamPermissions answers as GCS would for a caller without it, so that
// a test can produce a missing grant on purpose.
const DenyPath = "/_ferry/deny"

// Stats are what the shim has counted since the server started.
type Stats struct {
	// Requests is every request the server received.
	Requests int64 `json:"requests"`
	// ComposeCalls, ComposeMS and ComposeBytes add up every compose the
	// server answered: calls, milliseconds spent in them (summed over
	// calls, so concurrent calls count twice), and bytes written.
	ComposeCalls int64 `json:"compose_calls"`
	ComposeMS    int64 `json:"compose_ms"`
	ComposeBytes int64 `json:"compose_bytes"`
	// FastCompose is true when the shim composes (FastCompose), false
	// when fake-gcs-server does.
	FastCompose bool `json:"fast_compose"`
	// BodyBytes are the request bodies' bytes the server read: the bytes
	// clients uploaded, give or take a little JSON.
	BodyBytes int64 `json:"body_bytes"`
	// Uploads are the uploads the shim stored itself, streaming them to
	// the filesystem backend (see upload); the fake stored the others.
	Uploads int64 `json:"uploads"`
}

// shim is an http.Handler in front of fake-gcs-server that
//   - answers a successful object DELETE with 204 No Content, as GCS does
//     (the fake answers 200 with a body, which gsutil treats as an error);
//   - optionally composes objects itself (see composeFast);
//   - counts requests and the time spent in compose, served on StatsPath.
type shim struct {
	fake *fakestorage.Server
	next http.Handler
	fast bool
	// fastUploads: the shim takes uploads on the filesystem backend (see
	// upload).
	fastUploads bool
	// root is the filesystem backend's directory, "" for the memory
	// backend (see listNames).
	root string

	mu    sync.Mutex
	stats Stats
	// lists are the listings being paged (see list), by token.
	lists   map[string]*pagedList
	listSeq int64
	// denied are the permissions taken away per bucket (DenyPath).
	denied map[string]map[string]bool
	// writes orders the conditional writes the shim checks itself
	// (compose, delete, its own uploads): a precondition and the write it
	// guards happen with no other such write between them.
	writes sync.Mutex
	// uploads are the resumable uploads the shim takes (see upload), by id.
	uploads map[string]*fileUpload
	// xattrOnce finds whether root keeps attributes in extended
	// attributes, as the fake then does (xattrOK).
	xattrOnce sync.Once
	xattrOK   bool
}

// xattrs reports whether the fake keeps objects under root with their
// attributes in fsMetadataKey, as it does when root supports extended
// attributes: then the shim composes and takes uploads itself.
func (s *shim) xattrs() bool {
	if s.root == "" {
		return false
	}
	s.xattrOnce.Do(func() {
		_, err := unix.Getxattr(s.root, fsMetadataKey, nil)
		s.xattrOK = err == nil || errors.Is(err, unix.ENODATA)
	})
	return s.xattrOK
}

func newShim(fake *fakestorage.Server, fast, fastUploads bool, root string) *shim {
	return &shim{fake: fake, next: fake.HTTPHandler(), fast: fast, fastUploads: fastUploads, root: root, stats: Stats{FastCompose: fast}, lists: map[string]*pagedList{},
		denied: map[string]map[string]bool{}, uploads: map[string]*fileUpload{}}
}

// countingBody counts what is read of a request's body.
type countingBody struct {
	io.ReadCloser
	n int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	k, err := c.ReadCloser.Read(p)
	c.n += int64(k)
	return k, err
}

// Stats returns a snapshot of the counters.
func (s *shim) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

func (s *shim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == StatsPath && r.Method == http.MethodGet {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.Stats())
		return
	}
	if r.URL.Path == DenyPath {
		s.deny(w, r)
		return
	}
	s.mu.Lock()
	s.stats.Requests++
	s.mu.Unlock()
	if r.Body != nil {
		cr := &countingBody{ReadCloser: r.Body}
		r.Body = cr
		defer func() {
			s.mu.Lock()
			s.stats.BodyBytes += cr.n
			s.mu.Unlock()
		}()
	}
	if b, ok := pathBucket(r); ok && (b == "." || b == "..") {
		// No bucket has such a name, and the filesystem backend would
		// take it as the storage root's parent.
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Invalid bucket name: %q", b))
		return
	}
	if s.upload(w, r) {
		return
	}
	if bucket, ok := testPermissionsPath(r); ok {
		s.testPermissions(w, r, bucket)
		return
	}
	if bucket, dest, ok := composePath(r); ok {
		s.writes.Lock()
		defer s.writes.Unlock()
		t0 := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		n := s.compose(rec, r, bucket, dest)
		s.mu.Lock()
		s.stats.ComposeCalls++
		s.stats.ComposeMS += time.Since(t0).Milliseconds()
		if rec.status == 0 || rec.status == http.StatusOK {
			s.stats.ComposeBytes += n
		}
		s.mu.Unlock()
		return
	}
	if isListPath(r) {
		s.list(w, r)
		return
	}
	if r.Method == http.MethodPatch && isObjectPath(r) {
		s.writes.Lock()
		defer s.writes.Unlock()
		if s.refusedByGeneration(w, r) {
			return
		}
		s.next.ServeHTTP(w, r)
		return
	}
	if r.Method == http.MethodDelete && isObjectPath(r) {
		s.writes.Lock()
		defer s.writes.Unlock()
		if s.refusedByGeneration(w, r) {
			return
		}
		rec := httptest.NewRecorder()
		s.next.ServeHTTP(rec, r)
		if rec.Code == http.StatusOK {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		copyResponse(w, rec)
		return
	}
	s.next.ServeHTTP(w, r)
}

// listPage is how many objects a listing response holds when the client
// asks for no page size, as on GCS; also the most it holds.
const listPage = 1000

// listTokenPrefix marks the shim's own page tokens.
const listTokenPrefix = "ferry-shim-"

// pagedList is a listing the shim is paging: the objects not yet served,
// as the fake's resources (items) or, on the filesystem backend, as names
// whose resources are read a page at a time (names, of bucket).
type pagedList struct {
	items   []json.RawMessage
	names   []string
	bucket  string
	created time.Time
}

// listResponse is the part of a listing response the shim pages.
type listResponse struct {
	Kind          string            `json:"kind"`
	Items         []json.RawMessage `json:"items"`
	Prefixes      []string          `json:"prefixes,omitempty"`
	NextPageToken string            `json:"nextPageToken,omitempty"`
}

// list answers a listing in pages of at most listPage objects, as GCS
// does. fake-gcs-server answers a listing that names no page size with
// every object at once (a million objects in one response, which the
// client then decodes whole), and a paged one by loading every object of
// the bucket again for each page. So the shim lists once and serves the
// pages itself under tokens of its own:
//   - on the memory backend, from one answer of the fake without a page
//     size, kept in memory;
//   - on the filesystem backend, from the names alone (listNames), reading
//     each object's resource from the fake as its page is served. There the
//     fake's own listing reads and decodes the metadata of every object of
//     the bucket under the lock all writes wait on, and then encodes them
//     all: minutes and gigabytes at a million objects, where GCS answers
//     the first 1,000 at once.
//
// A listing with a delimiter, versions, a glob or a token of the fake's own
// goes to the fake unchanged.
func (s *shim) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	size := listPage
	if v := q.Get("maxResults"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			s.next.ServeHTTP(w, r)
			return
		}
		size = min(n, listPage)
	}
	if tok := q.Get("pageToken"); strings.HasPrefix(tok, listTokenPrefix) {
		s.mu.Lock()
		l := s.lists[tok]
		delete(s.lists, tok)
		s.mu.Unlock()
		if l == nil {
			http.Error(w, `{"error":{"code":400,"message":"page token unknown or already used"}}`, http.StatusBadRequest)
			return
		}
		s.servePage(w, r, l, size)
		return
	}
	if q.Get("pageToken") != "" || q.Get("delimiter") != "" || q.Get("versions") == "true" || q.Get("matchGlob") != "" {
		s.next.ServeHTTP(w, r)
		return
	}
	if s.root != "" {
		bucket, err := url.PathUnescape(strings.TrimSuffix(strings.TrimPrefix(r.URL.EscapedPath(), apiPrefix), "/o"))
		if err == nil {
			names, ok, err := listNames(r.Context(), s.root, bucket, q.Get("prefix"), q.Get("startOffset"), q.Get("endOffset"))
			if err != nil {
				http.Error(w, fmt.Sprintf(`{"error":{"code":500,"message":%q}}`, "listing gs://"+bucket+": "+err.Error()), http.StatusInternalServerError)
				return
			}
			if ok {
				s.servePage(w, r, &pagedList{names: names, bucket: bucket, created: time.Now()}, size)
				return
			}
		}
	}
	q.Del("maxResults")
	whole := r.Clone(r.Context())
	whole.URL.RawQuery = q.Encode()
	rec := httptest.NewRecorder()
	s.next.ServeHTTP(rec, whole)
	var resp listResponse
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &resp) != nil || resp.NextPageToken != "" || len(resp.Prefixes) > 0 {
		copyResponse(w, rec)
		return
	}
	s.servePage(w, r, &pagedList{items: resp.Items, created: time.Now()}, size)
}

// servePage writes the next page of l, keeping the rest under a new token.
func (s *shim) servePage(w http.ResponseWriter, r *http.Request, l *pagedList, size int) {
	resp := listResponse{Kind: "storage#objects", Items: l.items}
	rest := &pagedList{bucket: l.bucket, created: l.created}
	if l.names != nil {
		var failed *httptest.ResponseRecorder
		resp.Items, rest.names, failed = s.resources(r, l.bucket, l.names, size)
		if failed != nil {
			copyResponse(w, failed)
			return
		}
	} else if len(l.items) > size {
		resp.Items, rest.items = l.items[:size], l.items[size:]
	}
	if len(rest.items) > 0 || len(rest.names) > 0 {
		s.mu.Lock()
		s.listSeq++
		resp.NextPageToken = fmt.Sprintf("%s%d", listTokenPrefix, s.listSeq)
		for tok, old := range s.lists {
			if time.Since(old.created) > listTTL {
				delete(s.lists, tok) // a client that stopped paging
			}
		}
		s.lists[resp.NextPageToken] = rest
		s.mu.Unlock()
	}
	if resp.Items == nil {
		resp.Items = []json.RawMessage{}
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(resp)
}

// resources reads the fake's resource of each object named, in order,
// until it has size of them, and returns them with the names it did not
// reach. An object deleted since the names were listed (the fake answers
// 404) is left out, as a listing made after the delete would; any other
// answer of the fake is returned as failed, to be the listing's answer.
func (s *shim) resources(r *http.Request, bucket string, names []string, size int) (items []json.RawMessage, rest []string, failed *httptest.ResponseRecorder) {
	for len(names) > 0 && len(items) < size {
		name := names[0]
		names = names[1:]
		get := r.Clone(r.Context())
		get.URL = &url.URL{Path: apiPrefix + bucket + "/o/" + name,
			RawPath: apiPrefix + url.PathEscape(bucket) + "/o/" + url.PathEscape(name), RawQuery: "projection=full"}
		get.RequestURI = get.URL.RequestURI()
		rec := httptest.NewRecorder()
		s.next.ServeHTTP(rec, get)
		switch rec.Code {
		case http.StatusOK:
			items = append(items, s.relink(r, bytes.TrimSpace(rec.Body.Bytes())))
		case http.StatusNotFound:
		default:
			return nil, nil, rec
		}
	}
	return items, names, nil
}

// relink gives an object's resource, as the fake answers a GET of it, the
// links its listings give: the fake's GET builds selfLink and mediaLink on
// its external URL, its listing on the URL the listing was asked at
// (which differs on the TLS port).
func (s *shim) relink(r *http.Request, item []byte) json.RawMessage {
	scheme := "http"
	if r.Header.Get("X-Forwarded-Proto") != "" {
		scheme = r.Header.Get("X-Forwarded-Proto")
	} else if r.TLS != nil {
		scheme = "https"
	} else if r.URL.Scheme != "" {
		scheme = r.URL.Scheme
	}
	base := scheme + "://" + r.Host
	if ext := s.fake.URL(); ext != base {
		for _, link := range []string{`"selfLink":"`, `"mediaLink":"`} {
			item = bytes.Replace(item, []byte(link+ext+"/"), []byte(link+base+"/"), 1)
		}
	}
	return item
}

// listNames returns the names of bucket's objects that start with prefix,
// from startOffset (inclusive) to endOffset (exclusive) when given, in
// name order, from the directory tree of fake-gcs-server's filesystem
// backend (under root, the bucket's directory holds each object at its
// name): one read of the directories that can hold the prefix, and not one
// object's metadata. ok is false when the bucket has no directory, or when
// the bucket or the prefix would lead the walk out of it ("..": no GCS
// name does, and the walk must not read other buckets or the machine); the
// fake then answers. A name listed here whose object is not whole yet (a
// temporary file of the backend's, or an object whose metadata is still
// being written) has no resource, and resources leaves it out.
//
// The walk stops when ctx ends (a client that went away).
func listNames(ctx context.Context, root, bucket, prefix, startOffset, endOffset string) (names []string, ok bool, err error) {
	dir, ok := bucketDir(root, bucket)
	if !ok {
		return nil, false, nil
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, false, nil
	}
	from := dir
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		from = filepath.Join(dir, filepath.FromSlash(prefix[:i]))
		if rel, err := filepath.Rel(dir, from); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			return nil, false, nil
		}
	}
	err = filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // no such prefix, or removed while walking
			}
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		name := filepath.ToSlash(rel)
		if d.IsDir() {
			if p != from && !strings.HasPrefix(name+"/", prefix) && !strings.HasPrefix(prefix, name+"/") {
				return fs.SkipDir // holds no name under prefix
			}
			return nil
		}
		if base := d.Name(); strings.HasPrefix(base, uploadPrefix) || strings.HasPrefix(base, composePrefix) {
			return nil // the shim's own, not whole yet
		}
		if d.Type().IsRegular() && strings.HasPrefix(name, prefix) &&
			(startOffset == "" || name >= startOffset) && (endOffset == "" || name < endOffset) {
			names = append(names, name)
		}
		return nil
	})
	if err != nil {
		return nil, true, err
	}
	slices.Sort(names)
	if names == nil {
		names = []string{}
	}
	return names, true, nil
}

// pathBucket is the bucket a JSON API request names in its path
// (/storage/v1/b/BUCKET/... or /upload/storage/v1/b/BUCKET/...), unescaped.
func pathBucket(r *http.Request) (string, bool) {
	p := strings.TrimPrefix(r.URL.EscapedPath(), "/upload")
	rest, ok := strings.CutPrefix(p, apiPrefix)
	if !ok {
		return "", false
	}
	b, _, _ := strings.Cut(rest, "/")
	bucket, err := url.PathUnescape(b)
	return bucket, err == nil
}

// bucketDir is where the filesystem backend under root keeps bucket's
// objects; ok is false for a name that would lead out of root ("..", ".",
// or empty: no bucket has one), which the shim then leaves to the fake.
func bucketDir(root, bucket string) (string, bool) {
	dir := filepath.Join(root, url.PathEscape(bucket))
	return dir, bucket != "" && bucket != "." && bucket != ".." && filepath.Dir(dir) == filepath.Clean(root)
}

// listTTL is how long a listing's remaining pages are kept.
const listTTL = 10 * time.Minute

// isListPath matches GET /storage/v1/b/BUCKET/o: a listing of objects.
func isListPath(r *http.Request) bool {
	if r.Method != http.MethodGet {
		return false
	}
	p := r.URL.EscapedPath()
	b, ok := strings.CutPrefix(p, apiPrefix)
	if !ok {
		return false
	}
	b, ok = strings.CutSuffix(b, "/o")
	return ok && b != "" && !strings.Contains(b, "/")
}

// statusRecorder remembers the status written through it.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func copyResponse(w http.ResponseWriter, rec *httptest.ResponseRecorder) {
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

const apiPrefix = "/storage/v1/b/"

// composePath matches POST /storage/v1/b/BUCKET/o/OBJECT/compose and
// returns the bucket and the unescaped destination name.
func composePath(r *http.Request) (bucket, dest string, ok bool) {
	if r.Method != http.MethodPost {
		return "", "", false
	}
	p := r.URL.EscapedPath()
	if !strings.HasPrefix(p, apiPrefix) || !strings.HasSuffix(p, "/compose") {
		return "", "", false
	}
	b, o, found := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(p, apiPrefix), "/compose"), "/o/")
	if !found || b == "" || o == "" || strings.Contains(b, "/") {
		return "", "", false
	}
	bu, err1 := url.PathUnescape(b)
	de, err2 := url.PathUnescape(o)
	if err1 != nil || err2 != nil {
		return "", "", false
	}
	return bu, de, true
}

// isObjectPath matches /storage/v1/b/BUCKET/o/OBJECT (not its ACLs).
func isObjectPath(r *http.Request) bool {
	p := r.URL.EscapedPath()
	if !strings.HasPrefix(p, apiPrefix) {
		return false
	}
	_, o, found := strings.Cut(strings.TrimPrefix(p, apiPrefix), "/o/")
	return found && o != "" && !strings.Contains(o, "/acl")
}

// composeRequest is the part of a compose request fake-gcs-server reads.
type composeRequest struct {
	SourceObjects []struct {
		Name                string `json:"name"`
		ObjectPreconditions struct {
			IfGenerationMatch json.RawMessage `json:"ifGenerationMatch"` // an int64, as a string
		} `json:"objectPreconditions"`
	} `json:"sourceObjects"`
	// DeleteSourceObjects: GCS deletes the sources once the compose
	// succeeded; fake-gcs-server ignores it, so the shim does it.
	DeleteSourceObjects bool `json:"deleteSourceObjects"`
	// Destination is the new object's resource, as an upload's is.
	Destination uploadMetadata `json:"destination"`
}

// maxComposeSources is GCS's (and the fake's) limit of sources per call.
const maxComposeSources = 32

// compose answers one compose request and returns the bytes written.
//
// fake-gcs-server's own compose reads every source into a slice that grows
// by append (copying what it holds at every growth), copies the result again
// when it stores it, and hashes it all (CRC32C and MD5) while holding the
// lock every request of the server waits on. On the filesystem backend,
// composeFile composes as Cloud Storage does, without reading the sources'
// bytes (see there); on the memory backend, composeFast does what the fake
// does with one copy. Whatever the fast path does not handle exactly
// as the fake would (a body it cannot decode, too many sources, a missing
// source, a request with ACL options), it hands to the fake unchanged, so
// errors are the fake's own.
func (s *shim) compose(w http.ResponseWriter, r *http.Request, bucket, dest string) int64 {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "compose: reading the request body: "+err.Error(), http.StatusBadRequest)
		return 0
	}
	var asked composeRequest
	if json.Unmarshal(body, &asked) == nil {
		if code, msg := s.composable(bucket, dest, r.URL.Query(), asked); code != 0 {
			writeError(w, code, msg)
			return 0
		}
	}
	if asked.DeleteSourceObjects {
		rec := &statusRecorder{ResponseWriter: w}
		w = rec
		defer func() {
			if rec.status == 0 || rec.status == http.StatusOK {
				for _, src := range asked.SourceObjects {
					if src.Name != dest {
						del := httptest.NewRequest(http.MethodDelete, "/storage/v1/b/"+url.PathEscape(bucket)+"/o/"+url.PathEscape(src.Name), nil)
						s.next.ServeHTTP(httptest.NewRecorder(), del)
					}
				}
			}
		}()
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if !s.fast || r.URL.Query().Get("destinationPredefinedAcl") != "" {
		s.next.ServeHTTP(w, r)
		return 0
	}
	var req composeRequest
	if err := json.Unmarshal(body, &req); err != nil || len(req.SourceObjects) > maxComposeSources {
		s.next.ServeHTTP(w, r)
		return 0
	}
	var gen, n int64
	ok := false
	if s.xattrs() {
		var err error
		gen, n, err = s.composeFile(bucket, dest, req)
		if err != nil && !errors.Is(err, errNotHere) {
			writeError(w, http.StatusInternalServerError, err.Error())
			return 0
		}
		ok = err == nil
	}
	if !ok {
		gen, n, ok = s.composeFast(bucket, dest, req)
	}
	if !ok {
		r.Body = io.NopCloser(bytes.NewReader(body))
		s.next.ServeHTTP(w, r)
		return 0
	}
	// The response is the fake's own resource JSON for the new generation.
	q := url.Values{"generation": {strconv.FormatInt(gen, 10)}, "projection": {"full"}}
	get := r.Clone(r.Context())
	get.Method = http.MethodGet
	get.URL.RawQuery = q.Encode()
	get.URL.Path = strings.TrimSuffix(r.URL.Path, "/compose")
	get.URL.RawPath = strings.TrimSuffix(r.URL.RawPath, "/compose")
	get.Body, get.ContentLength = http.NoBody, 0
	s.next.ServeHTTP(w, get)
	return n
}

// composeFast stores the concatenation of the sources under dest, as
// fake-gcs-server's compose does (same attributes, a new generation, the
// fake's rules for an existing destination), and returns its generation
// and size. ok is false when a source is missing or the store refused:
// the caller then lets the fake answer.
//
// The bytes are copied once, into a buffer of the final size. The CRC32C is
// not recomputed: it is combined from the sources' CRC32Cs and lengths
// (crc32c.Combine), which the fake computed from their bytes when it stored
// them (it ignores a client's claimed CRC32C on every write path). The MD5
// cannot be combined; GCS gives composite objects none, but the fake gives
// every object one and gsutil checks downloads against it, so it is
// computed here, over the buffer, outside the server's lock.
func (s *shim) composeFast(bucket, dest string, req composeRequest) (gen, size int64, ok bool) {
	be := s.fake.Backend()
	type source struct {
		content io.ReadSeekCloser
		size    int64
		crc     uint32
	}
	srcs := make([]source, 0, len(req.SourceObjects))
	defer func() {
		for _, src := range srcs {
			_ = src.content.Close()
		}
	}()
	var total int64
	for _, so := range req.SourceObjects {
		o, err := be.GetObject(bucket, so.Name)
		if err != nil {
			return 0, 0, false
		}
		crc, err := decodeCRC32C(o.Crc32c)
		if err != nil {
			_ = o.Content.Close()
			return 0, 0, false
		}
		srcs = append(srcs, source{content: o.Content, size: o.Size, crc: crc})
		total += o.Size
	}
	buf := make([]byte, total)
	var crc uint32
	off := int64(0)
	for _, src := range srcs {
		if _, err := io.ReadFull(src.content, buf[off:off+src.size]); err != nil {
			return 0, 0, false
		}
		crc = crc32c.Combine(crc, src.crc, src.size)
		off += src.size
	}
	sum := md5.Sum(buf)

	// The new object starts from the destination's attributes when it
	// exists (the fake keeps them, taking only metadata from the request),
	// else from the request's; then it gets the new content and a new
	// generation.
	o, err := be.GetObject(bucket, dest)
	if err != nil {
		if len(srcs) == 0 {
			return 0, 0, false
		}
		// A value of the backend's object type, to fill in: the first
		// source's, with every attribute replaced.
		if o, err = be.GetObject(bucket, req.SourceObjects[0].Name); err != nil {
			return 0, 0, false
		}
		now := time.Now().UTC().Format("2006-01-02T15:04:05.999999Z07:00")
		o.Name = dest
		o.ContentType = req.Destination.ContentType
		o.ContentEncoding = req.Destination.ContentEncoding
		o.ContentDisposition = req.Destination.ContentDisposition
		o.ContentLanguage = req.Destination.ContentLanguage
		o.CacheControl = req.Destination.CacheControl
		o.StorageClass = req.Destination.StorageClass
		o.ACL = nil
		o.Created, o.Updated = now, now
		o.Deleted, o.CustomTime = "", ""
		o.RetentionMode, o.RetentionRetainUntil = "", ""
	}
	_ = o.Content.Close()
	o.BucketName = bucket
	o.Content = nopCloser{bytes.NewReader(buf)}
	o.Size = total
	o.Crc32c = encodeCRC32C(crc)
	o.Md5Hash = base64.StdEncoding.EncodeToString(sum[:])
	o.Etag = o.Md5Hash
	o.Metadata = req.Destination.Metadata
	o.Generation = 0
	created, err := be.CreateObject(o, noConditions{})
	if err != nil {
		return 0, 0, false
	}
	_ = created.Content.Close()
	return created.Generation, total, true
}

// noConditions lets every write through, as the fake's compose does.
type noConditions struct{}

func (noConditions) ConditionsMet(int64) bool { return true }

type nopCloser struct{ io.ReadSeeker }

func (nopCloser) Close() error { return nil }

func decodeCRC32C(s string) (uint32, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != 4 {
		return 0, fmt.Errorf("crc32c %q: want 4 bytes in base64", s)
	}
	return binary.BigEndian.Uint32(b), nil
}

func encodeCRC32C(c uint32) string {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], c)
	return base64.StdEncoding.EncodeToString(b[:])
}

// testPermissionsPath reports whether r is a bucket's testIamPermissions
// (GET /storage/v1/b/BUCKET/iam/testPermissions), which fake-gcs-server
// does not answer.
func testPermissionsPath(r *http.Request) (string, bool) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/storage/v1/b/")
	if !ok || r.Method != http.MethodGet {
		return "", false
	}
	bucket, ok := strings.CutSuffix(rest, "/iam/testPermissions")
	return bucket, ok && bucket != "" && !strings.Contains(bucket, "/")
}

// testPermissions answers as GCS does for a caller who holds every
// permission on an existing bucket but those DenyPath took away.
func (s *shim) testPermissions(w http.ResponseWriter, r *http.Request, bucket string) {
	rec := httptest.NewRecorder()
	s.next.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/storage/v1/b/"+bucket, nil).WithContext(r.Context()))
	if rec.Code != http.StatusOK {
		copyResponse(w, rec)
		return
	}
	granted := []string{}
	s.mu.Lock()
	for _, p := range r.URL.Query()["permissions"] {
		if !s.denied[bucket][p] {
			granted = append(granted, p)
		}
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"kind": "storage#testIamPermissionsResponse", "permissions": granted})
}

// deny takes a permission away on a bucket (POST) or gives it back (DELETE).
func (s *shim) deny(w http.ResponseWriter, r *http.Request) {
	bucket, perm := r.URL.Query().Get("bucket"), r.URL.Query().Get("permission")
	if bucket == "" || perm == "" {
		http.Error(w, "want ?bucket=B&permission=P", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch r.Method {
	case http.MethodPost:
		if s.denied[bucket] == nil {
			s.denied[bucket] = map[string]bool{}
		}
		s.denied[bucket][perm] = true
	case http.MethodDelete:
		delete(s.denied[bucket], perm)
	default:
		http.Error(w, "POST or DELETE", http.StatusMethodNotAllowed)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// objectPath returns the bucket and the unescaped object name of
// /storage/v1/b/BUCKET/o/OBJECT.
func objectPath(r *http.Request) (bucket, name string, ok bool) {
	b, o, found := strings.Cut(strings.TrimPrefix(r.URL.EscapedPath(), apiPrefix), "/o/")
	if !found || b == "" || o == "" || strings.Contains(b, "/") {
		return "", "", false
	}
	bu, err1 := url.PathUnescape(b)
	na, err2 := url.PathUnescape(o)
	return bu, na, err1 == nil && err2 == nil
}

// liveGeneration is the generation of bucket/name that reads see, 0 when
// there is none.
func (s *shim) liveGeneration(bucket, name string) int64 {
	o, err := s.fake.Backend().GetObject(bucket, name)
	if err != nil {
		return 0
	}
	_ = o.Content.Close()
	return o.Generation
}

// refusedByGeneration answers a PATCH or DELETE of an object that exists
// whose generation preconditions fail, as GCS does, and reports whether it
// did; a missing object is left to the fake's 404. s.writes is held.
func (s *shim) refusedByGeneration(w http.ResponseWriter, r *http.Request) bool {
	bucket, name, ok := objectPath(r)
	if !ok || s.liveGeneration(bucket, name) == 0 {
		return false
	}
	if code, msg := s.generationMatch(bucket, name, r.URL.Query()); code != 0 {
		writeError(w, code, msg)
		return true
	}
	return false
}

// generationMatch checks a write's ifGenerationMatch (0: the object must
// not exist) against the live generation, as GCS does and fake-gcs-server
// does not for deletes and composes: code 412 and GCS's message when it
// does not hold, 0 when it holds or none was asked.
func (s *shim) generationMatch(bucket, name string, q url.Values) (code int, msg string) {
	v := q.Get("ifGenerationMatch")
	if v == "" {
		return 0, ""
	}
	want, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return http.StatusBadRequest, fmt.Sprintf("Invalid argument: ifGenerationMatch %q", v)
	}
	if s.liveGeneration(bucket, name) != want {
		return http.StatusPreconditionFailed, "At least one of the pre-conditions you specified did not hold."
	}
	return 0, ""
}

// composable checks what GCS checks before a compose and fake-gcs-server
// does not: every source exists (404 otherwise, where the fake answers
// 500), each source's objectPreconditions.ifGenerationMatch and the
// destination's ifGenerationMatch hold (412 otherwise, where the fake
// replaces the destination).
func (s *shim) composable(bucket, dest string, q url.Values, req composeRequest) (code int, msg string) {
	for _, src := range req.SourceObjects {
		gen := s.liveGeneration(bucket, src.Name)
		if gen == 0 {
			return http.StatusNotFound, fmt.Sprintf("Object %s (source object of the compose) not found.", src.Name)
		}
		if m := src.ObjectPreconditions.IfGenerationMatch; len(m) > 0 {
			want, err := strconv.ParseInt(strings.Trim(string(m), `"`), 10, 64)
			if err != nil {
				return http.StatusBadRequest, fmt.Sprintf("Invalid argument: ifGenerationMatch %s of source %s", m, src.Name)
			}
			if want != gen {
				return http.StatusPreconditionFailed, "At least one of the pre-conditions you specified did not hold."
			}
		}
	}
	return s.generationMatch(bucket, dest, q)
}

// writeError answers as the JSON API does: {"error": {code, message, errors}}.
func writeError(w http.ResponseWriter, code int, msg string) {
	reason := map[int]string{http.StatusNotFound: "notFound", http.StatusPreconditionFailed: "conditionNotMet", http.StatusBadRequest: "invalid",
		http.StatusInternalServerError: "backendError"}[code]
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "message": msg,
		"errors": []map[string]string{{"message": msg, "domain": "global", "reason": reason}}}})
}
