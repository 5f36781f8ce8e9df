package merger

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/result"
)

// confirm asks GCS about every final object of t's manifest with one
// listing of the destination prefix (1,000 objects per call), so that a
// transfer ends ok only over bytes GCS itself holds: an object counts when
// its name, size and CRC32C are the manifest's and its ferry-transfer
// metadata is t's. An event is a claim, this is the proof; an object of
// another transfer or an older version never counts.
//
// It returns the generation GCS reported for each file (by manifest index)
// and the files it could not confirm. Memory is one index and one
// generation per file, whatever the destination holds.
func (m *Merger) confirm(ctx context.Context, t *transfer) (gens []int64, missing []int, err error) {
	man := t.manifest
	order := make([]int32, len(man.Files)) // file indexes sorted by object name
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return strings.Compare(man.Files[a].Object, man.Files[b].Object) })
	gens = make([]int64, len(man.Files))
	if len(order) == 0 {
		return gens, nil, nil
	}
	// The names all files share, from the first and last in order: a
	// transfer into a prefix that holds years of other objects lists only
	// the range its own objects can be in.
	prefix := sharedPrefix(man.Files[order[0]].Object, man.Files[order[len(order)-1]].Object)
	err = m.o.Store.List(ctx, t.bucket, prefix, func(a gcs.Attrs) error {
		j, ok := slices.BinarySearchFunc(order, a.Name, func(i int32, name string) int { return strings.Compare(man.Files[i].Object, name) })
		if !ok {
			return nil
		}
		f := &man.Files[order[j]]
		if a.Size == f.WireSize && a.CRC32C == f.WireCRC32 && a.Metadata[message.MetaTransfer] == t.id {
			gens[order[j]] = a.Generation
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("confirm the final objects: list gs://%s/%s: %w", t.bucket, prefix, err)
	}
	for i, g := range gens {
		if g == 0 {
			missing = append(missing, i)
		}
	}
	return gens, missing, nil
}

// writeListing writes the listing of a finished transfer: one
// message.ListingEntry a line for every final object GCS confirmed (gens,
// by manifest index; nil for none) and every skipped file. It is spooled
// to a temporary file, not held in memory, so a million files cost the
// merger disk, not RAM.
func (m *Merger) writeListing(ctx context.Context, bucket, tid string, man *message.Manifest, gens []int64) error {
	entries := func(yield func(message.ListingEntry) bool) {
		for i, g := range gens {
			if g != 0 && !yield(message.ListingEntry{DoneObject: doneObject(man.Bucket, &man.Files[i], g)}) {
				return
			}
		}
		for _, s := range man.Skipped {
			if !yield(message.ListingEntry{DoneObject: message.DoneObject{Name: "gs://" + man.Bucket + "/" + s.Object}, Path: s.Path, Skipped: s.Reason}) {
				return
			}
		}
	}
	sp, err := result.Spool(entries)
	if err != nil {
		return fmt.Errorf("listing of transfer %s: %w", tid, err)
	}
	defer func() { _ = sp.Close() }()
	_, err = m.o.Store.Upload(ctx, bucket, message.ListingObject(tid), sp, gcs.UploadOptions{
		Size: sp.Size, CRC32C: sp.CRC32C, ContentType: "application/x-ndjson", KMSKey: m.o.Buckets.KMSKey,
		Metadata: map[string]string{message.MetaTransfer: tid},
	})
	if err != nil {
		return fmt.Errorf("write the listing of transfer %s: %w", tid, err)
	}
	return nil
}

// doneObject is file f's final object as the done event and listing name it.
func doneObject(bucket string, f *message.File, gen int64) message.DoneObject {
	return message.DoneObject{Name: "gs://" + bucket + "/" + f.Object, Size: f.WireSize, CRC32C: f.WireCRC32, Generation: gen,
		RawSize: f.Size, RawCRC32C: f.RawCRC32C}
}

// sharedPrefix is the longest prefix a and b share.
func sharedPrefix(a, b string) string {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return a[:i]
		}
	}
	return a[:n]
}

// finalsPrefix is the prefix every final object of man shares (the
// destination prefix, or more), for a listing that must see them all; ok
// is false when man names no file.
func finalsPrefix(man *message.Manifest) (prefix string, ok bool) {
	if len(man.Files) == 0 {
		return "", false
	}
	lo, hi := man.Files[0].Object, man.Files[0].Object
	for i := range man.Files {
		lo, hi = min(lo, man.Files[i].Object), max(hi, man.Files[i].Object)
	}
	return sharedPrefix(lo, hi), true
}
