package restore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/restore"
	"github.com/ferry-dev/ferry/internal/seektable"
	"github.com/ferry-dev/ferry/internal/teststack"
)

// fuzzFree is the free space the fuzzed restores see.
const fuzzFree = 32 << 20

// FuzzRestoreObject restores one hostile object: any body, with any claimed
// raw size and CRC32C, into a file system with 32 MiB free. Issue 17 §5:
// whatever the object says, restore either writes a file whose size and
// CRC32C are the ones its metadata claims, never more than the free space,
// or fails and leaves nothing behind: no file, no temporary file, no
// journal. The corpus starts from the bombs the issue built: a seek table
// claiming 4 GiB frames, a claimed size of 10^18 without a table, a million
// claimed frames, a claim smaller than the bytes, and an honest object.
func FuzzRestoreObject(f *testing.F) {
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	zeros := enc.EncodeAll(make([]byte, 64<<10), nil)
	honest := []byte("id,name\n1,ferry\n2,restore\n")
	for _, seed := range []struct {
		body  []byte
		size  string
		crc   uint32
		table bool
	}{
		{seektable.Append(append(append([]byte{}, zeros...), zeros...), []seektable.Frame{{Wire: uint32(len(zeros)), Raw: 1<<32 - 1}, {Wire: uint32(len(zeros)), Raw: 1<<32 - 1}}), "8589934590", 0, true},
		{zeros, "1000000000000000000", 0, false},
		{zeros, "1", 0, false},
		{seektable.Append(enc.EncodeAll(honest, nil), []seektable.Frame{{Wire: uint32(len(enc.EncodeAll(honest, nil))), Raw: uint32(len(honest))}}), strconv.Itoa(len(honest)), crc32c.Checksum(honest), true},
		{enc.EncodeAll(honest, nil), strconv.Itoa(len(honest)), crc32c.Checksum(honest), false},
		{[]byte("not zstd at all"), "15", 0, false},
	} {
		f.Add(seed.body, seed.size, seed.crc)
	}
	const bucket = "r-fuzz-restore"
	s := teststack.Bucket(f, bucket)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, body []byte, rawSize string, rawCRC uint32) {
		md := message.FinalMetadata("fuzz", 0, rawCRC, "zstd")
		md[message.MetaRawSize] = rawSize
		if _, err := s.Upload(ctx, bucket, "fuzz.zst", bytes.NewReader(body), gcs.UploadOptions{
			Size: int64(len(body)), CRC32C: crc32c.Checksum(body), Metadata: md}); err != nil {
			t.Fatal(err)
		}
		dest := t.TempDir()
		r := newRestorer(t, s, options())
		restore.SetFreeSpace(r, fuzzFree)
		out := filepath.Join(dest, "out")
		_, err := r.Run(ctx, "gs://"+bucket+"/fuzz.zst", out)
		names := files(t, dest)
		if err != nil {
			if len(names) != 0 {
				t.Fatalf("restore failed (%v) and left %q", err, names)
			}
			return
		}
		got, rerr := os.ReadFile(out)
		if rerr != nil {
			t.Fatalf("restore succeeded, but: %v", rerr)
		}
		if want, perr := strconv.ParseInt(rawSize, 10, 64); perr != nil || int64(len(got)) != want || crc32c.Checksum(got) != rawCRC {
			t.Fatalf("restore succeeded with %d bytes crc32c %08x; the metadata claims %q bytes crc32c %08x", len(got), crc32c.Checksum(got), rawSize, rawCRC)
		}
		if len(got) > fuzzFree || len(names) != 1 {
			t.Fatalf("restore wrote %d bytes into %d free, files %q", len(got), fuzzFree, names)
		}
	})
}

// files lists every file under dir, hidden ones included.
func files(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			out = append(out, p[len(dir):])
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(fmt.Errorf("listing %s: %w", dir, err))
	}
	return out
}
