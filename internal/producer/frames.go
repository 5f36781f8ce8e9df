package producer

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/plan"
	"github.com/ferry-dev/ferry/internal/seektable"
	"github.com/ferry-dev/ferry/internal/table"
)

// The compress stage. A job's pieces are cut into frames of
// codec.FrameSize, and a pool of one encoder per core compresses them:
// all cores keep working even when a file's last chunk is the only one
// left, which a frame per chunk would leave to one core. Each encoder
// goroutine also computes the CRC32C of a frame's raw and wire bytes while
// they are in its cache; a chunk's CRC32Cs are combined from its frames'.

// frame is one compressed frame.
type frame struct {
	wire            []byte
	raw             int
	rawCRC, wireCRC uint32
}

type frameJob struct {
	src   []byte
	level int
	out   *frame
	done  chan<- error
}

// frameEncoders are one goroutine's encoders of a codec, one per level: an
// adaptive transfer moves between levels (package level), and each zstd
// level is an encoder of its own. All are made at the start, so that the
// memory they hold does not depend on how far a transfer's level moved.
type frameEncoders map[int]codec.Encoder

func newFrameEncoders(c codec.Codec, levels []int) (frameEncoders, error) {
	e := frameEncoders{}
	var zeros, out []byte
	if len(levels) > 1 {
		zeros = make([]byte, 128<<10) // a block: enough for the tables
	}
	for _, l := range levels {
		enc, err := codec.NewEncoder(c, l)
		if err != nil {
			return nil, err
		}
		if zeros != nil {
			// An encoder allocates its tables on first use: a
			// frame now, so that what the transfer holds does not
			// grow as its level moves.
			if out, err = enc.Encode(out[:0], zeros); err != nil {
				return nil, err
			}
		}
		e[l] = enc
	}
	return e, nil
}

// runFrameEncoder compresses frames with encs until jobs is closed. Every
// job is answered on its done channel, also when its context is cancelled,
// so a chunkEncoder waiting for its frames always gets them back; the
// pipeline closes jobs once no chunkEncoder is left.
func runFrameEncoder(c codec.Codec, encs frameEncoders, jobs <-chan frameJob) {
	for j := range jobs {
		enc, ok := encs[j.level]
		if !ok {
			j.done <- fmt.Errorf("no %s encoder of level %d", c, j.level)
			continue
		}
		dst := j.out.wire[:0]
		if need := c.Bound(int64(len(j.src))); int64(cap(dst)) < need || int64(cap(dst)) > keepFrameBuffer(need) {
			// Room for the worst case up front: an encoder that
			// appends into a buffer too small copies it as it grows.
			// A slot's buffer much larger than its frame needs is
			// let go: kept, each of a bundle's up to message.MaxParts
			// slots would hold the largest piece that ever landed at
			// its position, and their sum grew with the transfer, not
			// with the chunk in flight (hundreds of MiB on a large
			// tree).
			dst = make([]byte, 0, need)
		}
		out, err := enc.Encode(dst, j.src)
		*j.out = frame{wire: out, raw: len(j.src), rawCRC: crc32c.Checksum(j.src), wireCRC: crc32c.Checksum(out)}
		j.done <- err
	}
}

// keepFrameBuffer is the largest buffer a frame slot keeps for a frame
// that needs need bytes: twice that, and small buffers always, so that
// slots whose frames vary a little are not reallocated every time, while
// what all slots hold stays within twice the frames in flight.
func keepFrameBuffer(need int64) int64 { return 2*need + 64<<10 }

// chunkEncoder splits a job's pieces into frames and has the shared encoders
// compress them all in parallel. One per compress goroutine.
type chunkEncoder struct {
	ctx    context.Context
	jobs   chan<- frameJob
	frames []frame
	done   chan error
	out    [][]frame
}

func newChunkEncoder(ctx context.Context, jobs chan<- frameJob) *chunkEncoder {
	return &chunkEncoder{ctx: ctx, jobs: jobs, done: make(chan error, 1)}
}

// Encode compresses each piece at level into consecutive frames and
// returns them per piece. The result is valid until the next call.
func (e *chunkEncoder) Encode(pieces [][]byte, level int) ([][]frame, error) {
	n := 0
	for _, p := range pieces {
		n += plan.Frames(int64(len(p)))
	}
	for len(e.frames) < n {
		e.frames = append(e.frames, frame{})
	}
	if cap(e.done) < n {
		e.done = make(chan error, n)
	}
	e.out = e.out[:0]
	sent, k := 0, 0
	var err error
	for _, p := range pieces {
		first := k
		for off := 0; err == nil && (off < len(p) || off == 0); off += codec.FrameSize {
			select {
			case e.jobs <- frameJob{src: p[off:min(off+codec.FrameSize, len(p))], level: level, out: &e.frames[k], done: e.done}:
				sent++
				k++
			case <-e.ctx.Done():
				err = e.ctx.Err()
			}
			if len(p) == 0 {
				break
			}
		}
		e.out = append(e.out, e.frames[first:k])
	}
	for ; sent > 0; sent-- { // every frame sent must come back before reuse
		if ferr := <-e.done; ferr != nil && err == nil {
			err = ferr
		}
	}
	if err != nil {
		return nil, err
	}
	return e.out, nil
}

// encodedPart is one piece compressed: the part a chunk message announces
// and its wire bytes.
type encodedPart struct {
	file, index int
	part        message.Part
	// segs are the wire bytes in order: the frames, then, for a one-chunk
	// zstd file, its seek table. They alias the encoder's buffers.
	segs [][]byte
	// seek lists the frames (zstd), for the manifest.
	seek []seektable.Frame
	// table is set for a Parquet part of a converted source.
	table *message.TablePart
}

// compressor is one goroutine of the compress stage.
type compressor struct {
	enc    *chunkEncoder
	pl     *plan.Plan
	tid    string
	parts  []encodedPart
	srcs   [][]byte
	tables [][]byte
	seek   []seektable.Frame
	// cv converts the parts of the source whose schema is cvSchema.
	cv       *table.Converter
	cvSchema *table.Field
	cvPart   plan.Part
	// rejected counts the records the transfer's conversions left out,
	// against its --bad-rows.
	rejected *atomic.Int64
}

// compress turns a job into its parts, compressed at level. The result is
// valid until the next call; it holds no reference to the job's raw buffer.
func (c *compressor) compress(j job, level int) ([]encodedPart, error) {
	if pc := j.pieces[0]; pc.f.Part != nil {
		return c.convert(pc) // a part travels alone
	}
	c.srcs = c.srcs[:0]
	for _, pc := range j.pieces {
		c.srcs = append(c.srcs, pc.raw)
	}
	frames, err := c.enc.Encode(c.srcs, level)
	if err != nil {
		pc := j.pieces[0]
		return nil, fmt.Errorf("compress chunk %d of %s: %w", pc.index, pc.f.Path, err)
	}
	c.parts = c.parts[:0]
	for len(c.tables) < len(j.pieces) {
		c.tables = append(c.tables, nil)
	}
	for i, pc := range j.pieces {
		f := pc.f
		ep := encodedPart{file: pc.file, index: pc.index}
		var raw, wire uint32
		var wireSize int64
		zstd := c.pl.Codec == codec.Zstd
		if zstd && pc.chunks > 1 {
			ep.seek = make([]seektable.Frame, 0, len(frames[i])) // kept in the manifest
		} else if zstd {
			ep.seek = c.seek[:0]
		}
		for _, fr := range frames[i] {
			raw = crc32c.Combine(raw, fr.rawCRC, int64(fr.raw))
			wire = crc32c.Combine(wire, fr.wireCRC, int64(len(fr.wire)))
			wireSize += int64(len(fr.wire))
			ep.segs = append(ep.segs, fr.wire)
			if zstd {
				ep.seek = append(ep.seek, seektable.Frame{Wire: uint32(len(fr.wire)), Raw: uint32(fr.raw)})
			}
		}
		if zstd && pc.chunks == 1 {
			// A one-chunk file is its final object: its payload ends
			// with its seek table (a skippable frame zstd -d passes
			// over). A composed file gets its table from the merger.
			c.tables[i] = seektable.Append(c.tables[i][:0], ep.seek)
			c.seek = ep.seek
			t := c.tables[i]
			wire = crc32c.Combine(wire, crc32c.Checksum(t), int64(len(t)))
			wireSize += int64(len(t))
			ep.segs = append(ep.segs, t)
		}
		ep.part = newPart(c.tid, c.pl.Codec, pc.file, f, pc.index, pc.chunks, pc.offset, int64(len(pc.raw)), raw)
		ep.part.WireSize, ep.part.WireCRC32C = wireSize, wire
		c.parts = append(c.parts, ep)
	}
	return c.parts, nil
}

// newPart is the part a chunk message announces for chunk index of file fi,
// of chunks chunks; the wire size and CRC32C are the caller's to fill in.
func newPart(tid string, c codec.Codec, fi int, f *plan.File, index, chunks int, offset, rawSize int64, rawCRC uint32) message.Part {
	p := message.Part{File: fi, Path: f.Rel, Index: index, Chunks: chunks, RawOffset: offset, RawSize: rawSize, RawCRC32C: rawCRC}
	if chunks == 1 {
		// A file of one chunk is written straight to its final name,
		// or, in an overwrite, to its staging object with the final
		// object's metadata, which the merger's compose keeps.
		p.Final, p.Object, p.ContentType = !f.Staged, f.Object, codec.ContentTypeOf(c, f.Object)
		if f.Staged {
			p.Object = message.ChunkObject(tid, fi, 0)
		}
		p.Metadata = message.FinalMetadata(tid, rawSize, rawCRC, string(c))
		if f.Stream == nil {
			p.Metadata[message.MetaMtime] = message.FormatMtime(time.Unix(0, f.Mod))
			message.PosixMetadata(p.Metadata, posixOf(f), time.Unix(0, f.Mod))
		}
	} else {
		p.Object = message.ChunkObject(tid, fi, index)
	}
	return p
}

// convert turns a part of a converted source into its Parquet object, which
// travels as it is (codec none): what a restore gives back is the Parquet
// file. A record the schema does not take fails the source (SourceError)
// with its file, line and column.
func (c *compressor) convert(pc piece) ([]encodedPart, error) {
	f, pt := pc.f, pc.f.Part
	if c.cv == nil || c.cvSchema != &pt.Schema[0] || c.cvPart.Comma != pt.Comma || c.cvPart.Compression != pt.Compression || c.cvPart.BadRows != pt.BadRows ||
		!slices.Equal(c.cvPart.Constants, pt.Constants) || c.cvPart.Inferred != pt.Inferred || !c.cvPart.Text.Equal(pt.Text) {
		cv, err := table.NewConverter(pt.Schema, table.Options{Comma: pt.Comma, Compression: pt.Compression, BadRows: pt.BadRows, Constants: pt.Constants,
			Inferred: pt.Inferred, Text: pt.Text})
		if err != nil {
			return nil, &SourceError{fmt.Errorf("source %s: %w", f.Path, err)}
		}
		c.cv, c.cvSchema, c.cvPart = cv, &pt.Schema[0], *pt
	}
	data, rows, err := c.cv.Convert(pc.raw, f.Path, pt.Line)
	if err != nil {
		return nil, &SourceError{err}
	}
	var rejects []message.Reject
	if n := len(c.cv.Rejects); n > 0 {
		if c.rejected == nil || c.rejected.Add(int64(n)) > int64(pt.BadRows) {
			// The part alone is within it, the transfer's parts
			// together are not: named by this part's last reject.
			return nil, &SourceError{fmt.Errorf("more than %d bad records in the transfer (--bad-rows): %w", pt.BadRows, c.cv.Rejects[n-1].Err)}
		}
		rejects = make([]message.Reject, n)
		for i, rj := range c.cv.Rejects {
			e := rj.Err
			rejects[i] = message.Reject{Source: f.Rel, Line: e.Line, Column: e.Column, Name: e.Name, Error: e.Err.Error(),
				Record: rj.Record, Truncated: rj.Truncated}
		}
	}
	crc := crc32c.Checksum(data)
	size := int64(len(data))
	ep := encodedPart{file: pc.file, segs: [][]byte{data}, table: &message.TablePart{
		Source: f.Rel, Part: pt.Index, Parts: pt.Count, Offset: pt.Offset, Size: pt.Size, Line: pt.Line, Rows: rows, Rejects: rejects}}
	if pt.Index == 0 {
		if ep.table.Schema, err = pt.TableSchema().MarshalJSON(); err != nil {
			return nil, err
		}
	}
	ep.part = newPart(c.tid, codec.None, pc.file, f, 0, 1, 0, size, crc)
	ep.part.ContentType = message.ParquetContentType
	ep.part.Metadata[message.MetaTableSource] = f.Rel
	ep.part.Metadata[message.MetaTableRange] = fmt.Sprintf("%d+%d", pt.Offset, pt.Size)
	ep.part.Metadata[message.MetaTableRows] = strconv.FormatInt(rows, 10)
	ep.part.Metadata[message.MetaTableFileSize] = strconv.FormatInt(pt.FileSize, 10)
	ep.part.Metadata[message.MetaTableRangeCRC] = fmt.Sprintf("%08x", crc32c.Checksum(pc.raw))
	ep.part.Metadata[message.MetaTableOptions] = pt.OptionsKey()
	ep.part.WireSize, ep.part.WireCRC32C = size, crc
	c.parts = append(c.parts[:0], ep)
	return c.parts, nil
}
