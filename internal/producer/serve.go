package producer

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/queue"
)

// Defaults fill in what a request leaves out.
type Defaults struct {
	Codec     codec.Codec
	Level     int
	ChunkSize int64
	Method    string
}

// Server runs transfer requests that arrive on the requests topic: its
// Handle is the queue.Handler of that subscription. Every request ends with
// exactly one message on the done topic: the merger's, or, for a request that
// cannot start, the server's own.
type Server struct {
	p        *Producer
	done     publisher
	defaults Defaults
}

// NewServer returns a Server that runs requests on p and publishes the done
// events of requests that cannot start to done.
func NewServer(p *Producer, done publisher, d Defaults) *Server {
	return &Server{p: p, done: done, defaults: d}
}

var unsafeID = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// Handle runs one request message to the point where the fleet takes over.
func (s *Server) Handle(ctx context.Context, m queue.Message) error {
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
	req := Request{
		TransferID: NewTransferID(key), Sources: r.Sources, Destination: r.Destination,
		Codec: codec.Codec(r.Codec), Level: r.Level, ChunkSize: r.ChunkSize, Method: r.Method,
		Labels: r.Labels, IdempotencyKey: key, Overwrite: r.Overwrite,
	}
	if req.Codec == "" {
		req.Codec = s.defaults.Codec
		if req.Level == 0 {
			req.Level = s.defaults.Level
		}
	}
	if req.ChunkSize == 0 {
		req.ChunkSize = s.defaults.ChunkSize
	}
	if req.Method == "" {
		req.Method = s.defaults.Method
	}
	log := s.p.o.Log.With("transfer_id", req.TransferID, "message_id", m.ID)
	_, err := s.p.Submit(ctx, req)
	var already *AlreadyDoneError
	var input *InputError
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

// reject answers a request that cannot start with a failed done event, and
// reports a permanent error so the message is acked (and dead-lettered).
func (s *Server) reject(ctx context.Context, tid, dest string, cause error) error {
	now := time.Now().UTC()
	d := message.Done{V: message.Version, TransferID: tid, Status: message.StatusFailed, Error: cause.Error(),
		Destination: dest, StartedAt: now, FinishedAt: now}
	if err := s.done.Publish(ctx, message.Encode(d), doneAttrs(d)); err != nil {
		return fmt.Errorf("answer rejected request (%v): %w", cause, err)
	}
	s.p.o.Log.Warn("request rejected", "transfer_id", tid, "err", cause)
	return queue.Permanent(cause)
}

func doneAttrs(d message.Done) map[string]string {
	return map[string]string{"transfer_id": d.TransferID, "status": d.Status}
}
