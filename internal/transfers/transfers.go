// Package transfers answers what a user asks about ferry's transfers from
// what their bucket holds, and asks the merger to cancel one. It keeps no
// state: a running transfer is its chunk objects and, once the producer has
// read everything, its sealed manifest under .ferry/<id>/; an ended one is
// its done marker under .ferry-done/ (kept for FERRY_DONE_RETENTION); the
// final objects carry the id of the transfer that wrote them.
//
// Sizes are raw (source) bytes unless said otherwise, and CRC32Cs are shown
// as GCS and gcloud show them (crc32c.Base64).
package transfers

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ferry-dev/ferry/internal/benchrow"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
)

// objectStore is what reading a transfer's state needs of GCS.
type objectStore interface {
	List(ctx context.Context, bucket, prefix string, fn func(gcs.Attrs) error) error
	ReadAll(ctx context.Context, bucket, name string) ([]byte, error)
}

var _ objectStore = (*gcs.Store)(nil)

// publisher sends one message and returns once it is stored.
type publisher interface {
	Publish(ctx context.Context, data []byte, attrs map[string]string) error
}

// States of a transfer that has not ended; an ended one has the done
// event's status: message.StatusOK, StatusFailed or StatusCancelled.
const (
	// StateRunning: chunks are arriving; the producer is still reading
	// and has not sealed the manifest, so totals are not known yet.
	StateRunning = "running"
	// StateSealed: every chunk is published and the manifest sealed;
	// workers upload what is left and the merger composes.
	StateSealed = "sealed"
)

// Errors callers branch on.
var (
	// ErrNotFound: the bucket holds nothing of the transfer.
	ErrNotFound = errors.New("not found")
	// ErrEnded: the transfer has already ended; there is nothing to cancel.
	ErrEnded = errors.New("already ended")
)

// Transfer is what is known of one transfer.
type Transfer struct {
	ID          string `json:"transfer_id"`
	State       string `json:"state"`
	Destination string `json:"destination,omitempty"`
	// Files and Bytes are the totals, 0 while the transfer is running
	// (not yet known); FilesDone and BytesDone what is in its final
	// objects (for a sealed transfer, BytesDone also counts uploaded
	// chunks of files not yet composed).
	Files     int   `json:"files"`
	FilesDone int   `json:"files_done"`
	Bytes     int64 `json:"bytes"`
	BytesDone int64 `json:"bytes_done"`
	// ChunksStaged and WireStaged are the chunk objects in staging and
	// their compressed bytes.
	ChunksStaged int       `json:"chunks_staged"`
	WireStaged   int64     `json:"wire_bytes_staged"`
	Error        string    `json:"error,omitempty"`
	StartedAt    time.Time `json:"started_at,omitzero"`
	FinishedAt   time.Time `json:"finished_at,omitzero"`
	// Objects are final objects of an ended transfer: those its done
	// event names itself (at most message.MaxDoneInline); Listing is
	// gs://BUCKET/OBJECT of the NDJSON object that names every one.
	Objects []Object `json:"objects,omitempty"`
	Listing string   `json:"listing,omitempty"`
	// Load is what the load into a BigQuery table did (--bq-table).
	Load *message.Loaded `json:"load,omitempty"`
	// Rejected are the records --bad-rows left out of converted files.
	Rejected int64 `json:"rejected_rows,omitempty"`
	// Appended and AppendedBytes: files that grew, sent as their tail.
	Appended      int   `json:"files_appended,omitempty"`
	AppendedBytes int64 `json:"bytes_appended,omitempty"`
	// What an ended transfer moved (message.Done): the files sent whole,
	// converted and skipped, the source bytes read and sent, and the
	// bytes uploaded for them.
	FilesWhole     int   `json:"files_whole,omitempty"`
	FilesConverted int   `json:"files_converted,omitempty"`
	FilesSkipped   int   `json:"files_skipped,omitempty"`
	BytesRead      int64 `json:"bytes_read,omitempty"`
	BytesSent      int64 `json:"bytes_sent,omitempty"`
	// Shards is where a pooled transfer's shards stand while it runs;
	// Agents what each agent sent of an ended one.
	Shards *Shards              `json:"shards,omitempty"`
	Agents []message.AgentBytes `json:"agents,omitempty"`
}

// MovedOf is what a transfer's done event says moved.
func MovedOf(d message.Done) benchrow.Moved {
	return benchrow.Moved{Whole: d.FilesWhole, Appended: d.Appended, Converted: d.FilesConverted, Read: d.BytesRead, Sent: d.BytesSent}
}

// Ended reports whether the transfer has ended, either way.
func (t Transfer) Ended() bool { return t.State != StateRunning && t.State != StateSealed }

// Object is one final object, with its CRC32Cs as GCS shows them.
type Object struct {
	Name      string `json:"name"`
	Size      int64  `json:"size"`
	CRC32C    string `json:"crc32c"`
	RawSize   int64  `json:"raw_size"`
	RawCRC32C string `json:"raw_crc32c"`
}

// validID is what transfer ids look like (message.NewTransferID, and the
// ids producer serve derives); anything else is refused before it becomes
// part of an object name.
var validID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// CheckID refuses what cannot be a transfer id.
func CheckID(id string) error {
	if !validID.MatchString(id) {
		return fmt.Errorf("transfer id %q: want letters, digits, - and _", id)
	}
	return nil
}

// Status reads the state of transfer id in bucket.
func Status(ctx context.Context, s objectStore, bucket, id string) (Transfer, error) {
	if err := CheckID(id); err != nil {
		return Transfer{}, err
	}
	t := Transfer{ID: id}
	if d, err := readDone(ctx, s, bucket, id); err == nil {
		return fromDone(d, true), nil
	} else if !errors.Is(err, gcs.ErrNotFound) {
		return t, err
	}
	b, err := s.ReadAll(ctx, bucket, message.ManifestObject(id))
	switch {
	case err == nil:
		var m message.Manifest
		if err := message.Decode(b, &m); err != nil {
			return t, fmt.Errorf("manifest gs://%s/%s: %w", bucket, message.ManifestObject(id), err)
		}
		return sealed(ctx, s, m)
	case !errors.Is(err, gcs.ErrNotFound):
		return t, err
	}
	t.State = StateRunning
	if _, err := staged(ctx, s, bucket, id, &t); err != nil {
		return t, err
	}
	if t.Shards, err = runningShards(ctx, s, bucket, id); err != nil {
		return t, err
	}
	if t.ChunksStaged == 0 {
		// Files of one chunk go straight to their final names: until
		// the manifest is sealed, the run its producer writes first is
		// all staging holds of the transfer.
		found := false
		err := s.List(ctx, bucket, message.RunObject(id), func(a gcs.Attrs) error {
			if a.Name == message.RunObject(id) {
				found, t.StartedAt = true, a.Created
			}
			return nil
		})
		if err != nil || found {
			return t, err
		}
		return t, fmt.Errorf("transfer %s: %w in gs://%s: no done marker under %s, nothing under %s (another bucket? not started? ended more than FERRY_DONE_RETENTION ago?)",
			id, ErrNotFound, bucket, message.DoneRoot, message.StagingPrefix(id))
	}
	return t, nil
}

func readDone(ctx context.Context, s objectStore, bucket, id string) (message.Done, error) {
	b, err := s.ReadAll(ctx, bucket, message.DoneMarker(id))
	if err != nil {
		return message.Done{}, err
	}
	var d message.Done
	if err := message.Decode(b, &d); err != nil {
		return d, fmt.Errorf("done marker gs://%s/%s: %w", bucket, message.DoneMarker(id), err)
	}
	return d, nil
}

// fromDone is an ended transfer; objects lists the final objects the done
// event names itself (at most message.MaxDoneInline; Listing has them all).
func fromDone(d message.Done, objects bool) Transfer {
	t := Transfer{ID: d.TransferID, State: d.Status, Destination: d.Destination, Error: d.Error,
		StartedAt: d.StartedAt, FinishedAt: d.FinishedAt, Files: d.Files, FilesDone: d.Files,
		Bytes: d.Bytes, BytesDone: d.Bytes, Listing: d.Listing, Load: d.Load, Rejected: d.Rejected,
		Appended: d.Appended, AppendedBytes: d.AppendedBytes, FilesWhole: d.FilesWhole, FilesConverted: d.FilesConverted,
		FilesSkipped: d.FilesSkipped, BytesRead: d.BytesRead, BytesSent: d.BytesSent, Agents: d.Agents}
	if objects {
		for _, o := range d.Objects {
			t.Objects = append(t.Objects, Object{Name: o.Name, Size: o.Size, CRC32C: crc32c.Base64(o.CRC32C),
				RawSize: o.RawSize, RawCRC32C: crc32c.Base64(o.RawCRC32C)})
		}
	}
	return t
}

// sealed is a transfer whose manifest is sealed: its files are done when
// their final object carries its id; the rest count their uploaded chunks.
func sealed(ctx context.Context, s objectStore, m message.Manifest) (Transfer, error) {
	t := Transfer{ID: m.TransferID, State: StateSealed, Destination: "gs://" + m.Bucket, Files: len(m.Files), StartedAt: m.StartedAt}
	if m.Pool {
		sh, err := shardsOf(ctx, s, m.Bucket, m.TransferID, m.Run)
		if err != nil {
			return t, err
		}
		t.Shards, t.Agents = sh, m.Agents
	}
	prefix := ""
	if m.Prefix != "" {
		t.Destination += "/" + m.Prefix
		prefix = m.Prefix + "/"
	}
	if m.Paged() {
		return sealedPaged(ctx, s, m, t, prefix)
	}
	chunkRaw := map[string]int64{}
	final := map[string]int{}
	for i, f := range m.Files {
		t.Bytes += f.Size
		final[f.Object] = i
		for _, c := range f.Chunks {
			chunkRaw[c.Object] = c.RawSize
		}
	}
	done := make([]bool, len(m.Files))
	err := s.List(ctx, m.Bucket, prefix, func(a gcs.Attrs) error {
		if i, ok := final[a.Name]; ok && a.Metadata[message.MetaTransfer] == m.TransferID {
			done[i] = true
		}
		return nil
	})
	if err != nil {
		return t, err
	}
	present, err := staged(ctx, s, m.Bucket, m.TransferID, &t)
	if err != nil {
		return t, err
	}
	for i, f := range m.Files {
		if done[i] {
			t.FilesDone++
			t.BytesDone += f.Size
			continue
		}
		for _, c := range f.Chunks {
			if present[c.Object] {
				t.BytesDone += chunkRaw[c.Object]
			}
		}
	}
	return t, nil
}

// sealedPaged is sealed for a manifest whose files are paged: it counts
// from the header's totals and what the objects' metadata says, reading no
// page, so a status costs a listing whatever the transfer's size. A file
// of several chunks counts once composed; until then its staged chunks
// show in ChunksStaged and WireStaged.
func sealedPaged(ctx context.Context, s objectStore, m message.Manifest, t Transfer, prefix string) (Transfer, error) {
	t.Files, t.Bytes = m.Totals.Files, m.Totals.Bytes
	err := s.List(ctx, m.Bucket, prefix, func(a gcs.Attrs) error {
		if a.Metadata[message.MetaTransfer] != m.TransferID || strings.HasPrefix(a.Name, message.StagingRoot) {
			return nil
		}
		if raw, err := strconv.ParseInt(a.Metadata[message.MetaRawSize], 10, 64); err == nil {
			t.FilesDone++
			t.BytesDone += raw
		}
		return nil
	})
	if err != nil {
		return t, err
	}
	if _, err := staged(ctx, s, m.Bucket, m.TransferID, &t); err != nil {
		return t, err
	}
	return t, nil
}

// staged counts the chunk objects of transfer id in staging and returns
// their names.
func staged(ctx context.Context, s objectStore, bucket, id string, t *Transfer) (map[string]bool, error) {
	present := map[string]bool{}
	err := s.List(ctx, bucket, message.ChunkPrefix(id), func(a gcs.Attrs) error {
		present[a.Name] = true
		t.ChunksStaged++
		t.WireStaged += a.Size
		return nil
	})
	return present, err
}

// List returns the transfers bucket knows: the running ones first, newest
// first, then up to limit ended ones, newest first.
func List(ctx context.Context, s objectStore, bucket string, limit int) ([]Transfer, error) {
	ended := map[string]time.Time{}
	if err := s.List(ctx, bucket, message.DoneRoot, func(a gcs.Attrs) error {
		if id, ok := strings.CutSuffix(strings.TrimPrefix(a.Name, message.DoneRoot), ".json"); ok && validID.MatchString(id) {
			ended[id] = a.Created
		}
		return nil
	}); err != nil {
		return nil, err
	}
	// Staging: a transfer's chunk, intermediate and seek-table objects
	// and its manifest. Other things under .ferry/ (rows staged for
	// BigQuery) are not transfers.
	running := map[string]*Transfer{}
	var order []string
	if err := s.List(ctx, bucket, message.StagingRoot, func(a gcs.Attrs) error {
		id, rest, ok := strings.Cut(strings.TrimPrefix(a.Name, message.StagingRoot), "/")
		if !ok || !validID.MatchString(id) || !isStaging(rest) {
			return nil
		}
		if _, isEnded := ended[id]; isEnded {
			return nil // ended; its staging is being removed
		}
		t, seen := running[id]
		if !seen {
			t = &Transfer{ID: id, State: StateRunning, StartedAt: a.Created}
			running[id] = t
			order = append(order, id)
		}
		if a.Created.Before(t.StartedAt) {
			t.StartedAt = a.Created
		}
		switch {
		case rest == "manifest.json":
			t.State = StateSealed
		case strings.HasPrefix(rest, "c/"):
			t.ChunksStaged++
			t.WireStaged += a.Size
		}
		return nil
	}); err != nil {
		return nil, err
	}
	var out []Transfer
	for _, id := range order {
		t := *running[id]
		if t.State == StateSealed {
			st, err := Status(ctx, s, bucket, id)
			if err != nil && !errors.Is(err, ErrNotFound) {
				return nil, err
			}
			if err == nil {
				st.Objects = nil
				t = st
			}
		}
		out = append(out, t)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].StartedAt.After(out[j].StartedAt) })
	ids := make([]string, 0, len(ended))
	for id := range ended {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		if !ended[ids[i]].Equal(ended[ids[j]]) {
			return ended[ids[i]].After(ended[ids[j]])
		}
		return ids[i] > ids[j]
	})
	if limit > 0 && len(ids) > limit {
		ids = ids[:limit]
	}
	for _, id := range ids {
		d, err := readDone(ctx, s, bucket, id)
		if errors.Is(err, gcs.ErrNotFound) {
			continue // removed since the listing (retention)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, fromDone(d, false))
	}
	return out, nil
}

// isStaging reports whether rest (the part after .ferry/<id>/) is one of a
// transfer's staging objects.
func isStaging(rest string) bool {
	return rest == "run" || message.TransferObject(rest)
}

// Cancel asks the merger to end transfer id as cancelled: it publishes a
// cancel event on the control topic, proven by key (an end key of the
// transfer: its submitter's, or an operator's from OperatorKey). The merger
// publishes the done event, writes the row and removes the staging
// objects; workers drop the chunks still queued. A transfer that has ended,
// or that the bucket holds nothing of, is not cancelled (ErrEnded,
// ErrNotFound).
func Cancel(ctx context.Context, s objectStore, events publisher, bucket, id, key string) (Transfer, error) {
	t, err := Status(ctx, s, bucket, id)
	if err != nil {
		return t, err
	}
	if t.Ended() {
		return t, fmt.Errorf("transfer %s: %w %s", id, ErrEnded, t.State)
	}
	ev := message.Event{V: message.Version, Type: message.EventCancel, TransferID: id, Bucket: bucket, Key: key, At: time.Now().UTC()}
	if err := events.Publish(ctx, message.Encode(ev), map[string]string{"transfer_id": id, "type": ev.Type}); err != nil {
		return t, fmt.Errorf("publish the cancel event of transfer %s: %w", id, err)
	}
	return t, nil
}
