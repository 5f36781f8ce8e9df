// Package requests runs the transfer requests batch systems publish to the
// requests topic (`producer serve`). Its Handle is the queue.Handler of that
// subscription. Every request ends with exactly one message on the done
// topic: the merger's, or, for a request that cannot start, the server's own.
//
// A request chooses nothing configuration did not allow: its sources must lie
// under FERRY_SOURCE_ROOTS (with none configured every request is refused),
// and its bucket must be in FERRY_BUCKETS when that is set.
package requests

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/plan"
	"github.com/ferry-dev/ferry/internal/producer"
	"github.com/ferry-dev/ferry/internal/queue"
)

// submitter runs a transfer to the point where the fleet takes over.
type submitter interface {
	Submit(ctx context.Context, req producer.Request) (*message.Manifest, error)
}

var _ submitter = (*producer.Producer)(nil)

// publisher sends one message and returns once it is stored.
type publisher interface {
	Publish(ctx context.Context, data []byte, attrs map[string]string) error
}

// Defaults fill in what a request leaves out.
type Defaults struct {
	Codec     codec.Codec
	Level     int
	ChunkSize int64
	Method    string
}

// Options configure a Server.
type Options struct {
	Defaults Defaults
	// SourceRoots are the directories requests may read from
	// (FERRY_SOURCE_ROOTS); with none, every request is refused.
	SourceRoots []string
	// Buckets, when set, are the only buckets requests may write to
	// (FERRY_BUCKETS).
	Buckets []string
	// IDSecret is FERRY_IDEMPOTENCY_SECRET (message.KeyedTransferID).
	IDSecret string
	Log      *slog.Logger
}

// Server runs transfer requests. It is safe for concurrent use.
type Server struct {
	p    submitter
	done publisher
	o    Options
	log  *slog.Logger

	handler queue.Handler // handle in its middleware, made once

	// The stall watch (Stalled): requests in flight, walk progress
	// reports, and the progress last seen and when it last changed.
	inflight, walked atomic.Int64
	mu               sync.Mutex
	lastProgress     int64
	lastChange       time.Time
}

// progresser is the producer's progress counters (producer.Progress).
type progresser interface {
	Progress() (read, compressed int64)
}

// Stalled reports, at now, whether the requests in flight have made no
// progress (files walked, bytes read or compressed) for longer than after:
// an error naming how many and for how long, for /readyz. A read that
// hangs in the kernel (a dead NFS server) shows here.
func (s *Server) Stalled(now time.Time, after time.Duration) error {
	progress := s.walked.Load()
	if pp, ok := s.p.(progresser); ok {
		r, c := pp.Progress()
		progress += r + c
	}
	n := s.inflight.Load()
	s.mu.Lock()
	defer s.mu.Unlock()
	if n == 0 || progress != s.lastProgress || s.lastChange.IsZero() {
		s.lastProgress, s.lastChange = progress, now
		return nil
	}
	if quiet := now.Sub(s.lastChange); quiet > after {
		return fmt.Errorf("%d requests in flight walked, read and compressed nothing for %v (FERRY_REQUEST_STALL=%v): a source that does not answer?",
			n, quiet.Round(time.Second), after)
	}
	return nil
}

// New returns a Server that runs requests on p and publishes the done events
// of requests that cannot start to done.
func New(p submitter, done publisher, o Options) *Server {
	s := &Server{p: p, done: done, o: o, log: logging.OrDiscard(o.Log)}
	s.handler = queue.Chain(s.handle, queue.Recover(s.log))
	return s
}

// maxDestination bounds the destination a rejection echoes: gs://, the
// longest bucket name and the longest object name GCS allows.
const maxDestination = 5 + 222 + 1 + 1024

var unsafeID = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// Handle runs one request message to the point where the fleet takes over;
// a panic in it is recovered (queue.Recover), and the request comes back.
func (s *Server) Handle(ctx context.Context, m queue.Message) error {
	return s.handler(ctx, m)
}

func (s *Server) handle(ctx context.Context, m queue.Message) error {
	s.inflight.Add(1)
	defer s.inflight.Add(-1)
	var r message.Request
	if err := message.Decode(m.Data, &r); err != nil {
		// Nothing in it can be trusted; the message id names the answer.
		err = fmt.Errorf("request message %s: %w", m.ID, err)
		return s.reject(ctx, "m"+unsafeID.ReplaceAllString(m.ID, ""), "", err)
	}
	key := r.IdempotencyKey
	if key == "" {
		// A redelivery of the same message is the same transfer.
		key = "pubsub-message:" + m.ID
	}
	req := producer.Request{
		TransferID: message.KeyedTransferID(s.o.IDSecret, key), Sources: r.Sources, Destination: r.Destination,
		Codec: codec.Codec(r.Codec), Level: r.Level, ChunkSize: r.ChunkSize, Method: r.Method,
		Labels: r.Labels, IdempotencyKey: key, Overwrite: r.Overwrite, SourceRoots: s.o.SourceRoots,
		NoClobber: r.NoClobber, SkipUnchanged: r.SkipUnchanged, Checksum: r.Checksum, NoAppend: r.NoAppend, Pool: r.Pool,
	}
	if r.EndKeySHA256 != "" && !message.ValidKeyHex(r.EndKeySHA256) {
		return s.reject(ctx, req.TransferID, r.Destination, fmt.Errorf("end_key_sha256 %.80q is not a SHA-256 in lowercase hex (64 digits)", r.EndKeySHA256))
	}
	req.EndKeySHA256 = r.EndKeySHA256
	sel, err := selection(r)
	if err != nil {
		return s.reject(ctx, req.TransferID, r.Destination, err)
	}
	req.Selection = sel
	if req.Convert, err = plan.ParseConvert(r.Convert, r.ConvertMatch, r.Schema, r.ParquetCompression); err != nil {
		return s.reject(ctx, req.TransferID, r.Destination, err)
	}
	if err := plan.SetBadRows(req.Convert, r.BadRows); err != nil {
		return s.reject(ctx, req.TransferID, r.Destination, err)
	}
	if err := plan.SetText(req.Convert, r.Encoding, r.NullMarkers, r.Quote); err != nil {
		return s.reject(ctx, req.TransferID, r.Destination, err)
	}
	if err := plan.SetInferRows(req.Convert, r.InferRows); err != nil {
		return s.reject(ctx, req.TransferID, r.Destination, err)
	}
	if r.BQTable != "" || r.BQWrite != "" {
		if req.Load, err = message.ParseLoad(r.BQTable, r.BQWrite); err != nil {
			return s.reject(ctx, req.TransferID, r.Destination, err)
		}
	}
	req.Selection.Found = func(int, int64) { s.walked.Add(1) }
	if err := s.allowed(req); err != nil {
		return s.reject(ctx, req.TransferID, r.Destination, err)
	}
	if req.Codec == "" {
		req.Codec = s.o.Defaults.Codec
		if req.Level == 0 {
			req.Level = s.o.Defaults.Level
		}
	}
	if req.ChunkSize == 0 {
		req.ChunkSize = s.o.Defaults.ChunkSize
	}
	if req.Method == "" {
		req.Method = s.o.Defaults.Method
	}
	log := s.log.With("transfer_id", req.TransferID, "message_id", m.ID)
	_, err = s.p.Submit(ctx, req)
	var already *producer.AlreadyDoneError
	var input *producer.InputError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &already):
		// Asked again: answer again.
		log.Info("request for a transfer that already ended; its done event is published again", "status", already.Done.Status)
		return s.done.Publish(ctx, message.Encode(already.Done), doneAttrs(already.Done))
	case errors.As(err, &input):
		return s.reject(ctx, req.TransferID, r.Destination, err)
	case ctx.Err() != nil:
		return err // shutting down: let the request come back
	default:
		// Submit has published the failed event; the merger ends the
		// transfer and answers. Retrying would find it ended.
		return queue.Permanent(err)
	}
}

// selection decodes a request's symlinks, skip_unreadable, filters and
// files fields.
func selection(r message.Request) (plan.Selection, error) {
	links, err := plan.ParseSymlinks(r.Symlinks)
	if err != nil {
		return plan.Selection{}, err
	}
	sel := plan.Selection{Symlinks: links, SkipUnreadable: r.SkipUnreadable, FilesFrom: r.Files}
	if len(r.Filters) > plan.MaxFilters {
		return sel, fmt.Errorf("%d filters; %d at most", len(r.Filters), plan.MaxFilters)
	}
	for _, rule := range r.Filters {
		f, err := plan.ParseFilter(rule)
		if err != nil {
			return sel, err
		}
		sel.Filters = append(sel.Filters, f)
	}
	return sel, nil
}

// allowed checks what configuration decides before anything is read: that
// sources may be read at all, and the destination bucket. The sources
// themselves are confined by the plan, which resolves every file.
func (s *Server) allowed(req producer.Request) error {
	if len(s.o.SourceRoots) == 0 {
		return errors.New("producer serve has no FERRY_SOURCE_ROOTS, so it reads no sources: set FERRY_SOURCE_ROOTS to the directories requests may read from")
	}
	if len(s.o.Buckets) > 0 {
		d, err := plan.ParseDestination(req.Destination)
		if err != nil {
			return err
		}
		if !slices.Contains(s.o.Buckets, d.Bucket) {
			return fmt.Errorf("destination %s: bucket %s is not one ferry may write to (FERRY_BUCKETS=%s)", d, d.Bucket, strings.Join(s.o.Buckets, ","))
		}
	}
	return nil
}

// reject answers a request that cannot start with a failed done event, and
// reports a permanent error so the message is acked (and dead-lettered).
func (s *Server) reject(ctx context.Context, tid, dest string, cause error) error {
	now := time.Now().UTC()
	// The cause may echo the request (a path, a field name) and the
	// destination is the request's own: both are cut to a bounded size,
	// so the answer always fits a message.
	d := message.Done{V: message.Version, TransferID: tid, Status: message.StatusFailed,
		Error:       message.Truncate(cause.Error(), message.MaxErrorBytes),
		Destination: message.Truncate(dest, maxDestination), StartedAt: now, FinishedAt: now}
	cause = errors.New(d.Error)
	if err := s.done.Publish(ctx, message.Encode(d), doneAttrs(d)); err != nil {
		return fmt.Errorf("answer rejected request (%v): %w", cause, err)
	}
	s.log.Warn("request rejected", "transfer_id", tid, "err", cause)
	return queue.Permanent(cause)
}

func doneAttrs(d message.Done) map[string]string {
	return map[string]string{"transfer_id": d.TransferID, "status": d.Status}
}
