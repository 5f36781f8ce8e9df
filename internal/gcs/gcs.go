// Package gcs is ferry's thin layer over cloud.google.com/go/storage: uploads
// that commit on Close and are checked against the CRC32C the caller expects,
// composes, listings and deletes, with the library's errors translated into
// the sentinels below so callers branch on errors.Is.
//
// Every call has a deadline: metadata calls 10 s, uploads 30 s plus 4 s per
// MiB, composes 60 s; reads, listings and uploads also end when no byte or
// entry has moved for 15 s. A call that gets no answer fails with an error
// wrapping ErrUnreachable that names the endpoint and what chose it
// (STORAGE_EMULATOR_HOST=…, or Google Cloud Storage).
//
// The same code runs against Google Cloud Storage and against fake-gcs-server:
// the client library honours STORAGE_EMULATOR_HOST. The conformance suite in
// gcstest holds what this package promises, on every backend.
package gcs

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/storage"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/iobuf"
	"github.com/ferry-dev/ferry/internal/metrics"
	"github.com/ferry-dev/ferry/internal/reach"
	"github.com/google/uuid"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	rawgcs "google.golang.org/api/storage/v1"
	htransport "google.golang.org/api/transport/http"
)

// Errors callers branch on.
var (
	// ErrNotFound: the object or bucket does not exist.
	ErrNotFound = errors.New("not found")
	// ErrPrecondition: a DoesNotExist or generation precondition failed,
	// usually because the object exists already.
	ErrPrecondition = errors.New("precondition failed")
	// ErrChecksum: what the server stored is not what the caller expected.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrThrottled: GCS asked the caller to slow down (429
	// rateLimitExceeded, or 503); the request was not carried out.
	ErrThrottled = errors.New("slow down")
	// ErrRateLimited: the 429 among those (it is ErrThrottled too): the
	// request was refused for its rate alone, and is worth sending again
	// at a slower pace.
	ErrRateLimited = errors.New("rate limited")
	// ErrRetained: the object is under a hold (temporary or event-based)
	// or a retention policy, and GCS refuses to replace it (403
	// objectUnderActiveHold or retentionPolicyNotMet). Sending the request
	// again changes nothing until someone releases the object.
	ErrRetained = errors.New("held or retained")
	// ErrInvalid: GCS refused the request as invalid (a 400 other than a
	// checksum's): sending it again gets the same answer. Composing
	// sources of different storage classes is one (an append onto an
	// object a lifecycle rule moved to another class).
	ErrInvalid = errors.New("invalid request")
	// ErrUnreachable: the call got no answer (refused, reset, or nothing
	// within its deadline). It is reach.ErrUnreachable, Pub/Sub's too.
	ErrUnreachable = reach.ErrUnreachable
)

// Deadlines of the calls a Store makes.
const (
	// metaTimeout bounds calls without payload: attributes, deletes,
	// bucket checks, probes, opening a reader.
	metaTimeout = 10 * time.Second
	// uploadFloor and uploadRate bound an upload: the floor plus its bytes
	// at a rate any working link beats (a throttled worker's included).
	uploadFloor = 30 * time.Second
	uploadRate  = 256 << 10 // bytes per second
	// composeTimeout bounds a compose, which fake-gcs-server does by
	// reading every source byte.
	composeTimeout = 60 * time.Second
	// stallTimeout ends a read, a listing or the sending of an upload that
	// has moved nothing for that long.
	stallTimeout = 15 * time.Second
)

// Attrs are the object attributes ferry uses.
type Attrs struct {
	Name       string
	Size       int64
	CRC32C     uint32
	Generation int64
	// Metageneration counts the changes of this generation's metadata
	// (1 when written): a patch moves it and keeps Generation, so a
	// delete under both (DeleteAsSeen) spares an object patched since.
	Metageneration int64
	Metadata       map[string]string
	Created        time.Time
	// Updated is when the object's metadata last changed (Created for an
	// object never patched): Touch moves it.
	Updated time.Time
	// ContentType is the object's media type.
	ContentType string
	// ComponentCount is how many objects a composite was composed of (GCS
	// reports it for composites only; 0 otherwise).
	ComponentCount int64
	// noncurrent: a listing showed this generation as no longer live
	// (its deletion time is set).
	noncurrent bool
	// KMSKey is the Cloud KMS key that encrypts the object, with its
	// version (…/cryptoKeyVersions/N) as GCS reports it; empty when the
	// bucket's default encryption applies (and on fake-gcs-server, which
	// ignores KMS keys).
	KMSKey string
}

// Store reads and writes objects. It is safe for concurrent use. Its methods
// do not retry beyond what the client library does for idempotent calls.
//
// Encryption: a Store made WithKMSKey writes every object (uploads, PutSmall,
// composes) with that Cloud KMS key; UploadOptions.KMSKey and
// ComposeOptions.KMSKey override it for one call. Services set it once from
// FERRY_KMS_KEY (see internal/setup), so no caller can forget it.
type Store struct {
	c *storage.Client
	// raw is the JSON API itself, for composes with a KMS key: the client
	// library does not send a compose's KMSKeyName over HTTP.
	raw    *rawgcs.Service
	kmsKey string
	// hc and uploadBase send plain uploads (see uploadPlain): the
	// JSON API's HTTP client, with the same credentials, and its upload
	// path (".../upload/storage/v1/").
	hc         *http.Client
	uploadBase string
	*conn
}

// conn is what the Stores sharing a client share: where it connects, and
// whether it answered last time.
type conn struct {
	// endpoint names where the client connects and what chose it.
	endpoint string
	state    atomic.Int32 // unknown, answered or silent
	health   atomic.Pointer[func(error)]
	// pacers holds one *pacer.Pacer per bucket (see paced.go), and log,
	// when set, hears of their push-backs (SetLog).
	pacers sync.Map
	log    atomic.Pointer[slog.Logger]
}

const (
	unknown int32 = iota
	answered
	silent
)

// New returns a Store using Application Default Credentials, or the emulator
// named by STORAGE_EMULATOR_HOST. It makes no call (see Probe).
func New(ctx context.Context, opts ...option.ClientOption) (*Store, error) {
	endpoint := "Google Cloud Storage (storage.googleapis.com)"
	if h := os.Getenv("STORAGE_EMULATOR_HOST"); h != "" {
		endpoint = "STORAGE_EMULATOR_HOST=" + h
	}
	raw := opts
	if h := os.Getenv("STORAGE_EMULATOR_HOST"); h != "" {
		raw = append([]option.ClientOption{option.WithEndpoint("http://" + h + "/storage/v1/"), option.WithoutAuthentication()}, opts...)
	}
	hc, err := httpClient(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("storage HTTP client for %s: %w%s", endpoint, err, credentialsHint(err))
	}
	// JSON reads work against both GCS and fake-gcs-server; XML reads need
	// the fake's public host configured.
	c, err := storage.NewClient(ctx, append([]option.ClientOption{storage.WithJSONReads()}, append(opts, option.WithHTTPClient(hc))...)...)
	if err != nil {
		return nil, fmt.Errorf("storage client for %s: %w%s", endpoint, err, credentialsHint(err))
	}
	return newStore(ctx, c, hc, endpoint, raw)
}

// maxIdle is how many idle connections a Store keeps: as many as the
// requests a process keeps in flight (config.MaxRequests), so that the
// connection one request opened serves the next instead of closing.
const maxIdle = 4096

// httpClient is the one HTTP client of a Store's three (the library's, the
// JSON API's, and plain uploads'), with opts' credentials: one pool of
// connections, kept up to maxIdle. Over HTTP/2, which Go negotiates with
// storage.googleapis.com, many requests share a connection; over
// HTTP/1.1 (an emulator) each request in flight has its own, opened once.
func httpClient(ctx context.Context, opts []option.ClientOption) (*http.Client, error) {
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConns, base.MaxIdleConnsPerHost = maxIdle, maxIdle
	base.ForceAttemptHTTP2 = true
	// As the library's own transport does: a connection silent for 31 s
	// is pinged, and dropped when the ping goes unanswered.
	base.HTTP2 = &http.HTTP2Config{SendPingTimeout: 31 * time.Second}
	// No tracing of every request: ferry has its own metrics, and the
	// default instrumentation of each request took 7 % of ferry cp's CPU
	// on 5,000 small files.
	rt, err := htransport.NewTransport(ctx, base, append([]option.ClientOption{option.WithScopes(rawgcs.DevstorageFullControlScope), option.WithTelemetryDisabled()}, opts...)...)
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: rt}, nil
}

// credentialsHint says how to get credentials when the client found none:
// a user signed in with gcloud auth login alone has none that programs
// use. The library has no error value for it, only this text.
func credentialsHint(err error) string {
	if !strings.Contains(err.Error(), "could not find default credentials") {
		return ""
	}
	return "; sign in with gcloud auth application-default login (gcloud auth login signs in gcloud only), " +
		"or set GOOGLE_APPLICATION_CREDENTIALS to a service account's key file"
}

// libraryAttempts bounds the tries the client library makes of one
// idempotent call that GCS answers with an error it retries (a 500, a 503,
// a 429): about 7 s of its backoff. Past that the call's error comes back
// to the Store, which paces 429s and 503s itself (paced.go), and to its
// caller, so that an error GCS keeps answering fails the call in seconds,
// not at the call's deadline as "no answer".
const libraryAttempts = 4

func newStore(ctx context.Context, c *storage.Client, hc *http.Client, endpoint string, opts []option.ClientOption) (*Store, error) {
	c.SetRetry(storage.WithMaxAttempts(libraryAttempts))
	raw, err := rawgcs.NewService(ctx, append(opts, option.WithHTTPClient(hc))...)
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("storage JSON API client for %s: %w", endpoint, err)
	}
	base := strings.Replace(raw.BasePath, "/storage/v1/", "/upload/storage/v1/", 1)
	return &Store{c: c, raw: raw, hc: hc, uploadBase: base, conn: &conn{endpoint: endpoint}}, nil
}

// NewEmulator returns a Store on the GCS emulator at host:port, as
// STORAGE_EMULATOR_HOST=host does; tests use it to reach one of several.
func NewEmulator(ctx context.Context, host string) (*Store, error) {
	endpoint := "GCS emulator at " + host
	opts := []option.ClientOption{option.WithEndpoint("http://" + host + "/storage/v1/"), option.WithoutAuthentication()}
	hc, err := httpClient(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("storage HTTP client for %s: %w", endpoint, err)
	}
	c, err := storage.NewClient(ctx, storage.WithJSONReads(), option.WithEndpoint("http://"+host+"/storage/v1/"), option.WithHTTPClient(hc))
	if err != nil {
		return nil, fmt.Errorf("storage client for %s: %w", endpoint, err)
	}
	return newStore(ctx, c, hc, endpoint, opts)
}

// Close logs what GCS's push-back did (SetLog), and releases the client
// (shared with every Store made from this one by WithKMSKey).
func (s *Store) Close() error {
	s.logPushbacks()
	return s.c.Close()
}

// WithKMSKey returns a Store on the same client that encrypts every object it
// writes with key (projects/P/locations/L/keyRings/R/cryptoKeys/K); an empty
// key means the bucket's default encryption. The service account needs
// roles/cloudkms.cryptoKeyEncrypterDecrypter on the key.
func (s *Store) WithKMSKey(key string) *Store {
	c := *s
	c.kmsKey = key
	return &c
}

// kms is the key a write uses: the call's own, else the Store's.
func (s *Store) kms(key string) string {
	if key != "" {
		return key
	}
	return s.kmsKey
}

// Endpoint names where the Store connects and what chose it.
func (s *Store) Endpoint() string { return s.endpoint }

// SetHealth makes the Store report whether GCS answers: fn(nil) after a call
// that got an answer (any answer, a 404 included), fn(err) after one that got
// none. fn must be cheap and safe for concurrent use; services feed it to
// /readyz. It applies to every Store sharing this one's client.
func (s *Store) SetHealth(fn func(err error)) { s.health.Store(&fn) }

// Reachable returns nil at once if the last call got an answer; otherwise
// it probes GCS (within 10 s) and returns the probe's error. Receivers call
// it before they take work (queue.WithHold), so it is cheap when all is well.
func (s *Store) Reachable(ctx context.Context) error {
	if s.state.Load() == answered {
		return nil
	}
	return s.Probe(ctx)
}

// Probe asks GCS, within 10 s, for a bucket that need not exist: any answer
// (200, 403, 404) shows that GCS is reachable. The error names the endpoint.
func (s *Store) Probe(ctx context.Context) error {
	ctx, cancel := withTimeout(ctx, metaTimeout)
	defer cancel()
	_, err := s.c.Bucket("ferry-reachability-probe").Attrs(ctx)
	if err = s.fail(ctx, "probe", err); errors.Is(err, ErrUnreachable) {
		return err
	}
	return nil
}

// BucketExists returns nil when bucket exists, an error wrapping ErrNotFound
// when it does not.
func (s *Store) BucketExists(ctx context.Context, bucket string) error {
	return s.paced(ctx, bucket, true, nil, func() error {
		ctx, cancel := withTimeout(ctx, metaTimeout)
		defer cancel()
		_, err := s.c.Bucket(bucket).Attrs(ctx)
		return s.fail(ctx, "bucket gs://"+bucket, err)
	})
}

// Attrs returns the attributes of an object.
func (s *Store) Attrs(ctx context.Context, bucket, name string) (Attrs, error) {
	var a *storage.ObjectAttrs
	err := s.paced(ctx, bucket, true, nil, func() error {
		ctx, cancel := withTimeout(ctx, metaTimeout)
		defer cancel()
		var err error
		a, err = s.c.Bucket(bucket).Object(name).Attrs(ctx)
		return s.fail(ctx, fmt.Sprintf("stat gs://%s/%s", bucket, name), err)
	})
	if err != nil {
		return Attrs{}, err
	}
	return fromAttrs(a), nil
}

// Touch sets metadata key of object name to value, which moves its
// Updated time and keeps its bytes and Created time (a lease renewed). It
// fails with ErrNotFound when the object is gone; it is safe to send
// again. It answers nothing of the object: fake-gcs-server's answer leaves
// out the creation time.
func (s *Store) Touch(ctx context.Context, bucket, name, key, value string) error {
	return s.paced(ctx, bucket, true, nil, func() error {
		ctx, cancel := withTimeout(ctx, metaTimeout)
		defer cancel()
		_, err := s.c.Bucket(bucket).Object(name).Update(ctx, storage.ObjectAttrsToUpdate{Metadata: map[string]string{key: value}})
		return s.fail(ctx, fmt.Sprintf("touch gs://%s/%s", bucket, name), err)
	})
}

// Patch sets the metadata keys of md on the object a names, only if it is
// still the version a shows: its generation and, where the server keeps
// one, its metageneration (ErrPrecondition otherwise; ErrNotFound when it
// is gone). Its bytes stay. As Touch, it answers nothing of the object.
func (s *Store) Patch(ctx context.Context, bucket string, a Attrs, md map[string]string) error {
	return s.paced(ctx, bucket, true, nil, func() error {
		ctx, cancel := withTimeout(ctx, metaTimeout)
		defer cancel()
		_, err := asSeen(s.c.Bucket(bucket).Object(a.Name), a).Update(ctx, storage.ObjectAttrsToUpdate{Metadata: md})
		return s.fail(ctx, fmt.Sprintf("patch gs://%s/%s#%d", bucket, a.Name, a.Generation), err)
	})
}

// UploadOptions describe an upload.
type UploadOptions struct {
	// Size and CRC32C are what the caller wrote; the upload fails with
	// ErrChecksum unless the server stored exactly that.
	Size   int64
	CRC32C uint32
	// IfAbsent makes the upload fail with ErrPrecondition when the object
	// exists, so a final object is never replaced by accident.
	IfAbsent bool
	// IfGeneration, when not 0, makes the upload fail with ErrPrecondition
	// unless the object's live generation is this one: it replaces only
	// the version the caller read.
	IfGeneration int64
	ContentType  string
	Metadata     map[string]string
	// KMSKey, when set, encrypts the object with this Cloud KMS key instead
	// of the Store's (see WithKMSKey).
	KMSKey string
	// CallerPaces says that the caller waits for its turn on Pacer(bucket)
	// and waits out a 429 itself (a worker, which counts them for its
	// chunk event); else the Store does (see paced.go).
	CallerPaces bool

	// token and attempt: a plain upload under a precondition sends one
	// idempotency token for all its tries, and the try's number, as the
	// library does.
	token   string
	attempt int
}

// uploadTimeout bounds an upload of n bytes.
func uploadTimeout(n int64) time.Duration {
	return uploadFloor + time.Duration(n)*time.Second/uploadRate
}

// Upload writes r to the object in a single request and commits on Close. The
// CRC32C is sent, so GCS rejects corrupted bytes; the stored CRC32C and size
// are compared again after Close, as fake servers may not check. Nothing is
// visible under name unless the whole upload succeeded.
//
// Objects of at most PlainMax bytes go as one plain request (uploadPlain),
// larger ones through the client library's writer (uploadWriter).
//
// Unless opt.CallerPaces, the upload waits for its turn on the bucket's
// pacer and is sent again after a 429 or 503 when r can be rewound (an
// io.Seeker): the same bytes again, under the same preconditions.
func (s *Store) Upload(ctx context.Context, bucket, name string, r io.Reader, opt UploadOptions) (Attrs, error) {
	upload := s.uploadWriter
	if opt.Size <= PlainMax {
		upload = s.uploadPlain
	}
	if opt.IfAbsent || opt.IfGeneration != 0 {
		opt.token = uuid.NewString()
	}
	opt.attempt = 1
	if opt.CallerPaces {
		return upload(ctx, bucket, name, r, opt)
	}
	var a Attrs
	opt.attempt = 0
	unsure := false // a try may have been carried out unanswered
	err := s.paced(ctx, bucket, true, r, func() error {
		var err error
		opt.attempt++
		a, err = upload(ctx, bucket, name, r, opt)
		unsure = unsure || errors.Is(err, ErrUnreachable) || errors.Is(err, ErrThrottled) && !errors.Is(err, ErrRateLimited)
		return err
	})
	if unsure && errors.Is(err, ErrPrecondition) {
		// An earlier try wrote the object and its answer was lost; the
		// retry's precondition then fails on it. The object is this
		// call's when it holds exactly these bytes.
		if b, aerr := s.Attrs(ctx, bucket, name); aerr == nil && b.Size == opt.Size && b.CRC32C == opt.CRC32C {
			return b, nil
		}
	}
	return a, err
}

// uploadWriter uploads through the client library's writer, in one request.
func (s *Store) uploadWriter(ctx context.Context, bucket, name string, r io.Reader, opt UploadOptions) (Attrs, error) {
	where := fmt.Sprintf("upload gs://%s/%s", bucket, name)
	ctx, cancel := withTimeout(ctx, uploadTimeout(opt.Size))
	defer cancel() // aborts the upload on every early return
	ctx, stalled := stallWatch(ctx)
	defer stalled.stop()
	stalled.pause()
	o := conditions(s.c.Bucket(bucket).Object(name), opt.IfAbsent, opt.IfGeneration)
	w := o.NewWriter(ctx)
	// One request: chunked resumable uploads buffer ChunkSize bytes per
	// writer and are quadratic on fake-gcs-server. A failed upload is retried
	// whole by the caller.
	w.ChunkSize = 0
	w.CRC32C = opt.CRC32C
	w.SendCRC32C = true
	w.ContentType = opt.ContentType
	w.Metadata = opt.Metadata
	w.KMSKeyName = s.kms(opt.KMSKey)
	n, err := iobuf.Copy(stalled.writer(w), r)
	if err != nil {
		err = s.fail(ctx, where, err) // before the cancel, which would make it the caller's
		cancel()
		_ = w.Close()
		return Attrs{}, err
	}
	// All sent; the answer (GCS checking a large object) is bounded by
	// the upload's deadline.
	if err := w.Close(); err != nil {
		return Attrs{}, s.fail(ctx, where, err)
	}
	s.report(nil)
	a := fromAttrs(w.Attrs())
	if n != opt.Size || a.Size != opt.Size || a.CRC32C != opt.CRC32C {
		return a, fmt.Errorf("%s: sent %d bytes, stored %d bytes with crc32c %08x, want %d bytes with crc32c %08x: %w",
			where, n, a.Size, a.CRC32C, opt.Size, opt.CRC32C, ErrChecksum)
	}
	return a, nil
}

// PutSmall writes a small object (a manifest, a marker) from memory.
func (s *Store) PutSmall(ctx context.Context, bucket, name string, data []byte, ifAbsent bool, contentType string) (Attrs, error) {
	return s.Upload(ctx, bucket, name, bytes.NewReader(data), UploadOptions{
		Size: int64(len(data)), CRC32C: crc32c.Checksum(data), IfAbsent: ifAbsent, ContentType: contentType,
	})
}

// PutJSON writes a small JSON object from memory with metadata md, which
// a listing shows without reading the object.
func (s *Store) PutJSON(ctx context.Context, bucket, name string, data []byte, ifAbsent bool, md map[string]string) (Attrs, error) {
	return s.Upload(ctx, bucket, name, bytes.NewReader(data), UploadOptions{
		Size: int64(len(data)), CRC32C: crc32c.Checksum(data), IfAbsent: ifAbsent, ContentType: "application/json", Metadata: md,
	})
}

// ReadAll reads a whole object into memory; use it for small objects only.
// A read that breaks off (a connection reset mid-answer) is read again from
// the start, as an open that got no answer is.
func (s *Store) ReadAll(ctx context.Context, bucket, name string) ([]byte, error) {
	wait := dropBackoffMin
	for try := 0; ; try++ {
		b, opened, err := s.readAll(ctx, bucket, name)
		// An open that got no answer was sent again already (paced).
		if err == nil || !opened || !errors.Is(err, ErrUnreachable) || timedOut(err) || try == maxDropRetries || ctx.Err() != nil {
			return b, err
		}
		metrics.Dropped.Inc()
		if !sleep(ctx, wait) {
			return b, err
		}
		wait *= 2
	}
}

func (s *Store) readAll(ctx context.Context, bucket, name string) ([]byte, bool, error) {
	r, err := s.NewReader(ctx, bucket, name)
	if err != nil {
		return nil, false, err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	return b, true, err
}

// NewReader opens an object for reading. Reading fails once no byte has come
// for 15 s; Close the reader.
func (s *Store) NewReader(ctx context.Context, bucket, name string) (io.ReadCloser, error) {
	return s.NewRangeReader(ctx, bucket, name, 0, -1)
}

// NewRangeReader opens length bytes of an object from offset (length -1:
// to the end; a negative offset with length -1: the last -offset bytes). A
// missing object is an error wrapping ErrNotFound. Reading fails once no
// byte has come for 15 s; Close the reader.
func (s *Store) NewRangeReader(ctx context.Context, bucket, name string, offset, length int64) (io.ReadCloser, error) {
	where := fmt.Sprintf("read gs://%s/%s", bucket, name)
	if offset != 0 || length >= 0 {
		where = fmt.Sprintf("read gs://%s/%s at %d+%d", bucket, name, offset, length)
	}
	var out io.ReadCloser
	err := s.paced(ctx, bucket, true, nil, func() error {
		ctx, stalled := stallWatch(ctx)
		r, err := s.c.Bucket(bucket).Object(name).NewRangeReader(ctx, offset, length)
		if err = s.fail(ctx, where, err); err != nil {
			stalled.stop()
			return err
		}
		out = &reader{s: s, r: r, ctx: ctx, w: stalled, where: where}
		return nil
	})
	return out, err
}

// reader is an object being read under a stall watch.
type reader struct {
	s     *Store
	r     *storage.Reader
	ctx   context.Context
	w     *watch
	where string
}

func (r *reader) Read(p []byte) (int, error) {
	r.w.kick() // the watch runs while GCS has the turn, not the caller
	n, err := r.r.Read(p)
	r.w.pause()
	if err != nil && err != io.EOF {
		err = r.s.fail(r.ctx, r.where, err)
	}
	return n, err
}

func (r *reader) Close() error {
	r.w.stop()
	return r.r.Close()
}

// ComposeOptions describe a compose.
type ComposeOptions struct {
	// IfAbsent makes the compose fail with ErrPrecondition when dst
	// exists. fake-gcs-server ignores compose preconditions, so callers
	// check dst themselves too.
	IfAbsent bool
	// IfGeneration, when not 0, makes the compose fail with
	// ErrPrecondition unless dst's live generation is this one.
	IfGeneration int64
	ContentType  string
	Metadata     map[string]string
	// KMSKey, when set, encrypts dst with this Cloud KMS key instead of the
	// Store's (see WithKMSKey).
	KMSKey string
	// DeleteSources has GCS delete the sources as part of a successful
	// compose (deleteSourceObjects): a hard delete, which the bucket's soft
	// delete and versioning do not keep. fake-gcs-server ignores it; the
	// local stack's shim honours it.
	DeleteSources bool
}

// ListPage is how many objects a listing asks for per page: GCS's most.
const ListPage = 1000

// MaxComposeSources is how many sources one compose takes.
const MaxComposeSources = 32

// Compose concatenates at most 32 source objects into dst, atomically.
func (s *Store) Compose(ctx context.Context, bucket, dst string, srcs []string, opt ComposeOptions) (Attrs, error) {
	where := fmt.Sprintf("compose gs://%s/%s from %d sources", bucket, dst, len(srcs))
	if len(srcs) == 0 || len(srcs) > MaxComposeSources {
		return Attrs{}, fmt.Errorf("%s: want 1 to %d", where, MaxComposeSources)
	}
	var a Attrs
	err := s.paced(ctx, bucket, opt.IfAbsent || opt.IfGeneration != 0, nil, func() error {
		var err error
		a, err = s.compose(ctx, bucket, dst, srcs, opt, where)
		return err
	})
	return a, err
}

// compose is one try of Compose.
func (s *Store) compose(ctx context.Context, bucket, dst string, srcs []string, opt ComposeOptions, where string) (Attrs, error) {
	ctx, cancel := withTimeout(ctx, composeTimeout)
	defer cancel()
	if key := s.kms(opt.KMSKey); key != "" {
		a, err := s.composeRaw(ctx, bucket, dst, srcs, opt, key)
		if err = s.fail(ctx, where, err); err != nil {
			return Attrs{}, err
		}
		return a, nil
	}
	b := s.c.Bucket(bucket)
	handles := make([]*storage.ObjectHandle, len(srcs))
	for i, n := range srcs {
		handles[i] = b.Object(n)
	}
	c := conditions(b.Object(dst), opt.IfAbsent, opt.IfGeneration).ComposerFrom(handles...)
	c.ContentType = opt.ContentType
	c.Metadata = opt.Metadata
	c.DeleteSourceObjects = opt.DeleteSources
	a, err := c.Run(ctx)
	if err = s.fail(ctx, where, err); err != nil {
		return Attrs{}, err
	}
	return fromAttrs(a), nil
}

// composeRaw composes through the JSON API itself, which takes the KMS key
// of the destination (the client library drops it). It is not retried: the
// caller retries the whole step.
func (s *Store) composeRaw(ctx context.Context, bucket, dst string, srcs []string, opt ComposeOptions, key string) (Attrs, error) {
	req := &rawgcs.ComposeRequest{Destination: &rawgcs.Object{ContentType: opt.ContentType, Metadata: opt.Metadata}, DeleteSourceObjects: opt.DeleteSources}
	for _, n := range srcs {
		req.SourceObjects = append(req.SourceObjects, &rawgcs.ComposeRequestSourceObjects{Name: n})
	}
	call := s.raw.Objects.Compose(bucket, dst, req).KmsKeyName(key).Context(ctx)
	switch {
	case opt.IfAbsent:
		call.IfGenerationMatch(0)
	case opt.IfGeneration != 0:
		call.IfGenerationMatch(opt.IfGeneration)
	}
	o, err := call.Do()
	if err != nil {
		return Attrs{}, err
	}
	a := Attrs{Name: o.Name, Size: int64(o.Size), Generation: o.Generation, Metadata: o.Metadata, KMSKey: o.KmsKeyName, ContentType: o.ContentType}
	a.Created, _ = time.Parse(time.RFC3339Nano, o.TimeCreated)
	c, err := base64.StdEncoding.DecodeString(o.Crc32c)
	if err != nil || len(c) != 4 {
		return a, fmt.Errorf("compose answered crc32c %q: not 4 bytes of base64", o.Crc32c)
	}
	a.CRC32C = binary.BigEndian.Uint32(c)
	return a, nil
}

// List calls fn for every object under prefix, in name order, once per
// name, with its live generation: a listing that also shows noncurrent
// versions (a versioned bucket, a stand-in that lists them) gives fn the
// newest generation of each name only (see latest). It fails once no entry
// has come for 15 s. A page GCS pushes back (429, 503) is asked for again
// at its turn, from after the last object fn was given.
func (s *Store) List(ctx context.Context, bucket, prefix string, fn func(Attrs) error) error {
	return s.ListRange(ctx, bucket, prefix, "", "", fn)
}

// ListRange is List of the names from start (included) to end (excluded);
// an empty start or end leaves that side open. Listings of adjacent ranges
// run at once are one listing in parts, each a round trip per page.
func (s *Store) ListRange(ctx context.Context, bucket, prefix, start, end string, fn func(Attrs) error) error {
	var last string
	var fnErr error
	give := func(a Attrs) error {
		if fnErr = fn(a); fnErr != nil {
			return fnErr
		}
		last = a.Name
		return nil
	}
	err := s.paced(ctx, bucket, true, nil, func() error {
		next, flush := latest(give)
		from := start
		if last != "" {
			from = last + "\x00" // the next name after it
		}
		if err := s.list(ctx, bucket, prefix, from, end, next); err != nil {
			return err
		}
		return flush()
	})
	if fnErr != nil {
		return fnErr
	}
	return err
}

// latest passes on to fn, of the entries given to next in name order, the
// newest generation of each name and none marked deleted (a noncurrent
// version), holding one entry back until the name changes; flush gives the
// last one.
func latest(fn func(Attrs) error) (next func(Attrs) error, flush func() error) {
	var held *Attrs
	next = func(a Attrs) error {
		if held != nil && held.Name != a.Name {
			h := *held
			held = nil
			if err := fn(h); err != nil {
				return err
			}
		}
		if a.noncurrent {
			return nil
		}
		if held == nil || a.Generation > held.Generation {
			held = &a
		}
		return nil
	}
	flush = func() error {
		if held == nil {
			return nil
		}
		h := *held
		held = nil
		return fn(h)
	}
	return next, flush
}

// list is one try of ListRange, from the name from (included; "": from
// the start) to end (excluded; "": to the end).
func (s *Store) list(ctx context.Context, bucket, prefix, from, end string, fn func(Attrs) error) error {
	where := fmt.Sprintf("list gs://%s/%s", bucket, prefix)
	if from != "" || end != "" {
		where = fmt.Sprintf("list gs://%s/%s from %q to %q", bucket, prefix, from, end)
	}
	ctx, stalled := stallWatch(ctx)
	defer stalled.stop()
	q := &storage.Query{Prefix: prefix, StartOffset: from, EndOffset: end}
	it := s.c.Bucket(bucket).Objects(ctx, q)
	// A page size of our own: a server that is asked for none may answer
	// with every object at once (fake-gcs-server does: hundreds of MB for
	// one page of a large bucket), and what a listing holds must not depend on it.
	it.PageInfo().MaxSize = ListPage
	for {
		a, err := it.Next()
		stalled.kick()
		if errors.Is(err, iterator.Done) {
			return s.fail(ctx, where, nil)
		}
		if err != nil {
			return s.fail(ctx, where, err)
		}
		stalled.pause()
		at := fromAttrs(a)
		at.noncurrent = !a.Deleted.IsZero()
		err = fn(at)
		stalled.kick()
		if err != nil {
			return err
		}
	}
}

// Delete removes an object; one already gone is not an error.
func (s *Store) Delete(ctx context.Context, bucket, name string) error {
	err := s.paced(ctx, bucket, true, nil, func() error {
		ctx, cancel := withTimeout(ctx, metaTimeout)
		defer cancel()
		return s.fail(ctx, fmt.Sprintf("delete gs://%s/%s", bucket, name), s.c.Bucket(bucket).Object(name).Delete(ctx))
	})
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// DeleteGeneration removes generation gen of an object, and nothing newer:
// a version written since fails with ErrPrecondition and stays. One already
// gone is not an error.
func (s *Store) DeleteGeneration(ctx context.Context, bucket, name string, gen int64) error {
	err := s.paced(ctx, bucket, true, nil, func() error {
		ctx, cancel := withTimeout(ctx, metaTimeout)
		defer cancel()
		o := s.c.Bucket(bucket).Object(name).If(storage.Conditions{GenerationMatch: gen})
		return s.fail(ctx, fmt.Sprintf("delete gs://%s/%s#%d", bucket, name, gen), o.Delete(ctx))
	})
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// DeleteAsSeen removes the object a names only if it is still the
// version a shows, its metadata unchanged too (a.Metageneration, where the
// server keeps one): an object written or patched since (adopted by
// another transfer) fails with ErrPrecondition and stays. One already
// gone is not an error.
func (s *Store) DeleteAsSeen(ctx context.Context, bucket string, a Attrs) error {
	err := s.paced(ctx, bucket, true, nil, func() error {
		ctx, cancel := withTimeout(ctx, metaTimeout)
		defer cancel()
		o := asSeen(s.c.Bucket(bucket).Object(a.Name), a)
		return s.fail(ctx, fmt.Sprintf("delete gs://%s/%s#%d", bucket, a.Name, a.Generation), o.Delete(ctx))
	})
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// asSeen makes a call on o hold only for the version of it a shows.
func asSeen(o *storage.ObjectHandle, a Attrs) *storage.ObjectHandle {
	if a.Generation == 0 {
		return o.If(storage.Conditions{DoesNotExist: true}) // a shows none
	}
	return o.If(storage.Conditions{GenerationMatch: a.Generation, MetagenerationMatch: a.Metageneration})
}

// conditions puts a write's preconditions on o.
func conditions(o *storage.ObjectHandle, ifAbsent bool, generation int64) *storage.ObjectHandle {
	switch {
	case ifAbsent:
		return o.If(storage.Conditions{DoesNotExist: true})
	case generation != 0:
		return o.If(storage.Conditions{GenerationMatch: generation})
	}
	return o
}

func fromAttrs(a *storage.ObjectAttrs) Attrs {
	if a == nil {
		return Attrs{}
	}
	return Attrs{Name: a.Name, Size: a.Size, CRC32C: a.CRC32C, Generation: a.Generation, Metageneration: a.Metageneration, Metadata: a.Metadata,
		Created: a.Created, Updated: a.Updated, KMSKey: a.KMSKeyName, ContentType: a.ContentType, ComponentCount: a.ComponentCount}
}

// fail records what call op found and returns its error, nil for nil: the
// library's errors translated into the package sentinels (keeping their
// text), and a call that got no answer wrapped in ErrUnreachable with the
// endpoint named. ctx is the call's own context, whose cause says which
// deadline passed.
func (s *Store) fail(ctx context.Context, op string, err error) error {
	if err == nil {
		s.report(nil)
		return nil
	}
	if unreachable(ctx, err) {
		err = reach.Wrap(ctx, op, s.endpoint, err)
		s.report(err)
		return err
	}
	if ctx.Err() == nil {
		s.report(nil) // an answer, if not the one hoped for
	} // else the caller gave up: that says nothing about GCS
	return fmt.Errorf("%s: %w", op, translate(err))
}

// report records whether GCS answered and passes it on to the health
// function.
func (s *Store) report(err error) {
	st := answered
	if err != nil {
		st = silent
	}
	s.state.Store(st)
	if fn := s.health.Load(); fn != nil {
		(*fn)(err)
	}
}

// unreachable reports whether err means that GCS did not answer, as opposed
// to answering with an error. A ctx cancelled by the caller is neither.
func unreachable(ctx context.Context, err error) bool {
	if errors.Is(ctx.Err(), context.Canceled) && !errors.Is(context.Cause(ctx), errStalled) {
		return false
	}
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return false
	}
	var ue *url.Error
	var ne net.Error
	return errors.As(err, &ue) || errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF)
}

// translate maps the library's errors onto the package sentinels, keeping the
// original text.
func translate(err error) error {
	if errors.Is(err, storage.ErrObjectNotExist) || errors.Is(err, storage.ErrBucketNotExist) {
		return fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		switch ge.Code {
		case http.StatusNotFound:
			return fmt.Errorf("%w: %v", ErrNotFound, err)
		case http.StatusPreconditionFailed:
			return fmt.Errorf("%w: %v", ErrPrecondition, err)
		case http.StatusTooManyRequests:
			return fmt.Errorf("%w (%w): %v", ErrRateLimited, ErrThrottled, err)
		case http.StatusServiceUnavailable:
			return fmt.Errorf("%w: %v", ErrThrottled, err)
		case http.StatusForbidden:
			if retained(ge) {
				return fmt.Errorf("%w: %v", ErrRetained, err)
			}
		case http.StatusBadRequest:
			if strings.Contains(strings.ToLower(ge.Message), "checksum") || strings.Contains(strings.ToLower(ge.Message), "crc32c") {
				return fmt.Errorf("%w: %v", ErrChecksum, err)
			}
			return fmt.Errorf("%w: %v", ErrInvalid, err)
		}
	}
	return err
}

// retained reports whether a 403 is GCS refusing to replace an object
// under a hold or a retention policy, by its reason, or, where an answer
// carries none, by its message ("... is under active Event-Based hold and
// cannot be deleted, overwritten or archived until hold is removed", "...
// is subject to bucket's retention policy or object retention and cannot
// be deleted or overwritten ...").
func retained(ge *googleapi.Error) bool {
	for _, e := range ge.Errors {
		if e.Reason == "objectUnderActiveHold" || e.Reason == "retentionPolicyNotMet" {
			return true
		}
	}
	m := strings.ToLower(ge.Message)
	return strings.Contains(m, "cannot be deleted") && (strings.Contains(m, "hold") || strings.Contains(m, "retention"))
}

// withTimeout is ctx bounded by d, with a cause that says so.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, d, fmt.Errorf("%w within %v", errNoAnswer, d))
}

// errNoAnswer is the cause of a call ended by its own deadline.
var errNoAnswer = errors.New("no answer")

// timedOut reports whether err is a call that got no answer before its own
// deadline or stall watch ended it, as opposed to a connection that broke.
func timedOut(err error) bool {
	return errors.Is(err, errNoAnswer) || errors.Is(err, errStalled) || errors.Is(err, context.DeadlineExceeded)
}

// errStalled is the cause of a call ended by its stall watch.
var errStalled = fmt.Errorf("nothing moved for %v", stallTimeout)

// watch cancels its context when it has not been kicked for stallTimeout.
type watch struct {
	t      *time.Timer
	cancel context.CancelCauseFunc
}

// stallWatch returns ctx under a new watch, started: it ends ctx when GCS
// has had the turn for stallTimeout without moving anything.
func stallWatch(ctx context.Context) (context.Context, *watch) {
	ctx, cancel := context.WithCancelCause(ctx)
	w := &watch{cancel: cancel}
	w.t = time.AfterFunc(stallTimeout, func() { cancel(errStalled) })
	return ctx, w
}

// kick restarts the watch: something moved.
func (w *watch) kick() { w.t.Reset(stallTimeout) }

// pause stops the watch until the next kick (while the caller, not GCS, has
// the turn).
func (w *watch) pause() { w.t.Stop() }

// stop ends the watch and releases its context.
func (w *watch) stop() {
	w.t.Stop()
	w.cancel(nil)
}

// writer returns w under the watch: each write of at most 256 KiB must be
// taken within stallTimeout; the time between writes (the caller's) does
// not count.
func (wt *watch) writer(w io.Writer) io.Writer { return watchedWriter{w, wt} }

type watchedWriter struct {
	w  io.Writer
	wt *watch
}

func (ww watchedWriter) Write(p []byte) (int, error) {
	const piece = 256 << 10
	written := 0
	for len(p) > 0 {
		n := min(len(p), piece)
		ww.wt.kick()
		m, err := ww.w.Write(p[:n])
		ww.wt.pause()
		written += m
		if err != nil {
			return written, err
		}
		p = p[n:]
	}
	return written, nil
}

// BucketInfo is what ferry's deployment promises of a bucket, as GCS
// reports it.
type BucketInfo struct {
	Location      string
	UniformAccess bool
	// DefaultKMSKey encrypts objects written without a key of their own;
	// "" for Google-managed encryption.
	DefaultKMSKey string
	// SoftDelete is how long deleted objects are kept (0: off).
	SoftDelete time.Duration
	// Expiry is the age in days after which a lifecycle rule deletes the
	// objects under each prefix it names ("" for a rule on every object).
	Expiry map[string]int64
}

// Bucket returns bucket's settings, or an error wrapping ErrNotFound.
func (s *Store) Bucket(ctx context.Context, bucket string) (BucketInfo, error) {
	ctx, cancel := withTimeout(ctx, metaTimeout)
	defer cancel()
	a, err := s.c.Bucket(bucket).Attrs(ctx)
	if err = s.fail(ctx, "bucket gs://"+bucket, err); err != nil {
		return BucketInfo{}, err
	}
	b := BucketInfo{Location: a.Location, UniformAccess: a.UniformBucketLevelAccess.Enabled, Expiry: map[string]int64{}}
	if a.Encryption != nil {
		b.DefaultKMSKey = a.Encryption.DefaultKMSKeyName
	}
	if a.SoftDeletePolicy != nil {
		b.SoftDelete = a.SoftDeletePolicy.RetentionDuration
	}
	for _, r := range a.Lifecycle.Rules {
		if r.Action.Type != storage.DeleteAction || r.Condition.AgeInDays <= 0 {
			continue
		}
		prefixes := r.Condition.MatchesPrefix
		if len(prefixes) == 0 {
			prefixes = []string{""}
		}
		for _, p := range prefixes {
			b.Expiry[p] = r.Condition.AgeInDays
		}
	}
	return b, nil
}

// TestPermissions returns which of perms the caller holds on bucket
// (testIamPermissions).
func (s *Store) TestPermissions(ctx context.Context, bucket string, perms []string) ([]string, error) {
	ctx, cancel := withTimeout(ctx, metaTimeout)
	defer cancel()
	got, err := s.c.Bucket(bucket).IAM().TestPermissions(ctx, perms)
	if err = s.fail(ctx, "test permissions on gs://"+bucket, err); err != nil {
		return nil, err
	}
	return got, nil
}
