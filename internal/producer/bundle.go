package producer

import (
	"math"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/plan"
	"github.com/ferry-dev/ferry/internal/spool"
)

// The bundle stage: small files travel together. A file of one chunk of at
// most FERRY_BUNDLE_MAX raw bytes joins the open bundle, which is one chunk
// message of up to FERRY_BUNDLE_MAX raw bytes and message.MaxParts parts;
// each part is still its own final object with its own CRC32C and metadata.
// The read stage asks a bundler whether the next file fits, so a bundle's
// message never outgrows its limits: the header (parts described with the
// widest numbers they can hold) stays within message.MaxHeader, and header
// plus the payload it may carry inline (every part's worst case with
// FERRY_TRANSPORT=pubsub; FERRY_INLINE_MAX with the spool) within
// FERRY_MESSAGE_MAX.

// bundler decides which files travel together. Not safe for concurrent use.
type bundler struct {
	rawMax   int64
	maxParts int
	room     int64 // header and inline payload one message may hold
	inline   bool  // the payload always travels in the message
	inlineAt int64 // otherwise it does up to this size
	tid      string
	c        codec.Codec
	fixed    int64 // header bytes beside the parts

	n                  int
	raw, header, bound int64

	// The last file partHeader measured: takes, fits and add ask about
	// the same file in turn, and measuring encodes its part: without it a
	// large tree's headers were encoded three times over.
	lastFile   *plan.File
	lastFI     int
	lastHeader int64
}

func newBundler(p *Producer, pl *plan.Plan, tid string, overwrite bool) *bundler {
	if p.o.BundleMax <= 0 {
		return nil
	}
	b := &bundler{rawMax: p.o.BundleMax, maxParts: message.MaxParts, room: p.o.MessageMax - message.HeaderOverhead,
		inline: p.pubsub(), inlineAt: p.o.InlineMax, tid: tid, c: pl.Codec}
	c := message.Chunk{V: message.Version, TransferID: tid, Bucket: pl.Dest.Bucket, Codec: string(pl.Codec),
		Overwrite: overwrite, Run: message.NewRun(), Spool: spool.Name(tid, math.MaxInt32, 99999), Key: message.NewEndKey()}
	b.fixed = int64(len(message.Encode(c))) + 16
	b.reset()
	return b
}

// takes reports whether file f travels in a bundle.
func (b *bundler) takes(fi int, f *plan.File) bool {
	if b == nil || f.Stream != nil || f.Chunks != 1 || f.Size > b.rawMax {
		return false
	}
	return b.fitsWith(0, 0, b.fixed, 0, fi, f)
}

// fits reports whether f fits the open bundle.
func (b *bundler) fits(fi int, f *plan.File) bool {
	return b.fitsWith(b.n, b.raw, b.header, b.bound, fi, f)
}

func (b *bundler) fitsWith(n int, raw, header, bound int64, fi int, f *plan.File) bool {
	if n+1 > b.maxParts || raw+f.Size > b.rawMax {
		return false
	}
	header += b.partHeader(fi, f)
	if header > message.MaxHeader {
		return false
	}
	payload := min(bound+plan.WireBound(b.c, f.Size), b.inlineAt)
	if b.inline {
		payload = bound + plan.WireBound(b.c, f.Size)
	}
	return header+payload <= b.room
}

// add puts f into the open bundle; call fits first.
func (b *bundler) add(fi int, f *plan.File) {
	b.n++
	b.raw += f.Size
	b.header += b.partHeader(fi, f)
	b.bound += plan.WireBound(b.c, f.Size)
}

// reset starts a new bundle.
func (b *bundler) reset() { b.n, b.raw, b.header, b.bound = 0, 0, b.fixed, 0 }

// partHeader bounds the header bytes f's part takes: the part as the
// compress stage writes it, with its CRC32Cs and wire size at their widest.
func (b *bundler) partHeader(fi int, f *plan.File) int64 {
	if f == b.lastFile && fi == b.lastFI {
		return b.lastHeader
	}
	p := newPart(b.tid, b.c, fi, f, 0, 1, 0, f.Size, math.MaxUint32)
	p.WireSize, p.WireCRC32C = plan.WireBound(b.c, f.Size), math.MaxUint32
	b.lastFile, b.lastFI, b.lastHeader = f, fi, int64(len(message.Encode(p)))+1 // and a comma
	return b.lastHeader
}
