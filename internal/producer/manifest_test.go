package producer

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/seektable"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// TestSealedManifestPredictsTheFinalObject: the manifest's wire size and
// CRC32C of a composed file are those of its chunks' bytes in order followed
// by File.SeekTable (zstd), the object the merger composes; that object
// decompresses to the source with Go and with the stock zstd, and its seek
// table lists every frame of every chunk. gzip objects carry no table.
func TestSealedManifestPredictsTheFinalObject(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "big.csv")
	testutil.WriteCSV(t, src, 26_000_000, 1) // chunks of 12, 12 and 0.8 MiB: 2, 2 and 1 frames of at most 8 MiB
	raw, _ := os.ReadFile(src)
	for _, c := range []codec.Codec{codec.Zstd, codec.Gzip} {
		t.Run(string(c), func(t *testing.T) {
			chunks := &teststack.Recorder{}
			p := New(Options{Store: nopStore{}, Chunks: chunks, Events: &teststack.Recorder{}, SpoolDir: t.TempDir(), InlineMax: 4 << 20,
				Transport: "pubsub", MessageMax: 30_000_000})
			man, err := p.Submit(context.Background(), Request{Sources: []string{src}, Destination: "gs://bkt/x", Codec: c, ChunkSize: 12 << 20})
			if err != nil {
				t.Fatal(err)
			}
			f := &man.Files[0]
			if len(f.Chunks) != 3 || f.RawCRC32C != crc32c.Checksum(raw) {
				t.Fatalf("%d chunks, raw crc32c %08x; want 3 and %08x", len(f.Chunks), f.RawCRC32C, crc32c.Checksum(raw))
			}
			payloads := make([][]byte, 3)
			for _, m := range decodeAll(t, chunks, "") {
				payloads[m.c.Parts[0].Index] = m.payload
			}
			table := f.SeekTable()
			object := append(bytes.Join(payloads, nil), table...)
			if int64(len(object)) != f.WireSize || crc32c.Checksum(object) != f.WireCRC32 {
				t.Fatalf("composed object: %d bytes crc %08x; manifest predicts %d bytes crc %08x", len(object), crc32c.Checksum(object), f.WireSize, f.WireCRC32)
			}
			if !bytes.Equal(decompress(t, c, object), raw) {
				t.Fatal("the composed object does not decompress to the source")
			}
			if c != codec.Zstd {
				if table != nil {
					t.Fatalf("a %s object got a seek table", c)
				}
				return
			}
			frames, err := seektable.Parse(table)
			var rawSum, wireSum int64
			for _, fr := range frames {
				rawSum += int64(fr.Raw)
				wireSum += int64(fr.Wire)
			}
			if err != nil || len(frames) != 5 || rawSum != int64(len(raw)) || wireSum+int64(len(table)) != f.WireSize {
				t.Fatalf("seek table %v (%v): want 5 frames covering the object", frames, err)
			}
			if zstd, err := exec.LookPath("zstd"); err == nil {
				obj := filepath.Join(dir, "big.csv.zst")
				testutil.OK(t, os.WriteFile(obj, object, 0o644))
				out, err := exec.Command(zstd, "-d", "-c", obj).Output()
				if err != nil || !bytes.Equal(out, raw) {
					t.Fatalf("stock zstd -d: %v (%d bytes)", err, len(out))
				}
			}
		})
	}
}
