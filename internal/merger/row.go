package merger

import (
	"sort"
	"strings"

	"github.com/ferry-dev/ferry/internal/benchrow"
	"github.com/ferry-dev/ferry/internal/message"
)

// Row builds the benchmark row of a finished transfer; workers counts
// the workers that stored its chunks.
func Row(done message.Done, man *message.Manifest, workers int, version string) benchrow.Row {
	r := benchrow.Row{
		TransferID: done.TransferID, Method: man.Method, Source: strings.Join(man.Sources, ","), Destination: done.Destination,
		Files: man.Totals.Files, Codec: man.Codec, Level: man.Level, ChunkSize: man.ChunkSize,
		CompressMS: done.Timings.Compress, UploadMS: done.Timings.Upload, ComposeMS: done.Timings.Compose,
		VerifyMS: done.Timings.Verify, TotalMS: done.Timings.Total,
		Status: done.Status, Error: done.Error, StartedAt: done.StartedAt, FinishedAt: done.FinishedAt, FerryVersion: version,
		SizeBytes: man.Totals.Bytes, WireBytes: man.Totals.WireBytes, Chunks: man.Totals.Chunks, Workers: workers,
		FilesSkipped: man.Totals.Skipped, TableBytes: man.Totals.TableBytes, Rows: man.Totals.Rows, RowsRejected: man.Totals.Rejected,
	}
	if l := done.Load; l != nil {
		r.BQTable, r.BQJobID, r.BQRows = l.Table, l.JobID, l.Rows
	}
	r.FilesAppended, r.BytesAppended = done.Appended, done.AppendedBytes
	r.Tier = benchrow.TierOf(r.SizeBytes)
	if r.WireBytes > 0 {
		r.Ratio = float64(r.SizeBytes) / float64(r.WireBytes)
	}
	if done.Status == message.StatusOK {
		// A failed or cancelled transfer moved part of its bytes: a rate
		// over all of them would be a number nobody measured.
		r.RawMBps = benchrow.Float(benchrow.MBps(r.SizeBytes, r.TotalMS))
		r.WireMBps = benchrow.Float(benchrow.MBps(r.WireBytes, r.UploadMS))
	}
	for _, u := range man.Levels {
		r.Levels = append(r.Levels, benchrow.LevelUse{Level: u.Level, Chunks: u.Chunks, Bytes: u.Bytes})
	}
	r.Pool = man.Pool
	for _, a := range man.Agents {
		r.Agents = append(r.Agents, benchrow.Agent{Agent: a.Agent, Bytes: a.Bytes})
	}
	for k, v := range man.Labels {
		r.Labels = append(r.Labels, benchrow.Label{Key: k, Value: v})
	}
	sort.Slice(r.Labels, func(i, j int) bool { return r.Labels[i].Key < r.Labels[j].Key })
	return r
}
