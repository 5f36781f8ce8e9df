package e2e

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/bench/datagen"
	"github.com/ferry-dev/ferry/internal/benchrow"
	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/level"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/plan"
	"github.com/ferry-dev/ferry/internal/producer"
	"github.com/ferry-dev/ferry/internal/seektable"
	"github.com/ferry-dev/ferry/internal/testutil"
	"github.com/ferry-dev/ferry/internal/verify"
)

// predictWire compresses path chunk by chunk, as the producer does (chunks
// here are below codec.FrameSize: one frame each), and combines the frames'
// CRC32Cs, with the seek table a zstd object ends with: an independent
// prediction of the final object's CRC32C and size.
func predictWire(t *testing.T, path string, c codec.Codec, chunk int64) (uint32, int64, int) {
	t.Helper()
	if chunk > codec.FrameSize {
		t.Fatalf("predictWire assumes one frame per chunk; chunk size %d", chunk)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := codec.NewEncoder(c, c.DefaultLevel())
	if err != nil {
		t.Fatal(err)
	}
	var parts []crc32c.Part
	var frames []seektable.Frame
	var size int64
	for off := int64(0); off < int64(len(data)) || off == 0; off += chunk {
		raw := data[off:min(off+chunk, int64(len(data)))]
		frame, err := enc.Encode(nil, raw)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, crc32c.Part{CRC32C: crc32c.Checksum(frame), Size: int64(len(frame))})
		frames = append(frames, seektable.Frame{Wire: uint32(len(frame)), Raw: uint32(len(raw))})
		size += int64(len(frame))
		if len(data) == 0 {
			break
		}
	}
	n := len(parts)
	if c == codec.Zstd {
		table := seektable.Append(nil, frames)
		parts = append(parts, crc32c.Part{CRC32C: crc32c.Checksum(table), Size: int64(len(table))})
		size += int64(len(table))
	}
	return crc32c.CombineAll(parts), size, n
}

func TestLargeFileComposesATwoLevelTree(t *testing.T) {
	s := newStack(t, stackOptions{workers: 2, inlineMax: 4 << 10}) // chunks go through the spool
	src := filepath.Join(t.TempDir(), "large_upload.csv")
	const chunk = 64 << 10
	testutil.WriteCSV(t, src, 3_000_000, 1) // 46 chunks: more than one compose of 32
	done, err := s.transfer(producer.Request{Sources: []string{src}, Destination: "gs://" + s.bucket + "/bench",
		Codec: codec.Zstd, Level: 3, ChunkSize: chunk, Method: "e2e"}) // a fixed level: predictWire's
	if err != nil || done.Status != message.StatusOK {
		t.Fatalf("transfer: %v, done %+v", err, done)
	}
	wantCRC, wantSize, chunks := predictWire(t, src, codec.Zstd, chunk)
	if chunks <= 32 {
		t.Fatalf("test data makes %d chunks; the tree needs more than 32", chunks)
	}
	if len(done.Objects) != 1 || done.Objects[0].CRC32C != wantCRC || done.Objects[0].Size != wantSize {
		t.Fatalf("done objects %+v, want one of %d bytes with crc32c %08x", done.Objects, wantSize, wantCRC)
	}
	a, err := s.store.Attrs(context.Background(), s.bucket, "bench/large_upload.csv.zst")
	if err != nil {
		t.Fatal(err)
	}
	if a.CRC32C != wantCRC || a.Size != wantSize {
		t.Fatalf("final object has %d bytes, crc32c %08x; predicted %d bytes, %08x", a.Size, a.CRC32C, wantSize, wantCRC)
	}
	rep, err := verify.Object(context.Background(), s.store, s.bucket, "bench/large_upload.csv.zst", codec.Zstd, src)
	if err != nil {
		t.Fatal(err)
	}
	if rep.CLI != "zstd" {
		t.Errorf("the stock zstd CLI did not check the object (not on PATH?)")
	}
	s.assertClean()
	row := s.row(done.TransferID)
	if row.Status != "ok" || row.Chunks != chunks || row.SizeBytes < 3_000_000 || row.WireBytes != wantSize || row.Workers < 1 {
		t.Fatalf("benchmark row %+v", row)
	}
	if want := []benchrow.LevelUse{{Level: 3, Chunks: chunks, Bytes: row.SizeBytes}}; row.Level != 3 || !slices.Equal(row.Levels, want) {
		t.Fatalf("row level %d, levels %+v; want 3, and %+v", row.Level, row.Levels, want)
	}
}

// TestAdaptiveLevelsReachTheRow: with no level asked for, each chunk's
// level adapts; the object still reads back as the file, and the row says
// which levels its chunks used, adding up to the transfer.
func TestAdaptiveLevelsReachTheRow(t *testing.T) {
	s := newStack(t, stackOptions{workers: 2, inlineMax: 4 << 10})
	src := filepath.Join(t.TempDir(), "adaptive.csv")
	testutil.WriteCSV(t, src, 2_000_000, 4)
	done, err := s.transfer(producer.Request{Sources: []string{src}, Destination: "gs://" + s.bucket + "/adaptive",
		ChunkSize: 64 << 10, Method: "e2e-adaptive"})
	if err != nil || done.Status != message.StatusOK {
		t.Fatalf("transfer: %v, done %+v", err, done)
	}
	if _, err := verify.Object(context.Background(), s.store, s.bucket, "adaptive/adaptive.csv.zst", codec.Zstd, src); err != nil {
		t.Fatal(err)
	}
	row := s.row(done.TransferID)
	chunks, bytes := 0, int64(0)
	for _, u := range row.Levels {
		if !slices.Contains(level.Steps, u.Level) {
			t.Fatalf("levels %+v: level %d is not a step of %v", row.Levels, u.Level, level.Steps)
		}
		chunks += u.Chunks
		bytes += u.Bytes
	}
	if row.Level != 0 || chunks != row.Chunks || bytes != row.SizeBytes {
		t.Fatalf("row level %d, levels %+v: want 0 (adaptive), levels adding up to %d chunks of %d bytes", row.Level, row.Levels, row.Chunks, row.SizeBytes)
	}
	t.Logf("levels %+v", row.Levels)
}

func TestDirectoryOfSmallFilesAndAnEmptyFile(t *testing.T) {
	s := newStack(t, stackOptions{workers: 2, inlineMax: 256 << 10, bundleMax: 128 << 10})
	dir := filepath.Join(t.TempDir(), "many")
	if err := datagen.WriteManySmall(filepath.Join(dir, "parts"), 40, 20_000, 3); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "empty.csv"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.WriteCSV(t, filepath.Join(dir, "nested", "deeper", "one.csv"), 150_000, 9) // 3 chunks via the spool
	for _, c := range []codec.Codec{codec.Zstd, codec.Gzip, codec.None} {
		t.Run(string(c), func(t *testing.T) {
			prefix := "runs/" + string(c)
			done, err := s.transfer(producer.Request{Sources: []string{dir}, Destination: "gs://" + s.bucket + "/" + prefix,
				Codec: c, ChunkSize: 64 << 10, Method: "e2e-many"})
			if err != nil || done.Status != message.StatusOK {
				t.Fatalf("transfer: %v, done %+v", err, done)
			}
			if len(done.Objects) != 42 {
				t.Fatalf("%d objects, want 42", len(done.Objects))
			}
			_, files, err := plan.Resolve([]string{dir}, "gs://"+s.bucket+"/"+prefix, c)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range files {
				if !strings.HasPrefix(f.Object, prefix+"/many/") {
					t.Errorf("object %s does not keep the directory's name under the prefix", f.Object)
				}
				rep, err := verify.Object(context.Background(), s.store, s.bucket, f.Object, c, f.Path)
				if err != nil {
					t.Fatal(err)
				}
				if f.Size == 0 && rep.RawSize != 0 {
					t.Fatalf("empty file became %d bytes", rep.RawSize)
				}
			}
			s.assertClean()
			if row := s.row(done.TransferID); row.Files != 42 || row.Status != "ok" {
				t.Fatalf("row %+v", row)
			}
		})
	}
}

func TestZeroByteFileAlone(t *testing.T) {
	s := newStack(t, stackOptions{workers: 1, inlineMax: 256 << 10})
	src := filepath.Join(t.TempDir(), "nothing.csv")
	if err := os.WriteFile(src, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	done, err := s.transfer(producer.Request{Sources: []string{src}, Destination: "gs://" + s.bucket, ChunkSize: 1 << 20})
	if err != nil || done.Status != message.StatusOK {
		t.Fatalf("transfer: %v, done %+v", err, done)
	}
	r, err := s.store.NewReader(context.Background(), s.bucket, "nothing.csv.zst")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	dec, err := codec.NewReader(codec.Zstd, r)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(dec); err != nil || len(b) != 0 {
		t.Fatalf("0-byte file decompresses to %d bytes, %v", len(b), err)
	}
}

func TestExistingDestinationFailsClearlyAndIsUntouched(t *testing.T) {
	s := newStack(t, stackOptions{workers: 1, inlineMax: 256 << 10})
	src := filepath.Join(t.TempDir(), "data.csv")
	testutil.WriteCSV(t, src, 300_000, 5)
	req := producer.Request{Sources: []string{src}, Destination: "gs://" + s.bucket + "/x", ChunkSize: 64 << 10}
	first, err := s.transfer(req)
	if err != nil || first.Status != message.StatusOK {
		t.Fatalf("first transfer: %v %+v", err, first)
	}
	before, _ := s.store.Attrs(context.Background(), s.bucket, "x/data.csv.zst")
	second, _ := s.transfer(req)
	if second.Status != message.StatusFailed || !strings.Contains(second.Error, "gs://"+s.bucket+"/x/data.csv.zst already exists") ||
		!strings.Contains(second.Error, "-n skips objects that exist") {
		t.Fatalf("second transfer: status %q error %q, want failed naming the existing object and the flags that would skip it", second.Status, second.Error)
	}
	after, _ := s.store.Attrs(context.Background(), s.bucket, "x/data.csv.zst")
	if after.Generation != before.Generation || after.CRC32C != before.CRC32C {
		t.Fatalf("existing object was touched: generation %d→%d", before.Generation, after.Generation)
	}
	s.assertClean()
	if row := s.row(second.TransferID); row.Status != "failed" || !strings.Contains(row.Error, "already exists") {
		t.Fatalf("row %+v", row)
	}
}

// TestPubSubTransportSharesNothingButPubSub: with FERRY_TRANSPORT=pubsub the
// producer writes no spool file and the workers have no spool at all (as on
// separate VMs); small files travel in bundles, a large file in capped
// chunks, and every object arrives intact, each with its own CRC32C.
func TestPubSubTransportSharesNothingButPubSub(t *testing.T) {
	s := newStack(t, stackOptions{workers: 2, pubsub: true, bundleMax: 256 << 10})
	dir := filepath.Join(t.TempDir(), "fleet")
	if err := datagen.WriteManySmall(filepath.Join(dir, "small"), 30, 15_000, 5); err != nil {
		t.Fatal(err)
	}
	testutil.WriteCSV(t, filepath.Join(dir, "large.csv"), 8_000_000, 6)
	req := producer.Request{Sources: []string{dir}, Destination: "gs://" + s.bucket + "/fleet", Codec: codec.Zstd, ChunkSize: 32 << 20}
	done, err := s.transfer(req)
	if err != nil || done.Status != message.StatusOK || len(done.Objects) != 31 {
		t.Fatalf("transfer: %v, done %+v", err, done)
	}
	s.verifyAll(req)
	if left, _ := os.ReadDir(s.spool); len(left) != 0 {
		t.Fatalf("%d spool files written with the pubsub transport", len(left))
	}
	s.assertClean()
	// 8 MB at the cap for a 3 MiB message (plan.MessageChunkCap) is 3
	// chunks, beside 30 one-chunk files.
	if row := s.row(done.TransferID); row.Files != 31 || row.Chunks != 33 {
		t.Fatalf("row %+v: want 31 files in 33 chunks", row)
	}
}
