package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/plan"
	"github.com/ferry-dev/ferry/internal/seektable"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
	"github.com/ferry-dev/ferry/internal/verify"
)

// Issue 13 §5: `producer submit - gs://BUCKET/PREFIX/NAME` streams standard
// input through the real binary into NAME.zst, with either transport: a
// stream of several chunks is staged and composed with its seek table, one
// of a single chunk goes straight to its name. The stock zstd -d reads each
// object back to the bytes piped in, and the object's CRC32C metadata is
// theirs.
func TestSubmitStdinThroughTheBinary(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pubsub bool
		size   int64
		chunk  string
		chunks int // in the manifest
	}{
		{"spool, five chunks", false, 5_000_000, "1MiB", 5},
		// --chunk-size 32MiB, capped so that a chunk fits a 3 MiB message.
		{"pubsub, capped chunks", true, 5_000_000, "32MiB", plan.ChunkCount(5_000_000, plan.MessageChunkCap(codec.Zstd, 3<<20))},
		{"spool, one chunk", false, 200_000, "1MiB", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStack(t, stackOptions{workers: 2, pubsub: tc.pubsub})
			src := filepath.Join(t.TempDir(), "dump.sql")
			testutil.WriteCSV(t, src, tc.size, 11)
			data, err := os.ReadFile(src)
			testutil.OK(t, err)
			size := int64(len(data)) // whole rows: a little over tc.size
			env := s.env("FERRY_BUCKETS="+s.bucket, "FERRY_MESSAGE_MAX=3MiB", "FERRY_BUNDLE_MAX=1MiB")
			if tc.pubsub {
				env = append(env, "FERRY_TRANSPORT=pubsub")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, filepath.Join(binaries(t), "producer"), "submit", "-", "gs://"+s.bucket+"/dumps/db.sql",
				"--chunk-size", tc.chunk, "--wait", "--json")
			cmd.Env = env
			var stdout, stderr teststack.SyncBuffer
			cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(data), &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("producer submit -: %v\n%s", err, stderr.String())
			}
			out := stdout.String()
			var done message.Done
			// --json: stdout is the done event and nothing else.
			testutil.OK(t, json.Unmarshal([]byte(out), &done))
			const object = "dumps/db.sql.zst"
			if done.Status != message.StatusOK || len(done.Objects) != 1 || done.Objects[0].Name != "gs://"+s.bucket+"/"+object ||
				done.Objects[0].RawSize != size || done.Objects[0].RawCRC32C != crc32c.Checksum(data) {
				t.Fatalf("done event %+v; want %s of %d bytes with crc32c %08x", done, object, size, crc32c.Checksum(data))
			}
			rep, err := verify.Object(ctx, s.store, s.bucket, object, codec.Zstd, src)
			if err != nil {
				t.Fatal(err)
			}
			if rep.CLI != "zstd" {
				t.Fatal("the stock zstd CLI did not read the object (not on PATH?)")
			}
			wire, err := s.store.ReadAll(ctx, s.bucket, object)
			testutil.OK(t, err)
			tableSize, err := seektable.TableSize(wire)
			testutil.OK(t, err)
			frames, err := seektable.Parse(wire[int64(len(wire))-tableSize:])
			testutil.OK(t, err)
			var raw int64
			for _, f := range frames {
				raw += int64(f.Raw)
			}
			if raw != size {
				t.Fatalf("seek table lists %d raw bytes in %d frames, want %d", raw, len(frames), size)
			}
			if r := s.row(done.TransferID); r.Chunks != tc.chunks || r.SizeBytes != size {
				t.Errorf("row: %d chunks of %d bytes, want %d chunks of %d", r.Chunks, r.SizeBytes, tc.chunks, size)
			}
			s.assertClean()
		})
	}
}
