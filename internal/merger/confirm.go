package merger

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ferry-dev/ferry/internal/benchrow"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/loader"
	"github.com/ferry-dev/ferry/internal/manifest"
	"github.com/ferry-dev/ferry/internal/message"
)

// summary is what one pass over a finished transfer's files found: the
// counts and the first objects of its done event, and, spooled to
// temporary files rather than held, the listing and the chunk rows.
type summary struct {
	files       int
	bytes, wire int64
	objects     []message.DoneObject // the first MaxDoneInline
	listing     *benchrow.SpoolWriter[message.ListingEntry]
	rows        *benchrow.SpoolWriter[benchrow.ChunkRow]
	workers     map[string]bool // at most maxWorkers
	first, last time.Time       // the first upload's start, the last chunk's creation
	missing     int             // files the listing did not confirm
	unconfirmed []int           // the first maxUnconfirmed of them
	// parts are the URIs of the confirmed Parquet parts, or of the
	// objects of kind (a load without conversion), up to one more than a
	// load job takes, and partRows the parts' rows, for a table load;
	// mixed names two objects of different kinds, which one job cannot
	// load.
	parts    []string
	partRows int64
	// emptyPart is the first part of no rows, left out of the load
	// unless no part has any (loadable).
	emptyPart string
	kind      string
	kindOf    string // the first object of kind
	mixed     string
	// rejects are the records the conversions left out (--bad-rows).
	rejects rejects
	// appended are the files sent as their tail, and those tails' bytes.
	appended      int
	appendedBytes int64
	// What moved (message.Done): the source bytes read and sent, the
	// bytes sent for them, the files sent whole, the sources converted.
	read, sent       int64
	whole, converted int
	// stale are objects an earlier transfer of a converted source left
	// beside this one's parts.
	stale stale
}

// Bounds of a summary, whatever the transfer's size.
const (
	maxWorkers     = 4096
	maxUnconfirmed = message.PageFiles
)

func newSummary() (*summary, error) {
	l, err := benchrow.NewSpoolWriter[message.ListingEntry]()
	if err != nil {
		return nil, err
	}
	r, err := benchrow.NewSpoolWriter[benchrow.ChunkRow]()
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	return &summary{listing: l, rows: r, workers: map[string]bool{}}, nil
}

// close removes the spooled files.
func (s *summary) close() {
	if s == nil {
		return
	}
	_ = s.listing.Close()
	_ = s.rows.Close()
}

// uploaded notes one stored chunk: its row, its worker and its times.
func (s *summary) uploaded(tid string, f *message.File, j int, st stored) error {
	c := f.Chunks[j]
	r := benchrow.ChunkRow{TransferID: tid, File: f.Path, Index: j, Bytes: c.RawSize, WireBytes: c.WireSize,
		Worker: st.Worker, Attempts: st.Attempt, UploadedAt: st.Created}
	if !st.Started.IsZero() && st.Created.After(st.Started) {
		r.UploadMS = st.Created.Sub(st.Started).Milliseconds()
	}
	if st.Worker != "" && len(s.workers) < maxWorkers {
		s.workers[st.Worker] = true
	}
	if !st.Started.IsZero() {
		if s.first.IsZero() || st.Started.Before(s.first) {
			s.first = st.Started
		}
		if st.Created.After(s.last) {
			s.last = st.Created
		}
	}
	return s.rows.Add(r)
}

// loadable notes f, confirmed as the object named uri, when the load ld
// takes it: a Parquet part, or, for a load of objects (ld.Objects), a file
// of a message.LoadKind.
func (s *summary) loadable(ld *message.Load, f *message.File, uri string) {
	if !ld.Objects {
		if f.Table == nil {
			return
		}
		if f.Table.Rows == 0 {
			// A part of no rows (a day with no events) adds nothing to a
			// table and may not share its types (a header only is all
			// STRING): loaded only when every part is empty, so that
			// the table gets its columns (loadTable).
			if s.emptyPart == "" {
				s.emptyPart = uri
			}
			return
		}
		s.partRows += f.Table.Rows
	} else {
		kind := message.LoadKind(f.Path)
		switch {
		case kind == "" || f.Table != nil:
			return
		case s.kind == "":
			s.kind, s.kindOf = kind, f.Path
		case kind != s.kind && s.mixed == "":
			s.mixed = fmt.Sprintf("%s is %s, %s is %s", s.kindOf, s.kind, f.Path, kind)
		}
	}
	if len(s.parts) <= loader.MaxURIs {
		s.parts = append(s.parts, uri)
	}
}

// uploadMS is the upload stage: from the first chunk upload's start to the
// last chunk object's creation.
func (s *summary) uploadMS() int64 {
	if s.first.IsZero() || s.last.Before(s.first) {
		return 0
	}
	return s.last.Sub(s.first).Milliseconds()
}

// confirm asks GCS about every final object of t's manifest with one
// listing of the destination prefix (1,000 objects per call), joined with
// the manifest a page at a time, so that a transfer ends ok only over
// bytes GCS itself holds: an object counts when its name, size and CRC32C
// are the manifest's and its ferry-transfer metadata is t's. An event is a
// claim, this is the proof; an object of another transfer or an older
// version never counts.
//
// The same pass counts the transfer, spools its listing and its chunk rows
// (a one-chunk file's from its final object's metadata, a composed file's
// from its chunks), so memory does not grow with the file count.
func (m *Merger) confirm(ctx context.Context, t *transfer) (*summary, error) {
	sum, err := newSummary()
	if err != nil {
		return nil, err
	}
	err = t.pages.JoinExtra(ctx, t.finals, func(i int, f *message.File, a *gcs.Attrs) error {
		if a == nil || a.Size != f.WireSize || a.CRC32C != f.WireCRC32 || a.Metadata[message.MetaTransfer] != t.id {
			if sum.missing++; len(sum.unconfirmed) < maxUnconfirmed {
				sum.unconfirmed = append(sum.unconfirmed, i)
			}
			return nil
		}
		if sum.missing > 0 {
			return nil // it will not end now: only count what is missing
		}
		sum.files++
		sum.bytes += f.Size
		sum.wire += f.WireSize
		o := doneObject(t.bucket, f, a.Generation)
		if len(sum.objects) < message.MaxDoneInline {
			sum.objects = append(sum.objects, o)
		}
		entry := message.ListingEntry{DoneObject: o}
		switch {
		case f.AppendsTo() != 0:
			entry.Appended = f.Size - f.Chunks[0].RawSize
			sum.appended++
			sum.appendedBytes += entry.Appended
			sum.read += entry.Appended
			sum.sent += f.WireSize - f.Chunks[0].WireSize
		case f.Table != nil:
			if f.Table.Part == 0 {
				sum.converted++
			}
			sum.read += f.Table.Size
			sum.sent += f.WireSize
		default:
			sum.whole++
			sum.read += f.Size
			sum.sent += f.WireSize
		}
		if err := sum.listing.Add(entry); err != nil {
			return err
		}
		if ld := t.manifest.Load; ld != nil {
			sum.loadable(ld, f, o.Name)
		}
		if err := sum.rejects.add(f); err != nil {
			return err
		}
		if !f.Staged() {
			return sum.uploaded(t.id, f, 0, fromAttrs(*a))
		}
		for j := range f.Chunks {
			if j == 0 && f.AppendsTo() != 0 {
				continue // not uploaded by this transfer
			}
			if s, ok := t.present[chunkKey{i, j}]; ok {
				if err := sum.uploaded(t.id, f, j, s); err != nil {
					return err
				}
			}
		}
		return nil
	}, func(prev *message.File, a gcs.Attrs) { sum.stale.note(t.id, prev, a) })
	if err != nil {
		sum.close()
		return nil, fmt.Errorf("confirm the final objects: list gs://%s/%s: %w", t.bucket, t.finals, err)
	}
	return sum, nil
}

// writeListing writes the listing of an ended transfer: the final objects
// sum confirmed (none for a transfer that did not end ok), then every
// skipped file, one message.ListingEntry a line, through a temporary file,
// so a million files cost the merger disk, not RAM. It reports whether
// there was anything to list.
func (m *Merger) writeListing(ctx context.Context, t *transfer, pg *manifest.Reader, sum *summary) (bool, error) {
	bucket := t.bucket
	err := pg.Skipped(ctx, func(s message.Skipped) error {
		return sum.listing.Add(message.ListingEntry{DoneObject: message.DoneObject{Name: "gs://" + bucket + "/" + s.Object}, Path: s.Path, Skipped: s.Reason})
	})
	if err != nil {
		return false, fmt.Errorf("listing of transfer %s: %w", t.id, err)
	}
	if sum.listing.Lines() == 0 {
		return false, nil
	}
	sp, err := sum.listing.Finish()
	if err != nil {
		return false, fmt.Errorf("listing of transfer %s: %w", t.id, err)
	}
	defer func() { _ = sp.Close() }()
	_, err = m.o.Store.Upload(ctx, bucket, message.ListingObject(t.id), sp, gcs.UploadOptions{
		Size: sp.Size, CRC32C: sp.CRC32C, ContentType: "application/x-ndjson", KMSKey: m.o.Buckets.KMSKey,
		Metadata: map[string]string{message.MetaTransfer: t.id},
	})
	if err != nil {
		return false, fmt.Errorf("write the listing of transfer %s: %w", t.id, err)
	}
	return true, nil
}

// doneObject is file f's final object as the done event and listing name it.
func doneObject(bucket string, f *message.File, gen int64) message.DoneObject {
	return message.DoneObject{Name: "gs://" + bucket + "/" + f.Object, Size: f.WireSize, CRC32C: f.WireCRC32, Generation: gen,
		RawSize: f.Size, RawCRC32C: f.RawCRC32C}
}

// finalsPrefix is the prefix every final object of pg's files shares
// (the destination prefix, or more), for a listing that must see them all;
// ok is false when there is no file. It reads every page: a manifest that
// ends a transfer before it was checked need not be in order.
func finalsPrefix(ctx context.Context, pg *manifest.Reader) (prefix string, ok bool, err error) {
	var lo, hi string
	err = pg.Each(ctx, func(i int, f *message.File) error {
		if !ok || f.Object < lo {
			lo = strings.Clone(f.Object)
		}
		if !ok || f.Object > hi {
			hi = strings.Clone(f.Object)
		}
		ok = true
		return nil
	})
	if err != nil || !ok {
		return "", false, err
	}
	return manifest.SharedPrefix(lo, hi), true, nil
}
