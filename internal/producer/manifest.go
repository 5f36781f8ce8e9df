package producer

import (
	"context"
	"fmt"
	"time"

	"github.com/ferry-dev/ferry/internal/manifest"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/plan"
)

// The manifest: its header, the entry of each planned file, and the
// chunks recorded in them, written by manifest.Writer.

// newManifest describes a planned transfer before any chunk is read.
func newManifest(req Request, pl *plan.Plan, tid string, started time.Time, producerID string) *message.Manifest {
	return &message.Manifest{
		V: message.Version, TransferID: tid, Bucket: pl.Dest.Bucket, Prefix: pl.Dest.Prefix,
		Sources: req.Sources, Method: req.Method, Labels: req.Labels, Codec: string(pl.Codec), Level: pl.Level,
		ChunkSize: req.ChunkSize, Overwrite: req.Overwrite, Staged: req.Overwrite, StartedAt: started, ProducerID: producerID,
		ContentType: pl.Codec.ContentType(), Symlinks: string(pl.Symlinks), Load: req.Load,
		Pool: req.Pool,
	}
}

// fileEntry is f's entry in the manifest, its chunks not yet recorded (an
// append's first is the object there already).
func fileEntry(f *plan.File) message.File {
	mf := message.File{Path: f.Rel, Object: f.Object, Size: f.Size, Mtime: time.Unix(0, f.Mod).UTC(), Chunks: make([]message.ChunkInfo, f.Chunks),
		Posix: posixOf(f), Replaces: f.Replaces}
	if f.Stream != nil {
		// Standard input: no mtime; its size and chunks are known at
		// its end (seal).
		mf.Mtime = time.Time{}
	}
	if f.Append != nil {
		mf.Chunks[0] = *f.Append // there already
	}
	return mf
}

// posixOf is f's permission bits, owner and group for its final object,
// nil for standard input or where the platform reports no owner.
func posixOf(f *plan.File) *message.Posix {
	if f.Stream != nil || !f.Owned {
		return nil
	}
	return &message.Posix{Mode: f.Perm & 0o777, UID: f.UID, GID: f.GID}
}

// record notes a stored part in the manifest.
func record(ctx context.Context, g *manifest.Writer, p *encodedPart) error {
	info := message.ChunkInfo{Object: p.part.Object, RawSize: p.part.RawSize, RawCRC32C: p.part.RawCRC32C,
		WireSize: p.part.WireSize, WireCRC32C: p.part.WireCRC32C}
	if p.part.Chunks > 1 {
		// A composed file's seek table is written by the merger from
		// these (message.File.SeekTable); a one-chunk file carries its
		// own in its payload, staged or not.
		info.Frames = p.seek
	}
	return g.Record(ctx, p.file, p.index, info, p.table)
}

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

// seal writes the manifest's last pages and its header, which seals it, to
// the transfer's staging prefix and announces it.
func (p *Producer) seal(ctx context.Context, m *message.Manifest, g *manifest.Writer) error {
	if err := g.Finish(ctx); err != nil {
		return err
	}
	m.Sealed, m.SealedAt = true, time.Now().UTC()
	if _, err := p.o.Store.PutSmall(ctx, m.Bucket, message.ManifestObject(m.TransferID), message.Encode(m), false, "application/json"); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	ev := message.Event{V: message.Version, Type: message.EventSealed, TransferID: m.TransferID, Bucket: m.Bucket, Run: m.Run, Key: m.EndKey, At: m.SealedAt}
	if err := p.o.Events.Publish(ctx, message.Encode(ev), map[string]string{"transfer_id": m.TransferID, "type": ev.Type}); err != nil {
		return &announceError{err}
	}
	return nil
}
