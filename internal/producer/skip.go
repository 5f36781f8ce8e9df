package producer

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"time"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/lease"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/plan"
)

// The skip stage, before a byte is read. With -n/--no-clobber,
// --skip-unchanged or --overwrite, one listing of the destination — under
// the longest prefix the planned final objects share, with their metadata —
// tells which final objects are there already. With -n or --skip-unchanged
// their files leave the plan and are listed in the manifest's Skipped, and
// from there in the done event and the row. An unchanged tree re-runs
// without reading a file: the quick check compares the object's
// ferry-raw-size and ferry-mtime with the source's size and mtime, as rsync
// does. With --checksum the check reads the sources whose size matches and
// compares their CRC32C with the object's ferry-raw-crc32c instead of the
// mtime. A file that is sent over an object notes the object's generation
// (message.File.Replaces): the merger replaces that generation only.
//
// An object of a transfer that has not ended is skipped only once that
// transfer no longer runs (its lease stale, or its ferry cp gone): the
// running transfer adopts it first (adopt), so that the dead one's
// clean-up, whenever it comes, leaves it.

// Why a file was skipped, as the manifest records it.
const (
	SkipExists      = "exists"                          // -n/--no-clobber
	SkipUnchanged   = "unchanged: same size and mtime"  // --skip-unchanged
	SkipSameContent = "unchanged: same size and crc32c" // --skip-unchanged --checksum
)

// checkSkip refuses flags that contradict each other.
func (r Request) checkSkip() error {
	switch {
	case r.NoClobber && r.Overwrite:
		return errors.New("--no-clobber (-n) and --overwrite exclude each other")
	case r.NoClobber && r.SkipUnchanged:
		return errors.New("--no-clobber (-n) skips every existing object and --skip-unchanged replaces changed ones: choose one")
	case r.Checksum && !r.SkipUnchanged:
		return errors.New("--checksum says how --skip-unchanged compares files; it needs --skip-unchanged")
	case r.NoAppend && !r.SkipUnchanged:
		return errors.New("--no-append says how --skip-unchanged sends a file that grew; it needs --skip-unchanged")
	case r.SkipUnchanged && r.Load != nil && r.Load.Write == message.LoadTruncate:
		return errors.New("--skip-unchanged with --bq-write truncate would replace the table with the rows of the files that changed only: append them, or send every file")
	}
	return nil
}

// skipper decides, file by file in object order, which files the skip
// check leaves out: a listing of the destination, pulled as the files
// come, in the same order, so that nothing is held of the objects it shows.
// Not safe for concurrent use.
type skipper struct {
	p       *Producer
	req     Request
	codec   codec.Codec
	bucket  string
	next    func() (gcs.Attrs, error, bool)
	stop    func()
	cur     *gcs.Attrs
	settled map[string]writerState
	// tid adopts the objects of dead transfers it skips; "" (a dry run)
	// writes nothing, and reports them skipped as a run would.
	tid  string
	gone map[string]bool
}

// newSkipper lists what is under prefix (the destination's) as files are
// checked; nil when req skips nothing. Call close when done. Transfer tid
// adopts what it skips of dead transfers; "" adopts nothing (a dry run).
func (p *Producer) newSkipper(ctx context.Context, pl *plan.Plan, req Request, tid string) *skipper {
	if !req.NoClobber && !req.SkipUnchanged && !req.Overwrite {
		return nil
	}
	prefix := pl.ObjectsPrefix()
	listing := func(yield func(gcs.Attrs, error) bool) {
		stopped := errors.New("stopped")
		err := p.o.Store.List(ctx, pl.Dest.Bucket, prefix, func(a gcs.Attrs) error {
			if !yield(a, nil) {
				return stopped
			}
			return nil
		})
		if err != nil && !errors.Is(err, stopped) {
			yield(gcs.Attrs{}, fmt.Errorf("destination %s: looking for objects that exist: %w", pl.Dest, err))
		}
	}
	next, stop := iter.Pull2(listing)
	return &skipper{p: p, req: req, codec: pl.Codec, bucket: pl.Dest.Bucket, next: next, stop: stop, settled: map[string]writerState{}, tid: tid, gone: map[string]bool{}}
}

func (s *skipper) close() {
	if s != nil {
		s.stop()
	}
}

// check says why f is skipped, "" when it is sent. Files must come in
// object order.
func (s *skipper) check(ctx context.Context, f *plan.File) (string, error) {
	if s == nil {
		return "", nil
	}
	for s.cur == nil || s.cur.Name < f.Object {
		a, err, ok := s.next()
		if !ok {
			return "", nil // the listing ended
		}
		if err != nil {
			return "", err
		}
		s.cur = &a
	}
	if s.cur.Name != f.Object {
		return "", nil
	}
	a := *s.cur
	// What an overwrite finds is what it may replace: the merger
	// composes onto this generation only (message.File.Replaces). A
	// manifest that does not stage its overwrite (-n) replaces nothing,
	// and records nothing to replace.
	if s.req.Overwrite || s.req.SkipUnchanged {
		f.Replaces = a.Generation
	}
	if !s.req.NoClobber && !s.req.SkipUnchanged {
		return "", nil // --overwrite: every file is sent
	}
	owner := a.Metadata[message.MetaTransfer]
	state, err := s.p.settled(ctx, s.bucket, owner, s.settled)
	if err != nil {
		return "", fmt.Errorf("object %s: %w", a.Name, err)
	}
	if state == endedBadly {
		return "", nil
	}
	reason, err := skipReason(f, a, s.req)
	if state == notEnded {
		// Its transfer may still remove the object.
		if err != nil || reason == "" {
			return "", asSourceError(err)
		}
		if adopted, err := s.adopt(ctx, a, owner); err != nil || !adopted {
			return "", err // sent: its worker names whose object is in the way
		}
		return reason, nil
	}
	if err == nil && reason == "" && s.req.SkipUnchanged && !s.req.NoAppend {
		var first message.ChunkInfo
		var ok bool
		if first, ok, err = s.p.appendable(ctx, s.bucket, f, a, s.codec); ok {
			f.AppendTo(first)
		}
	}
	return reason, asSourceError(err)
}

// asSourceError marks err, nil for nil, as the source's fault.
func asSourceError(err error) error {
	var serr *SourceError
	if err != nil && !errors.As(err, &serr) {
		err = &SourceError{err}
	}
	return err
}

// adopt makes a, an object of transfer owner, which has not ended, the
// skipper's transfer's, if owner no longer runs: its ferry-transfer names
// this transfer and its ferry-adopted owner (message.KeptOnFailure), under
// the generation and metageneration the listing showed, so that owner's
// clean-up (its sweep, or a cancel) spares it. It reports whether a may
// be skipped; false sends the file. A dry run only asks.
func (s *skipper) adopt(ctx context.Context, a gcs.Attrs, owner string) (bool, error) {
	gone, known := s.gone[owner]
	if !known {
		var err error
		if gone, err = s.p.transferGone(ctx, s.bucket, owner); err != nil {
			return false, fmt.Errorf("object %s: transfer %.64q that wrote it: %w", a.Name, owner, err)
		}
		s.gone[owner] = gone
		if gone && s.tid != "" {
			s.p.o.Log.Warn("objects of a transfer that never ended and no longer runs are there: this transfer skips them and takes them as its own, so that the dead one's clean-up leaves them",
				"transfer_id", s.tid, "dead_transfer", owner, "first", "gs://"+s.bucket+"/"+a.Name)
		}
	}
	if !gone || s.tid == "" {
		return gone, nil
	}
	err := s.p.o.Store.Patch(ctx, s.bucket, a, map[string]string{message.MetaTransfer: s.tid, message.MetaAdopted: owner})
	if errors.Is(err, gcs.ErrPrecondition) || errors.Is(err, gcs.ErrNotFound) {
		return false, nil // changed since the listing: sent, as over any object
	}
	if err != nil {
		return false, fmt.Errorf("adopting object gs://%s/%s of transfer %s, which no longer runs: %w", s.bucket, a.Name, owner, err)
	}
	return true, nil
}

// skip removes from pl (its files planned, in object order) the files
// whose final object is there already (as req asks) and returns them, in
// plan order: what a dry run shows.
func (p *Producer) skip(ctx context.Context, pl *plan.Plan, req Request) ([]message.Skipped, error) {
	sk := p.newSkipper(ctx, pl, req, "")
	defer sk.close()
	if sk == nil {
		return nil, nil
	}
	var skipped []message.Skipped
	var g partGroup
	files := pl.Files
	pl.Files = nil
	for _, f := range files {
		reason, err := sk.check(ctx, &f)
		if err != nil {
			return nil, err
		}
		fs, reasons := g.add(f, reason)
		for k, f := range fs {
			if reasons[k] == "" {
				pl.Files = append(pl.Files, f)
				continue
			}
			skipped = append(skipped, message.Skipped{Path: f.Rel, Object: f.Object, Reason: reasons[k]})
		}
	}
	return skipped, nil
}

// partGroup holds a converted source's parts (consecutive, in object
// order) until its last, so that they go or stay together: the file's
// rejects object and its rows in a table are the whole file's.
type partGroup struct {
	files   []plan.File
	reasons []string
}

// add takes f and why the skip check would skip it ("" sends it), and
// returns the files decided by it, with their reasons: f alone when it is
// no part; a source's parts once its last comes, every one sent unless
// all are skipped.
func (g *partGroup) add(f plan.File, reason string) ([]plan.File, []string) {
	if f.Part == nil {
		return []plan.File{f}, []string{reason}
	}
	g.files, g.reasons = append(g.files, f), append(g.reasons, reason)
	if f.Part.Index < f.Part.Count-1 {
		return nil, nil
	}
	files, reasons := g.files, g.reasons
	g.files, g.reasons = nil, nil
	if slices.Contains(reasons, "") {
		clear(reasons)
	}
	return files, reasons
}

// writerState is what became of the transfer that wrote an object.
type writerState int

const (
	// settled: it ended ok, or so long ago that its done marker is gone,
	// or ferry did not write the object.
	settled writerState = iota
	// endedBadly: it failed or was cancelled, and removed its final
	// objects but those it keeps (message.KeptOnFailure).
	endedBadly
	// notEnded: it is still running (its staging run or manifest
	// exists), or died before its end.
	notEnded
)

// settled says what became of transfer tid, which wrote an object the
// skip check found. Only the object of a settled transfer may be skipped:
// one that is running, or that failed or was cancelled, removes its final
// objects when it fails, and a file skipped over one would be lost. Such
// a file is sent, and its worker says whose object is in the way, unless
// its transfer no longer runs (skipper.adopt). Objects ferry did not write
// (tid "") are settled. Answers are kept in seen.
func (p *Producer) settled(ctx context.Context, bucket, tid string, seen map[string]writerState) (writerState, error) {
	if tid == "" {
		return settled, nil
	}
	if st, known := seen[tid]; known {
		return st, nil
	}
	st, err := p.transferSettled(ctx, bucket, tid)
	if err != nil {
		return notEnded, fmt.Errorf("transfer %.64q that wrote it: %w", tid, err)
	}
	seen[tid] = st
	return st, nil
}

// transferGone reports whether transfer tid, which has not ended, no
// longer runs: its lease is there and holds nobody off any more (its ferry
// cp is gone from this host, or nothing renewed it for
// message.LeaseStaleAfter, or an earlier version's lease older than the
// transfer timeout with nothing staged since). A transfer with no lease is
// ending (its merger removes the lease before the done marker), or ended
// long ago: it is not taken for gone.
func (p *Producer) transferGone(ctx context.Context, bucket, tid string) (bool, error) {
	if !message.ValidTransferID(tid) {
		return false, nil
	}
	name := message.LeaseObject(tid)
	a, err := p.o.Store.Attrs(ctx, bucket, name)
	if errors.Is(err, gcs.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("its lease gs://%s/%s: %w", bucket, name, err)
	}
	b, err := p.o.Store.ReadAll(ctx, bucket, name)
	if errors.Is(err, gcs.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("its lease gs://%s/%s: %w", bucket, name, err)
	}
	var l message.Lease
	if err := message.Decode(b, &l); err != nil || l.Check(name) != nil {
		return false, nil // not a lease ferry wrote: nothing to go by
	}
	if lease.HolderGone(l.Holder) || l.Stale(a.Updated, p.o.Now()) {
		return true, nil
	}
	if l.Renews {
		return false, nil
	}
	live, err := p.leases().Live(ctx, bucket, tid, a.Created)
	return !live, err
}

func (p *Producer) transferSettled(ctx context.Context, bucket, tid string) (writerState, error) {
	if !message.ValidTransferID(tid) {
		return settled, nil // not a name ferry makes: not one of its transfers
	}
	b, err := p.o.Store.ReadAll(ctx, bucket, message.DoneMarker(tid))
	if err == nil {
		var d message.Done
		if err := message.Decode(b, &d); err != nil {
			return notEnded, fmt.Errorf("done marker: %w", err)
		}
		if d.Status != message.StatusOK {
			return endedBadly, nil
		}
		return settled, nil
	}
	if !errors.Is(err, gcs.ErrNotFound) {
		return notEnded, err
	}
	for _, name := range []string{message.RunObject(tid), message.ManifestObject(tid)} {
		_, err := p.o.Store.Attrs(ctx, bucket, name)
		if err == nil {
			return notEnded, nil // still running
		}
		if !errors.Is(err, gcs.ErrNotFound) {
			return notEnded, err
		}
	}
	return settled, nil
}

// skipReason says why f, whose final object a exists, is skipped; "" when
// it is sent.
func skipReason(f *plan.File, a gcs.Attrs, req Request) (string, error) {
	if req.NoClobber {
		return SkipExists, nil
	}
	if f.Part != nil {
		return partSkipReason(f, a, req)
	}
	if a.Metadata[message.MetaRawSize] != strconv.FormatInt(f.Size, 10) {
		return "", nil
	}
	if req.Checksum {
		crc, err := fileCRC32C(f)
		if err != nil {
			return "", err
		}
		if a.Metadata[message.MetaRawCRC32C] == fmt.Sprintf("%08x", crc) {
			return SkipSameContent, nil
		}
		return "", nil
	}
	mtime, err := time.Parse(time.RFC3339Nano, a.Metadata[message.MetaMtime])
	if err == nil && mtime.Equal(time.Unix(0, f.Mod)) {
		return SkipUnchanged, nil
	}
	return "", nil
}

// partSkipReason says why f, a Parquet part whose object a exists, is
// skipped: the object came from the same bytes of the same source (its
// size, and its mtime or, with --checksum, the CRC32C of the part's bytes)
// converted the same way (MetaTableOptions). Its rows are then in the
// table already, for a --bq-table append.
func partSkipReason(f *plan.File, a gcs.Attrs, req Request) (string, error) {
	p, m := f.Part, a.Metadata
	if m[message.MetaTableFileSize] != strconv.FormatInt(p.FileSize, 10) || m[message.MetaTableRange] != fmt.Sprintf("%d+%d", p.Offset, p.Size) ||
		m[message.MetaTableOptions] != p.OptionsKey() {
		return "", nil
	}
	if req.Checksum {
		crc, err := fileCRC32C(f)
		if err != nil {
			return "", err
		}
		if m[message.MetaTableRangeCRC] == fmt.Sprintf("%08x", crc) {
			return SkipSameContent, nil
		}
		return "", nil
	}
	mtime, err := time.Parse(time.RFC3339Nano, m[message.MetaMtime])
	if err == nil && mtime.Equal(time.Unix(0, f.Mod)) {
		return SkipUnchanged, nil
	}
	return "", nil
}

// fileCRC32C reads f whole (a part: its bytes of the source) and returns
// its CRC32C; f must not change while it is read.
func fileCRC32C(f *plan.File) (uint32, error) {
	if p := f.Part; p != nil {
		return sourceCRC32C(f, p.Offset, p.Size, p.FileSize)
	}
	return sourceCRC32C(f, 0, f.Size, f.Size)
}

// sourceCRC32C is the CRC32C of n bytes of f's source from off; the source
// must still have size bytes, and f's mtime and ctime, once they are read.
func sourceCRC32C(f *plan.File, off, n, size int64) (uint32, error) {
	fh, err := f.Open()
	if err != nil {
		return 0, fmt.Errorf("source %s: %w", f.Path, unwrapPathErr(err))
	}
	defer fh.Close()
	crc, err := crc32c.OfRange(fh, off, n)
	if err != nil {
		return 0, fmt.Errorf("source %s: %w", f.Path, err)
	}
	if err := same(fh, f, size); err != nil {
		return 0, err
	}
	return crc, nil
}
