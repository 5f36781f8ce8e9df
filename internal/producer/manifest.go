package producer

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/plan"
)

// newManifest describes a planned transfer before any chunk is read; the
// compress stage fills in each chunk as it is written, seal the rest.
func newManifest(req Request, pl *plan.Plan, tid string, started time.Time, producerID string) *message.Manifest {
	m := &message.Manifest{
		V: message.Version, TransferID: tid, Bucket: pl.Dest.Bucket, Prefix: pl.Dest.Prefix,
		Sources: req.Sources, Method: req.Method, Labels: req.Labels, Codec: string(pl.Codec), Level: pl.Level,
		ChunkSize: req.ChunkSize, Overwrite: req.Overwrite, StartedAt: started, ProducerID: producerID,
		ContentType: pl.Codec.ContentType(), Files: make([]message.File, len(pl.Files)), Symlinks: string(pl.Symlinks),
	}
	for i, f := range pl.Files {
		m.Files[i] = message.File{
			Path: f.Rel, Object: f.Object, Size: f.Size, Mtime: time.Unix(0, f.Mod).UTC(),
			Chunks: make([]message.ChunkInfo, f.Chunks),
		}
		if f.Stream != nil {
			// Standard input: no mtime; its size and chunks are known
			// at its end (seal).
			m.Files[i].Mtime = time.Time{}
		}
	}
	return m
}

// recorder notes the stored parts in the manifest. It is safe for
// concurrent use: the compress goroutines record their parts as they go,
// and a stream's chunk list grows as its chunks come.
type recorder struct {
	mu sync.Mutex
	m  *message.Manifest
}

func (r *recorder) record(p *encodedPart) {
	info := message.ChunkInfo{Object: p.part.Object, RawSize: p.part.RawSize, RawCRC32C: p.part.RawCRC32C,
		WireSize: p.part.WireSize, WireCRC32C: p.part.WireCRC32C}
	if !p.part.Final {
		// A composed file's seek table is written by the merger from
		// these (message.File.SeekTable); a one-chunk file carries its
		// own in its payload.
		info.Frames = p.seek
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	f := &r.m.Files[p.file]
	for len(f.Chunks) <= p.index {
		f.Chunks = append(f.Chunks, message.ChunkInfo{})
	}
	f.Chunks[p.index] = info
}

// pageWriters is how many manifest pages seal writes at once.
const pageWriters = 8

func (p *Producer) putPage(ctx context.Context, bucket, name string, v any) error {
	if _, err := p.o.Store.PutSmall(ctx, bucket, name, message.Encode(v), false, "application/json"); err != nil {
		return fmt.Errorf("write manifest page gs://%s/%s: %w", bucket, name, err)
	}
	return nil
}

// announceError: the manifest is sealed and written, but the sealed event
// could not be published. The transfer is not failed for it: a later event
// of the transfer still finds the manifest, though none may come.
type announceError struct{ err error }

func (e *announceError) Error() string { return "announce sealed manifest: " + e.err.Error() }
func (e *announceError) Unwrap() error { return e.err }

// seal completes the manifest once every chunk is published (each file's raw
// CRC32C and its final object's wire size and CRC32C, seek table included),
// writes it to the transfer's staging prefix and announces it.
func (p *Producer) seal(ctx context.Context, m *message.Manifest) error {
	for i := range m.Files {
		f := &m.Files[i]
		raw := make([]crc32c.Part, len(f.Chunks))
		f.Size = 0 // a stream's is known only now; a file's adds up to the same
		for j, c := range f.Chunks {
			raw[j] = crc32c.Part{CRC32C: c.RawCRC32C, Size: c.RawSize}
			f.Size += c.RawSize
		}
		f.RawCRC32C = crc32c.CombineAll(raw)
		f.SealWire()
	}
	m.Sealed, m.SealedAt = true, time.Now().UTC()
	header, pages, skipped := m.Paginate()
	// The pages first, the header last: the header is the seal.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(pageWriters)
	for k, files := range pages {
		g.Go(func() error {
			return p.putPage(gctx, m.Bucket, message.ManifestPage(m.TransferID, k), &message.FilePage{V: message.Version, Files: files})
		})
	}
	for k, s := range skipped {
		g.Go(func() error {
			return p.putPage(gctx, m.Bucket, message.SkippedPage(m.TransferID, k), &message.SkippedFiles{V: message.Version, Skipped: s})
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if _, err := p.o.Store.PutSmall(ctx, m.Bucket, message.ManifestObject(m.TransferID), message.Encode(header), false, "application/json"); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	ev := message.Event{V: message.Version, Type: message.EventSealed, TransferID: m.TransferID, Bucket: m.Bucket, Run: m.Run, At: m.SealedAt}
	if err := p.o.Events.Publish(ctx, message.Encode(ev), map[string]string{"transfer_id": m.TransferID, "type": ev.Type}); err != nil {
		return &announceError{err}
	}
	return nil
}
