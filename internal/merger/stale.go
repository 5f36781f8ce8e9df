package merger

import (
	"context"
	"errors"
	"strings"

	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/manifest"
	"github.com/ferry-dev/ferry/internal/message"
)

// stale are the objects an earlier transfer of a converted source left in
// the directory of its parts that this transfer's do not replace: the
// higher-numbered parts of a file that has fewer now, and a rejects object
// of a file that has none now. A wildcard over the directory
// (part-*.parquet, an external table) would read them as the file's, so an
// ok transfer removes them. confirm notes them from its one listing, so
// finding them costs no call; only ferry's own objects of the same source
// count, never this transfer's.
type stale struct {
	objects []staleObject
	more    bool // more than maxStale
}

// staleObject is an object as the listing showed it: only that generation
// is removed, never one written since.
type staleObject struct {
	name string
	gen  int64
}

// maxStale bounds the stale objects one end removes; a later transfer of
// the same files removes the rest.
const maxStale = 10_000

// note looks at a, listed after prev (the manifest's file before it) and
// not in the manifest.
func (s *stale) note(tid string, prev *message.File, a gcs.Attrs) {
	if prev == nil || prev.Table == nil || a.Metadata[message.MetaTransfer] == "" || a.Metadata[message.MetaTransfer] == tid {
		return
	}
	dir := manifest.PartsDir(prev.Object)
	base, ok := strings.CutPrefix(a.Name, dir)
	if !ok || strings.Contains(base, "/") {
		return
	}
	i, isPart := message.PartIndex(base)
	stalePart := isPart && i >= prev.Table.Parts && a.Metadata[message.MetaTableSource] == prev.Table.Source
	if !stalePart && base != message.RejectsName {
		return
	}
	if len(s.objects) == maxStale {
		s.more = true
		return
	}
	s.objects = append(s.objects, staleObject{a.Name, a.Generation})
}

// removeStale removes what sum found stale in t's destination, before
// t's own rejects objects are written (a rejects object of this transfer
// replaces the old one anyway), each at the generation listed. A failure is
// logged, not fatal: the objects are an earlier transfer's, and this one
// is complete.
func (m *Merger) removeStale(ctx context.Context, t *transfer, sum *summary) {
	for _, o := range sum.stale.objects {
		err := m.o.Store.DeleteGeneration(ctx, t.bucket, o.name, o.gen)
		if err != nil && !errors.Is(err, gcs.ErrNotFound) && !errors.Is(err, gcs.ErrPrecondition) { // gone, or written again since
			m.log.Warn("an earlier transfer's object beside this one's parts stays", "object", "gs://"+t.bucket+"/"+o.name, "err", err)
		}
	}
	if len(sum.stale.objects) > 0 {
		m.log.Info("removed what earlier transfers left beside this one's parts", "transfer", t.id, "objects", len(sum.stale.objects), "more", sum.stale.more)
	}
}
