package merger

import (
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ferry-dev/ferry/internal/datagen"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/result"
)

// Row builds the benchmark row of a finished transfer.
func Row(done message.Done, man *message.Manifest, present map[chunkKey]gcs.Attrs, version string) result.Row {
	r := result.Row{
		TransferID: done.TransferID, Method: man.Method, Source: strings.Join(man.Sources, ","), Destination: done.Destination,
		Files: len(man.Files), Codec: man.Codec, Level: man.Level, ChunkSize: man.ChunkSize,
		CompressMS: done.Timings.Compress, UploadMS: done.Timings.Upload, ComposeMS: done.Timings.Compose,
		VerifyMS: done.Timings.Verify, TotalMS: done.Timings.Total,
		Status: done.Status, Error: done.Error, StartedAt: done.StartedAt, FinishedAt: done.FinishedAt, FerryVersion: version,
	}
	for _, f := range man.Files {
		r.SizeBytes += f.Size
		r.WireBytes += f.WireSize
		r.Chunks += len(f.Chunks)
	}
	r.Tier = datagen.TierOf(r.SizeBytes)
	if r.WireBytes > 0 {
		r.Ratio = float64(r.SizeBytes) / float64(r.WireBytes)
	}
	if done.Status == message.StatusOK {
		// A failed or cancelled transfer moved part of its bytes: a rate
		// over all of them would be a number nobody measured.
		r.RawMBps = result.Float(result.MBps(r.SizeBytes, r.TotalMS))
		r.WireMBps = result.Float(result.MBps(r.WireBytes, r.UploadMS))
	}
	r.FilesSkipped = len(man.Skipped)
	workers := map[string]bool{}
	for _, a := range present {
		if w := a.Metadata[message.MetaWorker]; w != "" {
			workers[w] = true
		}
	}
	r.Workers = len(workers)
	for k, v := range man.Labels {
		r.Labels = append(r.Labels, result.Label{Key: k, Value: v})
	}
	sort.Slice(r.Labels, func(i, j int) bool { return r.Labels[i].Key < r.Labels[j].Key })
	return r
}

// uploadMS is the upload stage: from the first chunk upload's start to the
// last chunk object's creation.
func uploadMS(present map[chunkKey]gcs.Attrs) int64 {
	var first, last time.Time
	for _, a := range present {
		t, err := time.Parse(time.RFC3339Nano, a.Metadata[message.MetaUploadAt])
		if err != nil {
			continue
		}
		if first.IsZero() || t.Before(first) {
			first = t
		}
		if a.Created.After(last) {
			last = a.Created
		}
	}
	if first.IsZero() || last.Before(first) {
		return 0
	}
	return last.Sub(first).Milliseconds()
}

// ChunkRows builds the chunk rows of a transfer from the chunk objects'
// attributes: who uploaded each, on which attempt, and how long it took.
func ChunkRows(man *message.Manifest, present map[chunkKey]gcs.Attrs) []result.ChunkRow {
	var rows []result.ChunkRow
	for i, f := range man.Files {
		for j, c := range f.Chunks {
			a, ok := present[chunkKey{i, j}]
			if !ok {
				continue
			}
			r := result.ChunkRow{TransferID: man.TransferID, File: f.Path, Index: j, Bytes: c.RawSize, WireBytes: c.WireSize,
				Worker: a.Metadata[message.MetaWorker], UploadedAt: a.Created}
			r.Attempts, _ = strconv.Atoi(a.Metadata[message.MetaAttempt])
			if t, err := time.Parse(time.RFC3339Nano, a.Metadata[message.MetaUploadAt]); err == nil && a.Created.After(t) {
				r.UploadMS = a.Created.Sub(t).Milliseconds()
			}
			rows = append(rows, r)
		}
	}
	return rows
}
