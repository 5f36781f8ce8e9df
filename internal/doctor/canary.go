package doctor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/plan"
	"github.com/ferry-dev/ferry/internal/producer"
	"github.com/ferry-dev/ferry/internal/submit"
	"github.com/ferry-dev/ferry/internal/verify"
)

// CanaryPrefix is where canary transfers land in the bucket, each under a
// folder of its own that the canary removes.
const CanaryPrefix = "ferry-doctor/"

// canaryStore is what the canary reads and removes. *gcs.Store has it.
type canaryStore interface {
	Attrs(ctx context.Context, bucket, name string) (gcs.Attrs, error)
	NewRangeReader(ctx context.Context, bucket, name string, offset, length int64) (io.ReadCloser, error)
	List(ctx context.Context, bucket, prefix string, fn func(gcs.Attrs) error) error
	Delete(ctx context.Context, bucket, name string) error
}

var _ canaryStore = (*gcs.Store)(nil)

// CanaryOptions are one canary transfer.
type CanaryOptions struct {
	// Config is the fleet's configuration, as producer submit reads it.
	Config *config.Producer
	Bucket string
	Store  canaryStore
	// Timeout bounds the transfer: the fleet must end it within it.
	Timeout time.Duration
	// Dir holds the canary's files while it runs; ID names the run.
	Dir, ID, Version string
}

// canaryFiles are a few small files and one of three chunks: bundling,
// one-chunk uploads and a compose all take part.
func canaryFiles(id string) map[string][]byte {
	r := rand.New(rand.NewPCG(uint64(len(id)), 7)) //nolint:gosec // test data, not secrets
	noise := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		return b
	}
	big := bytes.Repeat([]byte("ferry doctor canary, "+id+"\n"), int(config.MinChunkSize)*5/2/(22+len(id)))
	return map[string][]byte{
		"small.txt":     []byte("ferry doctor " + id + "\n"),
		"random.bin":    noise(64 << 10),
		"rows.csv":      []byte("date,symbol,price\n2026-12-03,FRY,0.51\n2026-12-03,DOC,12.25\n"),
		"three-chunks":  big,
		"empty.dat":     {},
		"sub/deeper.md": []byte("# canary\n"),
	}
}

// Canary sends a few small files and a three-chunk file through the fleet
// as producer submit --wait would, reads every object back against its
// source (bytes and CRC32C), and removes them. When the transfer does not
// end in time it says which side did not answer: no object reached GCS (the
// workers), or objects did and no done (the merger).
func Canary(ctx context.Context, o CanaryOptions) []Result {
	root := filepath.Join(o.Dir, "canary-"+o.ID)
	files := canaryFiles(o.ID)
	for name, b := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return []Result{{"canary: files", Fail, err.Error(), "check --dir"}}
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return []Result{{"canary: files", Fail, err.Error(), "check --dir"}}
		}
	}
	defer os.RemoveAll(root)
	dest := "gs://" + o.Bucket + "/" + CanaryPrefix + o.ID
	req := producer.Request{Sources: []string{root}, Destination: dest, Codec: codec.Zstd, ChunkSize: int64(config.MinChunkSize),
		Method: "ferry-doctor", Selection: plan.Selection{Symlinks: plan.SymlinksFiles}}
	if err := producer.Validate(req); err != nil {
		return []Result{{"canary: transfer", Fail, err.Error(), "check FERRY_BUCKETS"}}
	}
	req.TransferID = message.NewTransferID("")
	var out bytes.Buffer
	start := time.Now()
	err := submit.Run(ctx, o.Config, submit.Options{Request: req, Wait: true, Timeout: o.Timeout, Version: o.Version, ID: "doctor-" + o.ID,
		Stdout: &out, Stderr: &out})
	finals := CanaryPrefix + o.ID + "/"
	if err != nil {
		return append(fleetDown(ctx, o, req.TransferID, finals, time.Since(start), err), cleanup(context.WithoutCancel(ctx), o, finals))
	}
	rs := []Result{
		{"fleet: workers", OK, "uploaded the canary's chunks", ""},
		{"fleet: merger", OK, "composed the canary and published its done event", ""},
		{"canary: transfer", OK, fmt.Sprintf("%s ended ok in %s: %d files to %s", req.TransferID, time.Since(start).Round(time.Millisecond), len(files), dest), ""},
	}
	base := filepath.Base(root)
	var bad []string
	for name := range files {
		obj := finals + base + "/" + name + codec.Zstd.Ext()
		rep, err := verify.Object(ctx, o.Store, o.Bucket, obj, codec.Zstd, filepath.Join(root, filepath.FromSlash(name)))
		if err != nil {
			bad = append(bad, fmt.Sprintf("gs://%s/%s: %v", o.Bucket, obj, err))
			continue
		}
		if rep.WireCRC32C == 0 && rep.RawSize > 0 {
			bad = append(bad, fmt.Sprintf("gs://%s/%s: no CRC32C", o.Bucket, obj))
		}
	}
	if len(bad) > 0 {
		return append(rs, Result{"canary: read back", Fail, strings.Join(bad, "; "), "a submitter may not read final objects (run as an operator); otherwise the fleet stored objects that differ from their sources: look at the workers' and merger's logs"},
			cleanup(context.WithoutCancel(ctx), o, finals))
	}
	return append(rs, Result{"canary: read back", OK, fmt.Sprintf("%d objects: bytes and CRC32C identical to their sources", len(files)), ""},
		cleanup(context.WithoutCancel(ctx), o, finals))
}

// fleetDown says which side of the fleet did not end the canary.
func fleetDown(ctx context.Context, o CanaryOptions, tid, finals string, took time.Duration, err error) []Result {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), checkTimeout)
	defer cancel()
	stored := 0
	// Only workers write chunk objects and one-chunk final objects; the
	// producer's manifest does not count.
	for _, prefix := range []string{message.ChunkPrefix(tid), finals} {
		_ = o.Store.List(cctx, o.Bucket, prefix, func(gcs.Attrs) error {
			stored++
			return nil
		})
	}
	transfer := Result{"canary: transfer", Fail, fmt.Sprintf("%s did not end ok within %s: %v", tid, took.Round(time.Second), err), ""}
	var ended *submit.EndedError
	if errors.As(err, &ended) {
		// The fleet answered: it ended the canary failed, with its cause.
		transfer.Do = "the error names the cause; producer status " + tid
		return []Result{{"fleet: workers", OK, "answered", ""}, {"fleet: merger", OK, "ended the canary", ""}, transfer}
	}
	if stored == 0 {
		transfer.Do = "start workers; then producer doctor again"
		return []Result{{"fleet: workers", Fail, "no chunk of the canary reached GCS: no worker receives from " + o.Config.PubSub.ChunksSubscription,
			"check the worker group (gcloud compute instance-groups managed list-instances ferry-worker) and its /readyz"},
			{"fleet: merger", Skip, "not reached: nothing to compose", ""}, transfer}
	}
	transfer.Do = "start a merger; the transfer ends when one composes it (producer status " + tid + ")"
	return []Result{{"fleet: workers", OK, fmt.Sprintf("uploaded %d objects of the canary", stored), ""},
		{"fleet: merger", Fail, "the canary's chunks are stored, but no merger ended it: none receives from " + o.Config.PubSub.EventsSubscription,
			"check the merger group (ferry-merger) and its /readyz and logs"}, transfer}
}

// cleanup removes the canary's final objects and says whether it could;
// its staging is the merger's to remove (or the lifecycle rule's).
func cleanup(ctx context.Context, o CanaryOptions, finals string) Result {
	cctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	where := "gs://" + o.Bucket + "/" + finals
	var names []string
	if err := o.Store.List(cctx, o.Bucket, finals, func(a gcs.Attrs) error {
		names = append(names, a.Name)
		return nil
	}); err != nil {
		return Result{"canary: cleanup", Fail, "cannot list " + where + ": " + err.Error(), "gcloud storage rm -r " + where}
	}
	for _, n := range names {
		if err := o.Store.Delete(cctx, o.Bucket, n); err != nil && !errors.Is(err, gcs.ErrNotFound) {
			return Result{"canary: cleanup", Fail, "cannot remove gs://" + o.Bucket + "/" + n + ": " + err.Error(), "an operator removes them: gcloud storage rm -r " + where}
		}
	}
	return Result{"canary: cleanup", OK, fmt.Sprintf("removed %d objects under %s", len(names), where), ""}
}
