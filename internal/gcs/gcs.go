// Package gcs is ferry's thin layer over cloud.google.com/go/storage: uploads
// that commit on Close and are checked against the CRC32C the caller expects,
// composes, listings and deletes, with the library's errors translated into
// the sentinels below so callers branch on errors.Is.
//
// The same code runs against Google Cloud Storage and against fake-gcs-server:
// the client library honours STORAGE_EMULATOR_HOST.
package gcs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"cloud.google.com/go/storage"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
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
)

// Attrs are the object attributes ferry uses.
type Attrs struct {
	Name       string
	Size       int64
	CRC32C     uint32
	Generation int64
	Metadata   map[string]string
	Created    time.Time
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
	c      *storage.Client
	kmsKey string
}

// New returns a Store using Application Default Credentials, or the emulator
// named by STORAGE_EMULATOR_HOST.
func New(ctx context.Context, opts ...option.ClientOption) (*Store, error) {
	// JSON reads work against both GCS and fake-gcs-server; XML reads need
	// the fake's public host configured.
	opts = append([]option.ClientOption{storage.WithJSONReads()}, opts...)
	c, err := storage.NewClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("storage client: %w", err)
	}
	return &Store{c: c}, nil
}

// Close releases the client (shared with every Store made from this one by
// WithKMSKey).
func (s *Store) Close() error { return s.c.Close() }

// WithKMSKey returns a Store on the same client that encrypts every object it
// writes with key (projects/P/locations/L/keyRings/R/cryptoKeys/K); an empty
// key means the bucket's default encryption. The service account needs
// roles/cloudkms.cryptoKeyEncrypterDecrypter on the key.
func (s *Store) WithKMSKey(key string) *Store {
	return &Store{c: s.c, kmsKey: key}
}

// kms is the key a write uses: the call's own, else the Store's.
func (s *Store) kms(key string) string {
	if key != "" {
		return key
	}
	return s.kmsKey
}

// BucketExists returns nil when bucket exists, an error wrapping ErrNotFound
// when it does not.
func (s *Store) BucketExists(ctx context.Context, bucket string) error {
	_, err := s.c.Bucket(bucket).Attrs(ctx)
	if err != nil {
		return fmt.Errorf("bucket gs://%s: %w", bucket, translate(err))
	}
	return nil
}

// Attrs returns the attributes of an object.
func (s *Store) Attrs(ctx context.Context, bucket, name string) (Attrs, error) {
	a, err := s.c.Bucket(bucket).Object(name).Attrs(ctx)
	if err != nil {
		return Attrs{}, fmt.Errorf("stat gs://%s/%s: %w", bucket, name, translate(err))
	}
	return fromAttrs(a), nil
}

// UploadOptions describe an upload.
type UploadOptions struct {
	// Size and CRC32C are what the caller wrote; the upload fails with
	// ErrChecksum unless the server stored exactly that.
	Size   int64
	CRC32C uint32
	// IfAbsent makes the upload fail with ErrPrecondition when the object
	// exists, so a final object is never replaced by accident.
	IfAbsent    bool
	ContentType string
	Metadata    map[string]string
	// KMSKey, when set, encrypts the object with this Cloud KMS key instead
	// of the Store's (see WithKMSKey).
	KMSKey string
}

// Upload writes r to the object in a single request and commits on Close. The
// CRC32C is sent, so GCS rejects corrupted bytes; the stored CRC32C and size
// are compared again after Close, as fake servers may not check. Nothing is
// visible under name unless the whole upload succeeded.
func (s *Store) Upload(ctx context.Context, bucket, name string, r io.Reader, opt UploadOptions) (Attrs, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // aborts the upload on every early return
	o := s.c.Bucket(bucket).Object(name)
	if opt.IfAbsent {
		o = o.If(storage.Conditions{DoesNotExist: true})
	}
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
	n, err := io.Copy(w, r)
	if err != nil {
		cancel()
		_ = w.Close()
		return Attrs{}, fmt.Errorf("upload gs://%s/%s: %w", bucket, name, translate(err))
	}
	if err := w.Close(); err != nil {
		return Attrs{}, fmt.Errorf("upload gs://%s/%s: %w", bucket, name, translate(err))
	}
	a := fromAttrs(w.Attrs())
	if n != opt.Size || a.Size != opt.Size || a.CRC32C != opt.CRC32C {
		return a, fmt.Errorf("upload gs://%s/%s: sent %d bytes, stored %d bytes with crc32c %08x, want %d bytes with crc32c %08x: %w",
			bucket, name, n, a.Size, a.CRC32C, opt.Size, opt.CRC32C, ErrChecksum)
	}
	return a, nil
}

// PutSmall writes a small object (a manifest, a marker) from memory.
func (s *Store) PutSmall(ctx context.Context, bucket, name string, data []byte, ifAbsent bool, contentType string) (Attrs, error) {
	return s.Upload(ctx, bucket, name, bytes.NewReader(data), UploadOptions{
		Size: int64(len(data)), CRC32C: crc32c.Checksum(data), IfAbsent: ifAbsent, ContentType: contentType,
	})
}

// ReadAll reads a whole object into memory; use it for small objects only.
func (s *Store) ReadAll(ctx context.Context, bucket, name string) ([]byte, error) {
	r, err := s.NewReader(ctx, bucket, name)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read gs://%s/%s: %w", bucket, name, translate(err))
	}
	return b, nil
}

// NewReader opens an object for reading.
func (s *Store) NewReader(ctx context.Context, bucket, name string) (io.ReadCloser, error) {
	r, err := s.c.Bucket(bucket).Object(name).NewReader(ctx)
	if err != nil {
		return nil, fmt.Errorf("read gs://%s/%s: %w", bucket, name, translate(err))
	}
	return r, nil
}

// NewRangeReader opens length bytes of an object from offset (length -1:
// to the end; a negative offset with length -1: the last -offset bytes). A
// missing object is an error wrapping ErrNotFound.
func (s *Store) NewRangeReader(ctx context.Context, bucket, name string, offset, length int64) (io.ReadCloser, error) {
	r, err := s.c.Bucket(bucket).Object(name).NewRangeReader(ctx, offset, length)
	if err != nil {
		return nil, fmt.Errorf("read gs://%s/%s at %d+%d: %w", bucket, name, offset, length, translate(err))
	}
	return r, nil
}

// ComposeOptions describe a compose.
type ComposeOptions struct {
	// IfAbsent makes the compose fail when dst exists. fake-gcs-server
	// ignores compose preconditions, so callers check dst themselves too.
	IfAbsent    bool
	ContentType string
	Metadata    map[string]string
	// KMSKey, when set, encrypts dst with this Cloud KMS key instead of the
	// Store's (see WithKMSKey).
	KMSKey string
}

// Compose concatenates at most 32 source objects into dst, atomically.
func (s *Store) Compose(ctx context.Context, bucket, dst string, srcs []string, opt ComposeOptions) (Attrs, error) {
	b := s.c.Bucket(bucket)
	handles := make([]*storage.ObjectHandle, len(srcs))
	for i, n := range srcs {
		handles[i] = b.Object(n)
	}
	o := b.Object(dst)
	if opt.IfAbsent {
		o = o.If(storage.Conditions{DoesNotExist: true})
	}
	c := o.ComposerFrom(handles...)
	c.ContentType = opt.ContentType
	c.Metadata = opt.Metadata
	c.KMSKeyName = s.kms(opt.KMSKey)
	a, err := c.Run(ctx)
	if err != nil {
		return Attrs{}, fmt.Errorf("compose gs://%s/%s from %d sources: %w", bucket, dst, len(srcs), translate(err))
	}
	return fromAttrs(a), nil
}

// List calls fn for every object under prefix, in name order.
func (s *Store) List(ctx context.Context, bucket, prefix string, fn func(Attrs) error) error {
	it := s.c.Bucket(bucket).Objects(ctx, &storage.Query{Prefix: prefix})
	for {
		a, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("list gs://%s/%s: %w", bucket, prefix, translate(err))
		}
		if err := fn(fromAttrs(a)); err != nil {
			return err
		}
	}
}

// Delete removes an object; one already gone is not an error.
func (s *Store) Delete(ctx context.Context, bucket, name string) error {
	err := s.c.Bucket(bucket).Object(name).Delete(ctx)
	if err != nil && !errors.Is(translate(err), ErrNotFound) {
		return fmt.Errorf("delete gs://%s/%s: %w", bucket, name, translate(err))
	}
	return nil
}

func fromAttrs(a *storage.ObjectAttrs) Attrs {
	if a == nil {
		return Attrs{}
	}
	return Attrs{Name: a.Name, Size: a.Size, CRC32C: a.CRC32C, Generation: a.Generation, Metadata: a.Metadata, Created: a.Created, KMSKey: a.KMSKeyName}
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
		case http.StatusBadRequest:
			if strings.Contains(strings.ToLower(ge.Message), "checksum") || strings.Contains(strings.ToLower(ge.Message), "crc32c") {
				return fmt.Errorf("%w: %v", ErrChecksum, err)
			}
		}
	}
	return err
}
