package merger

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
)

// rejects are the records an ok transfer's conversions left out
// (--bad-rows), gathered from its manifest by confirm: one NDJSON object
// per source, beside its Parquet parts (message.RejectsObject), its
// records in the order of the file. The manifest is the producer's claim,
// so the merger holds at most message.MaxBadRows of them.
type rejects struct {
	objects []rejectsObject
	index   map[string]int
	n       int
	over    bool // the manifest lists more than message.MaxBadRows
}

type rejectsObject struct {
	name string
	body []byte
}

// add gathers the rejects of f, a Parquet part.
func (r *rejects) add(f *message.File) error {
	if f.Table == nil || len(f.Table.Rejects) == 0 || r.over {
		return nil
	}
	if r.n += len(f.Table.Rejects); r.n > message.MaxBadRows {
		r.over, r.objects, r.index = true, nil, nil
		return nil
	}
	name := message.RejectsObject(f.Object)
	if r.index == nil {
		r.index = map[string]int{}
	}
	k, ok := r.index[name]
	if !ok {
		k = len(r.objects)
		r.index[name] = k
		r.objects = append(r.objects, rejectsObject{name: name})
	}
	for _, rj := range f.Table.Rejects {
		b, err := json.Marshal(rj)
		if err != nil {
			return err
		}
		r.objects[k].body = append(append(r.objects[k].body, b...), '\n')
	}
	return nil
}

// tooMany is the failure of a transfer whose manifest lists more rejects
// than any producer leaves out.
func (r *rejects) tooMany() error {
	if !r.over {
		return nil
	}
	return fmt.Errorf("the manifest lists more than %d rejected records (--bad-rows allows at most that many)", message.MaxBadRows)
}

// writeRejects writes each source's rejects object of t, and lists it in
// sum's done objects and listing. An object is written whole, with its
// CRC32C checked by GCS, and replaces any older one: a repeated end writes
// the same bytes again.
func (m *Merger) writeRejects(ctx context.Context, t *transfer, sum *summary) error {
	for _, o := range sum.rejects.objects {
		crc := crc32c.Checksum(o.body)
		size := int64(len(o.body))
		a, err := m.o.Store.Upload(ctx, t.bucket, o.name, bytes.NewReader(o.body), gcs.UploadOptions{
			Size: size, CRC32C: crc, ContentType: "application/x-ndjson", KMSKey: m.o.Buckets.KMSKey,
			Metadata: message.FinalMetadata(t.id, size, crc, "none"),
		})
		if err != nil {
			return fmt.Errorf("rejects object gs://%s/%s: %w", t.bucket, o.name, err)
		}
		d := message.DoneObject{Name: "gs://" + t.bucket + "/" + o.name, Size: size, CRC32C: crc, Generation: a.Generation, RawSize: size, RawCRC32C: crc}
		if len(sum.objects) < message.MaxDoneInline {
			sum.objects = append(sum.objects, d)
		}
		if err := sum.listing.Add(message.ListingEntry{DoneObject: d}); err != nil {
			return err
		}
	}
	return nil
}
