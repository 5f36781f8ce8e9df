// Package producer turns a transfer request into work for the fleet: it
// walks the sources, cuts every file into chunks, compresses each chunk as an
// independent frame on all cores, puts it in the spool (or inline in the
// message when small), publishes one message per chunk, and finally writes the
// sealed manifest and announces it. Memory is bounded by the chunk buffers in
// flight, never by file size or file count.
package producer

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/metrics"
)

// MaxChunksPerFile keeps every file within the 1024 components older GCS
// documents allow a composite; the chunk size grows to respect it.
const MaxChunksPerFile = 1000

// Request is what a batch system or a user asks for.
type Request struct {
	// TransferID, when empty, is derived from IdempotencyKey, or random.
	TransferID     string
	Sources        []string
	Destination    string
	Codec          codec.Codec
	Level          int // 0: the codec's default
	ChunkSize      int64
	Method         string
	Labels         map[string]string
	IdempotencyKey string
	Overwrite      bool
}

// NewTransferID returns the id of a transfer: derived from the idempotency key
// when there is one, so the same key always names the same transfer, else
// time-ordered and random.
func NewTransferID(idempotencyKey string) string {
	if idempotencyKey != "" {
		sum := sha256.Sum256([]byte(idempotencyKey))
		return "k" + hex.EncodeToString(sum[:10])
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "t" + time.Now().UTC().Format("20060102t150405") + "-" + hex.EncodeToString(b[:])
}

// objectStore is what the producer needs of GCS.
type objectStore interface {
	BucketExists(ctx context.Context, bucket string) error
	PutSmall(ctx context.Context, bucket, name string, data []byte, ifAbsent bool, contentType string) (gcs.Attrs, error)
	ReadAll(ctx context.Context, bucket, name string) ([]byte, error)
}

var _ objectStore = (*gcs.Store)(nil)

// InputError is a request that cannot start as given: a bad source,
// destination, codec or chunk size, or a bucket that does not exist. Nothing
// was written.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// AlreadyDoneError is returned by Submit when the request's idempotency key
// names a transfer that has already ended: nothing is started again.
type AlreadyDoneError struct {
	Done message.Done
}

func (e *AlreadyDoneError) Error() string {
	return fmt.Sprintf("transfer %s already ended %s", e.Done.TransferID, e.Done.Status)
}

// publisher sends one message and returns once it is stored.
type publisher interface {
	Publish(ctx context.Context, data []byte, attrs map[string]string) error
}

// Options configure a Producer.
type Options struct {
	Store  objectStore
	Chunks publisher // one message per chunk
	Events publisher // sealed and failed events
	// SpoolDir holds compressed chunks for the workers; InlineMax is the
	// largest chunk sent inside its message instead.
	SpoolDir  string
	InlineMax int64
	// Concurrency is how many chunks are compressed at once; 0 means one
	// per CPU, since compression is CPU-bound.
	Concurrency int
	// MemoryLimit bounds the chunk buffers in flight (raw and compressed).
	// The default, 256 MiB, holds the reader, one chunk per compressor and
	// a spare for 32 MiB chunks on 2 cores.
	MemoryLimit int64
	// Publishers is how many messages are published at once; publishing
	// waits on the network, not the CPU. Default 16.
	Publishers int
	// ID names this producer in manifests.
	ID  string
	Log *slog.Logger
}

func (o *Options) applyDefaults() {
	if o.Concurrency <= 0 {
		o.Concurrency = runtime.GOMAXPROCS(0)
	}
	if o.MemoryLimit <= 0 {
		o.MemoryLimit = 256 << 20
	}
	if o.Publishers <= 0 {
		o.Publishers = 16
	}
	if o.SpoolDir == "" {
		o.SpoolDir = filepath.Join(os.TempDir(), "ferry-spool")
	}
	o.Log = logging.OrDiscard(o.Log)
}

// Producer runs transfer requests. It is safe for concurrent use.
type Producer struct {
	o Options
	// Progress counts raw bytes read and compressed, for progress reports.
	readBytes, doneBytes atomic.Int64
}

// New returns a Producer.
func New(o Options) *Producer {
	o.applyDefaults()
	return &Producer{o: o}
}

// Progress reports raw bytes read and compressed so far, over all transfers.
func (p *Producer) Progress() (read, compressed int64) {
	return p.readBytes.Load(), p.doneBytes.Load()
}

// plan is a validated request.
type plan struct {
	req   Request
	dest  Destination
	codec codec.Codec
	level int
	files []sourceFile
	sizes []int64 // chunk size per file
}

// Validate checks a request without touching GCS; errors name the input.
func Validate(req Request) error {
	_, err := makePlan(req)
	return err
}

func makePlan(req Request) (*plan, error) {
	dest, err := ParseDestination(req.Destination)
	if err != nil {
		return nil, err
	}
	c := req.Codec
	if c == "" {
		c = codec.Zstd
	}
	if _, err := codec.Parse(string(c)); err != nil {
		return nil, err
	}
	level := req.Level
	if level == 0 {
		level = c.DefaultLevel()
	}
	if err := c.CheckLevel(level); err != nil {
		return nil, err
	}
	if req.ChunkSize < 64<<10 || req.ChunkSize > 1<<30 {
		return nil, fmt.Errorf("chunk size %d: want 64KiB to 1GiB", req.ChunkSize)
	}
	files, err := walk(req.Sources)
	if err != nil {
		return nil, err
	}
	pl := &plan{req: req, dest: dest, codec: c, level: level, files: files}
	for _, f := range files {
		obj := dest.Object(f.Rel, c.Ext())
		if err := checkName(obj); err != nil {
			return nil, fmt.Errorf("source %s: object name: %w", f.Path, err)
		}
		pl.sizes = append(pl.sizes, chunkSizeFor(f.Size, req.ChunkSize))
	}
	return pl, nil
}

// chunkSizeFor grows the chunk size, in whole MiB, until the file needs at
// most MaxChunksPerFile chunks.
func chunkSizeFor(size, chunk int64) int64 {
	if min := (size + MaxChunksPerFile - 1) / MaxChunksPerFile; min > chunk {
		const mib = 1 << 20
		return (min + mib - 1) / mib * mib
	}
	return chunk
}

func chunkCount(size, chunk int64) int {
	if size == 0 {
		return 1 // a 0-byte file is one empty chunk, so it gets an object
	}
	return int((size + chunk - 1) / chunk)
}

// Submit runs a request to the point where the fleet takes over: every chunk
// published and the sealed manifest written. It returns the manifest. On a
// permanent error it publishes a failed event, so the merger records the
// failure and removes the staging objects, and it returns the error.
func (p *Producer) Submit(ctx context.Context, req Request) (*message.Manifest, error) {
	started := time.Now().UTC()
	pl, err := makePlan(req)
	if err != nil {
		return nil, &InputError{err}
	}
	if req.TransferID == "" {
		req.TransferID = NewTransferID(req.IdempotencyKey)
		pl.req.TransferID = req.TransferID
	}
	if err := p.o.Store.BucketExists(ctx, pl.dest.Bucket); err != nil {
		err = fmt.Errorf("destination %s: %w", pl.dest, err)
		if errors.Is(err, gcs.ErrNotFound) {
			return nil, &InputError{err}
		}
		return nil, err
	}
	tid := req.TransferID
	if req.IdempotencyKey != "" {
		b, err := p.o.Store.ReadAll(ctx, pl.dest.Bucket, message.DoneMarker(tid))
		if err == nil {
			var d message.Done
			if err := message.Decode(b, &d); err != nil {
				return nil, fmt.Errorf("done marker of transfer %s: %w", tid, err)
			}
			return nil, &AlreadyDoneError{Done: d}
		}
		if !errors.Is(err, gcs.ErrNotFound) {
			return nil, err
		}
	}
	log := p.o.Log.With("transfer_id", tid)
	metrics.InFlight.WithLabelValues("transfers").Inc()
	defer metrics.InFlight.WithLabelValues("transfers").Dec()
	m := &message.Manifest{
		V: message.Version, TransferID: tid, Bucket: pl.dest.Bucket, Prefix: pl.dest.Prefix,
		Sources: req.Sources, Method: req.Method, Labels: req.Labels, Codec: string(pl.codec), Level: pl.level,
		ChunkSize: req.ChunkSize, Overwrite: req.Overwrite, StartedAt: started, ProducerID: p.o.ID,
		ContentType: pl.codec.ContentType(), Files: make([]message.File, len(pl.files)),
	}
	for i, f := range pl.files {
		m.Files[i] = message.File{
			Path: f.Rel, Object: pl.dest.Object(f.Rel, pl.codec.Ext()), Size: f.Size,
			Chunks: make([]message.ChunkInfo, chunkCount(f.Size, pl.sizes[i])),
		}
	}
	log.Info("transfer started", "files", len(pl.files), "destination", pl.dest.String(), "codec", pl.codec, "level", pl.level)

	// One flat directory: workers remove files as they finish, and there is
	// no per-transfer directory for them to race the producer over.
	spool := p.o.SpoolDir
	if err := os.MkdirAll(spool, 0o755); err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	t0 := time.Now()
	if err := p.run(ctx, pl, m, spool); err != nil {
		p.fail(ctx, m, err, log)
		return nil, err
	}
	m.CompressMS = time.Since(t0).Milliseconds()
	for i := range m.Files {
		f := &m.Files[i]
		var raw, wire []crc32c.Part
		for _, c := range f.Chunks {
			raw = append(raw, crc32c.Part{CRC32C: c.RawCRC32C, Size: c.RawSize})
			wire = append(wire, crc32c.Part{CRC32C: c.WireCRC32C, Size: c.WireSize})
			f.WireSize += c.WireSize
		}
		f.RawCRC32C, f.WireCRC32 = crc32c.CombineAll(raw), crc32c.CombineAll(wire)
	}
	m.Sealed, m.SealedAt = true, time.Now().UTC()
	if _, err := p.o.Store.PutSmall(ctx, m.Bucket, message.ManifestObject(tid), message.Encode(m), false, "application/json"); err != nil {
		err = fmt.Errorf("write manifest: %w", err)
		p.fail(ctx, m, err, log)
		return nil, err
	}
	ev := message.Event{V: message.Version, Type: message.EventSealed, TransferID: tid, Bucket: m.Bucket, At: m.SealedAt}
	if err := p.o.Events.Publish(ctx, message.Encode(ev), map[string]string{"transfer_id": tid, "type": ev.Type}); err != nil {
		// The manifest is written; a later event of the same transfer
		// will still find it, but none may come, so this is an error.
		return nil, fmt.Errorf("announce sealed manifest: %w", err)
	}
	log.Info("transfer sealed", "files", len(m.Files), "compress_ms", m.CompressMS)
	return m, nil
}

// fail tells the merger that the transfer cannot complete, and removes its
// spool files. It runs even when ctx is cancelled.
func (p *Producer) fail(ctx context.Context, m *message.Manifest, cause error, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	ev := message.Event{V: message.Version, Type: message.EventFailed, TransferID: m.TransferID, Bucket: m.Bucket,
		Error: cause.Error(), At: time.Now().UTC()}
	if err := p.o.Events.Publish(ctx, message.Encode(ev), map[string]string{"transfer_id": m.TransferID, "type": ev.Type}); err != nil {
		log.Error("could not publish the failed event; the staging prefix is left to the lifecycle rule", "err", err)
	}
	// Chunks spooled for a transfer that cannot complete are garbage; a
	// worker that still gets one of their messages finds the transfer over.
	if files, _ := filepath.Glob(filepath.Join(p.o.SpoolDir, m.TransferID+"-*")); len(files) > 0 {
		for _, f := range files {
			_ = os.Remove(f)
		}
	}
	log.Error("transfer failed", "err", cause)
}

type job struct {
	file, index int
	offset      int64
	raw         []byte
}

// run reads, compresses, spools and publishes every chunk of pl.
func (p *Producer) run(ctx context.Context, pl *plan, m *message.Manifest, spool string) error {
	var maxChunk int64 = 1
	for _, s := range pl.sizes {
		maxChunk = max(maxChunk, s)
	}
	// Buffer budget: raw chunk buffers circulate between the reader and the
	// chunk-level goroutines, which also hold their chunk's compressed frames
	// (about a third of the raw size for CSV). The CPU work is spread over
	// one frame encoder per core (frames.go), so chunk-level goroutines only
	// need to be enough to keep those encoders fed.
	// Fresh buffers cost a page fault and a clear per page, so hold no more
	// than keep the encoders busy: one chunk per core plus one, and one
	// being read.
	slots := max(2, int(p.o.MemoryLimit/(maxChunk+maxChunk/2)))
	workers := max(1, min(slots-1, p.o.Concurrency+1))
	rawPool := make(chan []byte, workers+1)
	for i := 0; i < cap(rawPool); i++ {
		rawPool <- nil
	}

	g, ctx := errgroup.WithContext(ctx)
	jobs := make(chan job)
	out := make(chan outMsg, p.o.Publishers)

	g.Go(func() error {
		defer close(jobs)
		for i, f := range pl.files {
			if err := p.read(ctx, i, f, pl.sizes[i], rawPool, jobs); err != nil {
				return err
			}
		}
		return nil
	})

	frames := make(chan frameJob)
	if err := startFrameEncoders(p.o.Concurrency, pl.codec, pl.level, frames); err != nil {
		return err
	}
	var compressors sync.WaitGroup
	for w := 0; w < workers; w++ {
		compressors.Add(1)
		g.Go(func() error {
			defer compressors.Done()
			enc := newChunkEncoder(ctx, frames, maxChunk)
			for j := range jobs {
				msg, err := p.compress(enc, pl, m, j, spool)
				rawPool <- j.raw[:0]
				if err != nil {
					return err
				}
				select {
				case out <- msg:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		})
	}
	go func() { compressors.Wait(); close(frames); close(out) }()

	for w := 0; w < p.o.Publishers; w++ {
		g.Go(func() error {
			for msg := range out {
				attrs := map[string]string{"transfer_id": msg.c.TransferID}
				if err := p.o.Chunks.Publish(ctx, msg.data, attrs); err != nil {
					pt := msg.c.Parts[0]
					return fmt.Errorf("publish chunk %d of %s: %w", pt.Index, pt.Path, err)
				}
				metrics.ChunksPublished.Inc()
			}
			return nil
		})
	}
	return g.Wait()
}

// read cuts one file into chunks and sends them to jobs. It fails when the
// file changes while it is read: a torn file is never uploaded.
func (p *Producer) read(ctx context.Context, fi int, f sourceFile, chunk int64, pool chan []byte, jobs chan<- job) error {
	fh, err := os.Open(f.Path)
	if err != nil {
		return fmt.Errorf("source %s: %w", f.Path, unwrapPathErr(err))
	}
	defer fh.Close()
	n := chunkCount(f.Size, chunk)
	for idx := 0; idx < n; idx++ {
		off := int64(idx) * chunk
		size := min(chunk, f.Size-off)
		var buf []byte
		select {
		case buf = <-pool:
		case <-ctx.Done():
			return ctx.Err()
		}
		if int64(cap(buf)) < size {
			buf = make([]byte, size, chunk)
		}
		buf = buf[:size]
		if _, err := io.ReadFull(fh, buf); err != nil {
			pool <- buf
			return fmt.Errorf("source %s: read chunk %d: %w (did the file change while it was read?)", f.Path, idx, err)
		}
		p.readBytes.Add(size)
		metrics.BytesRead.Add(float64(size))
		select {
		case jobs <- job{file: fi, index: idx, offset: off, raw: buf}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// The file must end where it ended when it was planned, and be unchanged.
	var one [1]byte
	if k, _ := fh.Read(one[:]); k != 0 {
		return fmt.Errorf("source %s: file grew while it was read (planned %d bytes)", f.Path, f.Size)
	}
	st, err := fh.Stat()
	if err != nil {
		return fmt.Errorf("source %s: %w", f.Path, err)
	}
	if st.Size() != f.Size || st.ModTime().UnixNano() != f.Mod {
		return fmt.Errorf("source %s: file changed while it was read (size %d→%d, mtime %s→%s)",
			f.Path, f.Size, st.Size(), time.Unix(0, f.Mod).UTC().Format(time.RFC3339Nano), st.ModTime().UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// outMsg is a chunk message ready to publish.
type outMsg struct {
	c    message.Chunk
	data []byte
}

// compress turns one job into a chunk message, with its bytes in the spool or
// inline, and records it in the manifest.
func (p *Producer) compress(enc *chunkEncoder, pl *plan, m *message.Manifest, j job, spool string) (outMsg, error) {
	f := &m.Files[j.file]
	rawCRC := crc32c.Checksum(j.raw)
	frames, err := enc.Frames(j.raw)
	if err != nil {
		return outMsg{}, fmt.Errorf("compress chunk %d of %s: %w", j.index, f.Path, err)
	}
	p.doneBytes.Add(int64(len(j.raw)))
	var wireCRC uint32
	var wireSize int64
	for _, fr := range frames {
		wireCRC = crc32c.Update(wireCRC, fr)
		wireSize += int64(len(fr))
	}
	metrics.BytesCompressed.Add(float64(wireSize))
	tid := m.TransferID
	single := len(f.Chunks) == 1
	part := message.Part{
		Final: single, File: j.file, Path: f.Path, Index: j.index, Chunks: len(f.Chunks),
		RawOffset: j.offset, RawSize: int64(len(j.raw)), RawCRC32C: rawCRC,
		WireSize: wireSize, WireCRC32C: wireCRC,
	}
	if single {
		// A file of one chunk is written straight to its final name.
		part.Object = f.Object
		part.ContentType = pl.codec.ContentType()
		part.Metadata = message.FinalMetadata(tid, int64(len(j.raw)), rawCRC, string(pl.codec))
	} else {
		part.Object = message.ChunkObject(tid, j.file, j.index)
	}
	c := message.Chunk{V: message.Version, TransferID: tid, Bucket: m.Bucket, Codec: string(pl.codec),
		Overwrite: pl.req.Overwrite, Parts: []message.Part{part}}
	var data []byte
	if wireSize <= p.o.InlineMax {
		data = message.EncodeChunk(c, frames)
	} else {
		// The spool file's name is relative to the spool directory: a
		// worker resolves it inside its own.
		c.Spool = fmt.Sprintf("%s-%06d-%05d", tid, j.file, j.index)
		if err := writeFrames(filepath.Join(spool, c.Spool), frames); err != nil {
			return outMsg{}, fmt.Errorf("spool chunk %d of %s: %w", j.index, f.Path, err)
		}
		data = message.EncodeChunk(c, nil)
	}
	f.Chunks[j.index] = message.ChunkInfo{Object: part.Object, RawSize: part.RawSize, RawCRC32C: rawCRC, WireSize: wireSize, WireCRC32C: wireCRC}
	return outMsg{c: c, data: data}, nil
}

// writeFrames writes a spool file under a temporary name and renames it into
// place, so a worker never reads a torn file: not after a producer crash, and
// not while a resubmitted request rewrites the same chunk.
func writeFrames(path string, frames [][]byte) error {
	fh, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	for _, fr := range frames {
		if _, err := fh.Write(fr); err != nil {
			fh.Close()
			os.Remove(fh.Name())
			return err
		}
	}
	if err := fh.Close(); err != nil {
		os.Remove(fh.Name())
		return err
	}
	if err := os.Rename(fh.Name(), path); err != nil {
		os.Remove(fh.Name())
		return err
	}
	return nil
}

// Resolved is one source file and the final object it becomes.
type Resolved struct {
	Path   string
	Object string
	Size   int64
}

// Resolve lists the files a request covers and their final object names,
// without touching GCS; verification tools use it to pair sources and objects.
func Resolve(req Request) (Destination, []Resolved, error) {
	pl, err := makePlan(req)
	if err != nil {
		return Destination{}, nil, err
	}
	out := make([]Resolved, len(pl.files))
	for i, f := range pl.files {
		out[i] = Resolved{Path: f.Path, Object: pl.dest.Object(f.Rel, pl.codec.Ext()), Size: f.Size}
	}
	return pl.dest, out, nil
}
