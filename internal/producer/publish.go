package producer

import (
	"context"
	"fmt"

	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/metrics"
	"github.com/ferry-dev/ferry/internal/ratelimit"
	"github.com/ferry-dev/ferry/internal/spool"
)

// The publish stage: a chunk or bundle's parts become one chunk message, its
// payload inline (always with FERRY_TRANSPORT=pubsub; up to FERRY_INLINE_MAX
// with the spool) or in one spool file, and a pool of publishers sends the
// messages, no faster than FERRY_MAX_RATE allows. Messages waiting to be
// published are bounded in bytes.

// outMsg is a chunk message ready to publish.
type outMsg struct {
	data   []byte
	tid    string
	where  string
	weight int64 // what it holds of the message budget
	// waited: writing its spool file waited for room (package level).
	waited bool
}

// packer builds chunk messages for one transfer.
type packer struct {
	p         *Producer
	tid       string
	run       string
	bucket    string
	codec     string
	overwrite bool
	key       string // the run's chunk key (message.Keys.Chunks)
	segs      [][]byte
}

// pack turns parts into a chunk message; a spooled payload is written before
// pack returns.
func (k *packer) pack(ctx context.Context, parts []encodedPart) (outMsg, error) {
	c := message.Chunk{V: message.Version, TransferID: k.tid, Bucket: k.bucket, Codec: k.codec, Overwrite: k.overwrite,
		Run: k.run, Key: k.key, Parts: make([]message.Part, len(parts))}
	var wire int64
	k.segs = k.segs[:0]
	for i := range parts {
		c.Parts[i] = parts[i].part
		wire += parts[i].part.WireSize
		k.segs = append(k.segs, parts[i].segs...)
	}
	where := fmt.Sprintf("chunk %d of %s", parts[0].index, parts[0].part.Path)
	if len(parts) > 1 {
		where = fmt.Sprintf("bundle of %d files from %s to %s", len(parts), parts[0].part.Path, parts[len(parts)-1].part.Path)
	}
	var data []byte
	var waited bool
	var err error
	if k.p.pubsub() || wire <= k.p.o.InlineMax {
		data = message.EncodeChunk(c, k.segs)
	} else {
		// The spool file's name is relative to the spool directory: a
		// worker resolves it inside its own.
		c.Spool = spool.Name(k.tid, parts[0].file, parts[0].index)
		if waited, err = k.p.spool.Write(ctx, c.Spool, k.segs, wire); err != nil {
			return outMsg{}, fmt.Errorf("spool %s: %w", where, err)
		}
		data = message.EncodeChunk(c, nil)
	}
	if int64(len(data)) > k.p.o.MessageMax {
		// The plan and the bundler size chunks so this cannot happen.
		return outMsg{}, fmt.Errorf("%s: chunk message of %d bytes exceeds FERRY_MESSAGE_MAX=%d", where, len(data), k.p.o.MessageMax)
	}
	metrics.BytesCompressed.Add(float64(wire))
	return outMsg{data: data, tid: k.tid, where: where, waited: waited}, nil
}

// publishStage publishes messages from out until it is closed. Once the
// pipeline has failed, it drops what is left instead of publishing it.
func (p *Producer) publishStage(ctx context.Context, chunks publisher, out <-chan outMsg, ob *outbox) error {
	for msg := range out {
		err := ctx.Err()
		if err == nil && p.o.limiter != nil {
			err = ratelimit.Wait(ctx, p.o.limiter, len(msg.data))
		}
		if err == nil {
			err = chunks.Publish(ctx, msg.data, map[string]string{"transfer_id": msg.tid})
		}
		ob.held.Add(-msg.weight)
		ob.mem.Release(msg.weight)
		if ctx.Err() != nil {
			continue
		}
		if err != nil {
			return fmt.Errorf("publish %s: %w", msg.where, err)
		}
		metrics.ChunksPublished.Inc()
	}
	return nil
}
