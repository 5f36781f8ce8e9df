package merger

import (
	"iter"
	"sort"
	"strings"
	"time"

	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/result"
)

// Row builds the benchmark row of a finished transfer.
func Row(done message.Done, man *message.Manifest, present map[chunkKey]stored, version string) result.Row {
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
	r.Tier = result.TierOf(r.SizeBytes)
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
	for _, s := range present {
		if s.Worker != "" {
			workers[s.Worker] = true
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
func uploadMS(present map[chunkKey]stored) int64 {
	var first, last time.Time
	for _, s := range present {
		if s.Started.IsZero() {
			continue
		}
		if first.IsZero() || s.Started.Before(first) {
			first = s.Started
		}
		if s.Created.After(last) {
			last = s.Created
		}
	}
	if first.IsZero() || last.Before(first) {
		return 0
	}
	return last.Sub(first).Milliseconds()
}

// ChunkRows yields the chunk rows of a transfer from what was stored: who
// uploaded each chunk, on which attempt, and how long it took. They are
// made as the sink asks, never held.
func ChunkRows(man *message.Manifest, present map[chunkKey]stored) iter.Seq[result.ChunkRow] {
	return func(yield func(result.ChunkRow) bool) {
		for i, f := range man.Files {
			for j, c := range f.Chunks {
				s, ok := present[chunkKey{i, j}]
				if !ok {
					continue
				}
				r := result.ChunkRow{TransferID: man.TransferID, File: f.Path, Index: j, Bytes: c.RawSize, WireBytes: c.WireSize,
					Worker: s.Worker, Attempts: s.Attempt, UploadedAt: s.Created}
				if !s.Started.IsZero() && s.Created.After(s.Started) {
					r.UploadMS = s.Created.Sub(s.Started).Milliseconds()
				}
				if !yield(r) {
					return
				}
			}
		}
	}
}
