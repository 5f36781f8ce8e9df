// Package worker uploads chunks. Its handler takes one chunk message, checks
// the CRC32C of the bytes it reads from the spool, uploads them to their
// object under a DoesNotExist precondition with the CRC32C sent, compares what
// GCS stored, publishes a chunk-uploaded event and only then lets the message
// be acked. Every step is idempotent: a chunk object already present with the
// right CRC32C is a duplicate delivery, not an error.
package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/metrics"
	"github.com/ferry-dev/ferry/internal/queue"
)

// objectStore is what a worker needs of GCS.
type objectStore interface {
	Attrs(ctx context.Context, bucket, name string) (gcs.Attrs, error)
	Upload(ctx context.Context, bucket, name string, r io.Reader, opt gcs.UploadOptions) (gcs.Attrs, error)
}

var _ objectStore = (*gcs.Store)(nil)

// publisher sends one message and returns once it is stored.
type publisher interface {
	Publish(ctx context.Context, data []byte, attrs map[string]string) error
}

var _ publisher = (*queue.Publisher)(nil)

// Worker handles chunk messages. It is safe for concurrent use.
type Worker struct {
	store  objectStore
	events publisher
	id     string
	// maxAttempts is the subscription's dead-letter threshold: on the last
	// delivery a transient error is reported as a failure of the transfer,
	// so the transfer ends instead of waiting for a chunk that is gone.
	maxAttempts int
	log         *slog.Logger
}

// New returns a Worker named id that publishes to events.
func New(store objectStore, events publisher, id string, maxAttempts int, log *slog.Logger) *Worker {
	return &Worker{store: store, events: events, id: id, maxAttempts: maxAttempts, log: logging.OrDiscard(log)}
}

// Handle is the queue.Handler for chunk messages.
func (w *Worker) Handle(ctx context.Context, m queue.Message) error {
	var c message.Chunk
	if err := message.Decode(m.Data, &c); err != nil {
		return queue.Permanent(fmt.Errorf("chunk message %s: %w", m.ID, err))
	}
	log := w.log.With("transfer_id", c.TransferID, "object", c.Object, "chunk", c.Index, "file", c.Path)
	start := time.Now()
	metrics.InFlight.WithLabelValues("uploads").Inc()
	defer metrics.InFlight.WithLabelValues("uploads").Dec()
	if m.DeliveryAttempt > 1 {
		metrics.Redeliveries.Inc()
	}
	a, dup, err := w.upload(ctx, &c, max(1, m.DeliveryAttempt))
	if errors.Is(err, errFinished) {
		log.Info("chunk of a finished transfer; dropped")
		return nil
	}
	if err != nil && !errors.Is(err, queue.ErrPermanent) && w.maxAttempts > 0 && m.DeliveryAttempt >= w.maxAttempts {
		err = queue.Permanent(fmt.Errorf("gave up after %d attempts: %w", m.DeliveryAttempt, err))
	}
	if errors.Is(err, queue.ErrPermanent) {
		metrics.Uploads.WithLabelValues("failed").Inc()
		// Tell the merger, so the transfer ends failed and its staging is
		// removed. Only then may the message be acked.
		ev := message.Event{V: message.Version, Type: message.EventFailed, TransferID: c.TransferID, Bucket: c.Bucket,
			File: c.File, Index: c.Index, Object: c.Object, Worker: w.id, Error: err.Error(), At: time.Now().UTC()}
		if perr := w.events.Publish(ctx, message.Encode(ev), map[string]string{"transfer_id": c.TransferID, "type": ev.Type}); perr != nil {
			return fmt.Errorf("report failure (%v): %w", err, perr)
		}
		removeSpool(c.Spool)
		return err
	}
	if err != nil {
		metrics.Uploads.WithLabelValues("retry").Inc()
		return err
	}
	ev := message.Event{V: message.Version, Type: message.EventChunk, TransferID: c.TransferID, Bucket: c.Bucket,
		File: c.File, Index: c.Index, Object: c.Object, CRC32C: a.CRC32C, RawBytes: c.RawSize, Worker: w.id, At: time.Now().UTC()}
	if err := w.events.Publish(ctx, message.Encode(ev), map[string]string{"transfer_id": c.TransferID, "type": ev.Type}); err != nil {
		metrics.Uploads.WithLabelValues("retry").Inc()
		return err
	}
	if dup {
		metrics.Uploads.WithLabelValues("duplicate").Inc()
	} else {
		metrics.Uploads.WithLabelValues("ok").Inc()
		metrics.BytesUploaded.Add(float64(c.WireSize))
		metrics.UploadSeconds.Observe(time.Since(start).Seconds())
	}
	// The object is durable and announced; a redelivery after this point
	// finds it present and only announces it again.
	removeSpool(c.Spool)
	log.Debug("chunk uploaded", "bytes", c.WireSize, "ms", time.Since(start).Milliseconds(), "worker", w.id)
	return nil
}

// errFinished: the chunk belongs to a transfer that already ended.
var errFinished = errors.New("transfer already finished")

// upload stores the chunk; dup reports that it was there already.
func (w *Worker) upload(ctx context.Context, c *message.Chunk, attempt int) (a gcs.Attrs, dup bool, err error) {
	where := fmt.Sprintf("file %s chunk %d", c.Path, c.Index)
	a, err = w.store.Attrs(ctx, c.Bucket, c.Object)
	switch {
	case err == nil && w.same(c, a):
		return a, true, nil // a duplicate delivery: already done
	case err == nil && c.Final && !c.Overwrite:
		return gcs.Attrs{}, false, queue.Permanent(fmt.Errorf("%s: destination gs://%s/%s already exists (overwrite was not requested)", where, c.Bucket, c.Object))
	case err != nil && !errors.Is(err, gcs.ErrNotFound):
		return gcs.Attrs{}, false, err
	}
	exists := err == nil

	body, err := w.open(ctx, c)
	if err != nil {
		return gcs.Attrs{}, false, err
	}
	if cl, ok := body.(io.Closer); ok {
		defer cl.Close()
	}
	// Check the spool bytes before sending them: a corrupt spool file can
	// never succeed, and must not reach GCS.
	h := crc32c.New()
	n, err := io.Copy(h, body)
	if err != nil {
		return gcs.Attrs{}, false, fmt.Errorf("%s: read spool %s: %w", where, c.Spool, err)
	}
	if n != c.WireSize || h.Sum32() != c.WireCRC32C {
		return gcs.Attrs{}, false, queue.Permanent(fmt.Errorf("%s: spool bytes are corrupt: %d bytes with crc32c %08x, the producer wrote %d bytes with crc32c %08x: %w",
			where, n, h.Sum32(), c.WireSize, c.WireCRC32C, gcs.ErrChecksum))
	}
	if _, err := body.Seek(0, io.SeekStart); err != nil {
		return gcs.Attrs{}, false, err
	}
	meta := map[string]string{}
	for k, v := range c.Metadata {
		meta[k] = v
	}
	meta[message.MetaWorker] = w.id
	meta[message.MetaUploadAt] = time.Now().UTC().Format(time.RFC3339Nano)
	meta[message.MetaAttempt] = strconv.Itoa(attempt)
	if !c.Final {
		meta[message.MetaTransfer] = c.TransferID
	}
	// Staging objects and new final objects are written only if absent;
	// an existing object is replaced only when it is a staging object left
	// by an earlier attempt, or when the request says overwrite.
	a, err = w.store.Upload(ctx, c.Bucket, c.Object, body, gcs.UploadOptions{
		Size: c.WireSize, CRC32C: c.WireCRC32C, IfAbsent: !exists, ContentType: c.ContentType, Metadata: meta,
	})
	if errors.Is(err, gcs.ErrPrecondition) {
		// Someone else wrote it meanwhile: a duplicate delivery, or a
		// final object that appeared under our feet.
		if b, aerr := w.store.Attrs(ctx, c.Bucket, c.Object); aerr == nil && w.same(c, b) {
			return b, true, nil
		}
		if c.Final {
			return gcs.Attrs{}, false, queue.Permanent(fmt.Errorf("%s: destination gs://%s/%s already exists: %w", where, c.Bucket, c.Object, err))
		}
	}
	if err != nil {
		return gcs.Attrs{}, false, fmt.Errorf("%s: %w", where, err)
	}
	return a, false, nil
}

// same reports whether a is the object c describes, written by c's transfer.
func (w *Worker) same(c *message.Chunk, a gcs.Attrs) bool {
	return a.Size == c.WireSize && a.CRC32C == c.WireCRC32C && a.Metadata[message.MetaTransfer] == c.TransferID
}

// open returns the chunk's wire bytes.
func (w *Worker) open(ctx context.Context, c *message.Chunk) (io.ReadSeeker, error) {
	if c.Spool == "" {
		return bytes.NewReader(c.Inline), nil
	}
	f, err := os.Open(c.Spool)
	if errors.Is(err, fs.ErrNotExist) {
		// Gone after a successful upload whose object was since cleaned
		// up with its finished transfer, or lost.
		if _, derr := w.store.Attrs(ctx, c.Bucket, message.DoneMarker(c.TransferID)); derr == nil {
			return nil, errFinished
		}
		return nil, queue.Permanent(fmt.Errorf("file %s chunk %d: spool file %s is missing", c.Path, c.Index, c.Spool))
	}
	if err != nil {
		return nil, fmt.Errorf("file %s chunk %d: open spool: %w", c.Path, c.Index, err)
	}
	return f, nil
}

// removeSpool deletes a spool file.
func removeSpool(path string) {
	if path != "" {
		_ = os.Remove(path)
	}
}
