package plan

import (
	"fmt"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/seektable"
)

// DefaultMaxChunks keeps every file within the 1024 components older GCS
// documents allow a composite (1000 chunks and the seek table). Current GCS
// documents no such limit, so FERRY_MAX_CHUNKS may raise it.
const DefaultMaxChunks = 1000

// MaxChunkSize is the largest chunk: what one worker holds and uploads in
// one request.
const MaxChunkSize = 1 << 30

// Limits bound the chunks of every file.
type Limits struct {
	// MaxChunks is the most chunks one file may have (FERRY_MAX_CHUNKS);
	// 0 means DefaultMaxChunks.
	MaxChunks int
	// MessageMax, when set, caps the chunk size so that a compressed chunk
	// always fits a chunk message of this many bytes (FERRY_TRANSPORT=pubsub
	// with FERRY_MESSAGE_MAX): see MessageChunkCap.
	MessageMax int64
	// StreamMax, when set, caps the chunks of a stream (standard input),
	// whose chunks must all fit the producer's memory: see Stream.
	StreamMax int64
}

func (l Limits) maxChunks() int {
	if l.MaxChunks <= 0 {
		return DefaultMaxChunks
	}
	return l.MaxChunks
}

// ChunkSize returns the chunk size of a file of size bytes compressed with c,
// given the requested chunk size: capped so that a chunk fits a message when
// l.MessageMax is set, then grown in whole MiB (never past the cap) until the
// file needs at most MaxChunks chunks. A file that needs more even at the cap
// is an error that names its size, the cap and the variable to raise.
func ChunkSize(size, chunk int64, c codec.Codec, l Limits) (int64, error) {
	limit, note := int64(MaxChunkSize), ""
	if l.MessageMax > 0 {
		limit = MessageChunkCap(c, l.MessageMax)
		note = fmt.Sprintf(" (FERRY_TRANSPORT=pubsub: a compressed chunk must fit FERRY_MESSAGE_MAX=%d)", l.MessageMax)
	}
	chunk = min(chunk, limit)
	n := int64(l.maxChunks())
	if need := (size + n - 1) / n; need > chunk {
		const mib = 1 << 20
		chunk = min(limit, (need+mib-1)/mib*mib)
	}
	if k := ChunkCount(size, chunk); k > int(n) {
		return 0, fmt.Errorf("%d bytes need %d chunks of at most %d bytes%s, more than FERRY_MAX_CHUNKS=%d allows; raise FERRY_MAX_CHUNKS to at least %d",
			size, k, chunk, note, n, k)
	}
	return chunk, nil
}

// ChunkCount is the number of chunks of a file: a 0-byte file is one empty
// chunk, so that it gets an object too.
func ChunkCount(size, chunk int64) int {
	if size == 0 {
		return 1
	}
	return int((size + chunk - 1) / chunk)
}

// Frames is the number of frames a chunk of raw bytes is compressed into.
func Frames(raw int64) int {
	return max(1, int((raw+codec.FrameSize-1)/codec.FrameSize))
}

// WireBound is the most wire bytes a chunk of raw bytes can become with c:
// every frame's worst case (incompressible data) and, for zstd, a seek table
// listing every frame (a one-chunk file's payload ends with one).
func WireBound(c codec.Codec, raw int64) int64 {
	n := Frames(raw)
	full := raw / codec.FrameSize
	b := full * c.Bound(codec.FrameSize)
	if rest := raw - full*codec.FrameSize; rest > 0 || full == 0 {
		b += c.Bound(rest)
	}
	if c == codec.Zstd {
		b += int64(seektable.Size(n))
	}
	return b
}

// HeaderReserve is what a chunk message's header may take beside a
// one-part payload: the envelope, and a part whose object name and path are
// both 1024 bytes of characters JSON escapes six-fold, with metadata.
const HeaderReserve = 16 << 10

// chunkQuantum is the unit MessageChunkCap rounds down to.
const chunkQuantum = 64 << 10

// MessageChunkCap is the largest chunk size, a multiple of 64 KiB, whose
// compressed bytes always fit a chunk message of messageMax bytes with
// FERRY_TRANSPORT=pubsub: header reserve, envelope and the codec's worst
// case for incompressible data (with zstd's seek table) included. With the
// default FERRY_MESSAGE_MAX of 9 MiB and zstd that is 9,371,648 bytes
// (8.9375 MiB), so with FERRY_MAX_CHUNKS=1000 the largest file is about
// 9.37 GB; a larger file fails at planning unless FERRY_MAX_CHUNKS is raised.
func MessageChunkCap(c codec.Codec, messageMax int64) int64 {
	room := messageMax - HeaderReserve - message.HeaderOverhead
	size := room / chunkQuantum * chunkQuantum
	for size > chunkQuantum && WireBound(c, size) > room {
		size -= chunkQuantum
	}
	return max(size, chunkQuantum)
}
