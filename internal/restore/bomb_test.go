package restore_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/restore"
	"github.com/ferry-dev/ferry/internal/seektable"
	"github.com/ferry-dev/ferry/internal/teststack"
)

// bomb stores a small zstd object whose seek table and metadata claim
// frames of claim raw bytes each, as the 1.19 MB object claimed
// 12 × 4 GiB. Its frames really decompress to 64 KiB of zeros each.
func bomb(t *testing.T, s *gcs.Store, bucket, name string, frames int, claim uint32) gcs.Attrs {
	t.Helper()
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	var body []byte
	var table []seektable.Frame
	for range frames {
		n := len(body)
		body = enc.EncodeAll(make([]byte, 64<<10), body)
		table = append(table, seektable.Frame{Wire: uint32(len(body) - n), Raw: claim})
	}
	body = seektable.Append(body, table)
	md := message.FinalMetadata("bomb", int64(frames)*int64(claim), 0, "zstd")
	a, err := s.Upload(context.Background(), bucket, name, bytes.NewReader(body), gcs.UploadOptions{
		Size: int64(len(body)), CRC32C: crc32c.Checksum(body), Metadata: md})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// smallDisk mounts a tmpfs of size bytes where the test may (root), and
// says so when it may not.
func smallDisk(t *testing.T, size int) (string, bool) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.Itoa(size)); err != nil {
		t.Logf("no tmpfs of our own (%v): the free space is injected instead", err)
		return dir, false
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir, true
}

// Issue 17 §5: an object that claims more raw bytes than the destination
// can hold is refused before a byte is written, and leaves nothing: no
// temporary file, no journal. The claim is checked against statfs, on a
// small tmpfs where the test may mount one, else with the free space
// injected; a claim of 10^18 bytes is refused by the real statfs of any
// disk.
func TestBombsNeverFillTheDisk(t *testing.T) {
	s, bucket := newBucket(t)
	ctx := context.Background()
	bomb(t, s, bucket, "bombtable4g.zst", 12, 1<<32-1)
	dest, mounted := smallDisk(t, 4<<20)
	r := newRestorer(t, s, options())
	if !mounted {
		restore.SetFreeSpace(r, 400<<20)
	}
	_, err := r.Run(ctx, "gs://"+bucket+"/bombtable4g.zst", filepath.Join(dest, "out"))
	if !errors.Is(err, restore.ErrNoSpace) {
		t.Fatalf("restore of a 12 × 4 GiB claim: %v, want ErrNoSpace", err)
	}
	t.Log(err)
	assertOnly(t, dest)

	// No seek table, a claim of 10^18 bytes: the real statfs refuses it.
	raw := csv(200<<10, 7)
	teststack.FerryObject(t, s, bucket, "huge.csv.zst", raw, teststack.FerryOptions{NoTable: true,
		Metadata: map[string]string{message.MetaRawSize: "1000000000000000000"}})
	dest = t.TempDir()
	_, err = newRestorer(t, s, options()).Run(ctx, "gs://"+bucket+"/huge.csv.zst", filepath.Join(dest, "out"))
	if !errors.Is(err, restore.ErrNoSpace) {
		t.Fatalf("restore of a 10^18-byte claim: %v, want ErrNoSpace", err)
	}
	assertOnly(t, dest)
}

// Issue 17 §5: a disk that fills during a restore (ENOSPC) leaves neither
// the temporary file nor its journal, so the next restore into that file
// system is not blocked by the last one's leftovers.
func TestFullDiskLeavesNoTemporaryFile(t *testing.T) {
	dest, mounted := smallDisk(t, 1<<20)
	if !mounted {
		t.Skip("needs a tmpfs of its own (root) to fill")
	}
	s, bucket := newBucket(t)
	ctx := context.Background()
	raw := csv(3<<20, 11)
	teststack.FerryObject(t, s, bucket, "big.csv.zst", raw, teststack.FerryOptions{ChunkSize: 256 << 10, FrameSize: 32 << 10})
	r := newRestorer(t, s, options())
	restore.SetFreeSpace(r, 1<<40) // statfs would refuse it; make the write itself fail
	_, err := r.Run(ctx, "gs://"+bucket+"/big.csv.zst", dest+"/")
	if !errors.Is(err, restore.ErrWrite) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("restore into a full disk: %v, want ErrWrite with ENOSPC", err)
	}
	assertOnly(t, dest)
	if _, err := os.Stat(filepath.Join(dest, ".big.csv.ferry-part.log")); err == nil {
		t.Fatal("journal left behind")
	}
}
