package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/producer"
	"github.com/ferry-dev/ferry/internal/testutil"
	"github.com/ferry-dev/ferry/internal/verify"
)

// Issue 30, through the stack (--skip-unchanged's default): a file that grew is sent as its tail only, twice in a row, for
// each codec; the object then holds the whole file, as ferry's own check
// and the stock tool (zstd -d, gzip -d) read it, a zstd object's seek
// table inside it as a skippable frame. The producer compressed the tail's
// bytes only; --no-append sends it whole. A file changed in the middle,
// size grown and mtime put back, and one truncated and grown back to the
// same length, go whole.
func TestAGrownFileSendsItsTailOnly(t *testing.T) {
	for _, c := range []codec.Codec{codec.Zstd, codec.Gzip, codec.None} {
		t.Run(string(c), func(t *testing.T) {
			s := newStack(t, stackOptions{workers: 2, inlineMax: 64 << 10})
			dir := filepath.Join(t.TempDir(), "logs")
			testutil.OK(t, os.MkdirAll(dir, 0o755))
			src := filepath.Join(dir, "app.csv")
			testutil.WriteCSV(t, src, 2_500_000, 3)
			object := "land/logs/app.csv" + c.Ext()
			send := func(noAppend ...bool) (message.Done, int64) {
				t.Helper()
				done, err := s.transfer(producer.Request{Sources: []string{dir}, Destination: "gs://" + s.bucket + "/land", Codec: c, ChunkSize: 1 << 20,
					Method: "e2e-append", SkipUnchanged: true, NoAppend: len(noAppend) > 0})
				if err != nil || done.Status != message.StatusOK {
					t.Fatalf("transfer: %v, done %+v", err, done)
				}
				rep, err := verify.Object(context.Background(), s.store, s.bucket, object, c, src)
				if err != nil {
					t.Fatalf("the object after the transfer: %v", err)
				}
				if c != codec.None && rep.CLI == "" {
					t.Errorf("the stock %s CLI did not check the object", c)
				}
				var compressed int64
				for _, l := range s.row(done.TransferID).Levels {
					compressed += l.Bytes
				}
				return done, compressed
			}
			grow := func(n int) int64 {
				t.Helper()
				fh, err := os.OpenFile(src, os.O_APPEND|os.O_WRONLY, 0)
				testutil.OK(t, err)
				defer fh.Close()
				line := []byte("2026-12-04,XYZ,US0000000000,NYSE,USD,1.000000,1.000000,1.000000,1.000000,1.000000,100\n")
				var added int64
				for added < int64(n) {
					k, err := fh.Write(line)
					testutil.OK(t, err)
					added += int64(k)
				}
				return added
			}
			send()
			a0, err := s.store.Attrs(context.Background(), s.bucket, object)
			testutil.OK(t, err)
			for round := range 2 {
				added := grow(300_000)
				if round == 0 {
					code, out, stderr := runBinary(t, s.env("FERRY_BUCKETS="+s.bucket), "producer", "submit", "--dry-run", "--skip-unchanged",
						"--codec", string(c), "--chunk-size", "1MiB", dir, "gs://"+s.bucket+"/land")
					if code != 0 || !strings.Contains(out, "append  gs://"+s.bucket+"/"+object+"  +") {
						t.Fatalf("dry run: exit %d\n%s\n%s", code, out, stderr)
					}
				}
				done, compressed := send()
				if done.Appended != 1 || done.AppendedBytes != added {
					t.Fatalf("round %d: done says %d files appended, %d bytes; want 1 and %d", round, done.Appended, done.AppendedBytes, added)
				}
				if r := s.row(done.TransferID); r.FilesAppended != 1 || r.BytesAppended != added {
					t.Fatalf("round %d: row says %d files appended, %d bytes", round, r.FilesAppended, r.BytesAppended)
				}
				a, err := s.store.Attrs(context.Background(), s.bucket, object)
				testutil.OK(t, err)
				if a.Generation == a0.Generation || a.Metadata[message.MetaTransfer] != done.TransferID {
					t.Fatalf("round %d: the object was not replaced by the append: %+v", round, a)
				}
				if compressed != added {
					t.Fatalf("round %d: the producer compressed %d bytes; the file grew by %d", round, compressed, added)
				}
				t.Logf("round %d: grew %d bytes, compressed %d, object %d bytes", round, added, compressed, a.Size)
				a0 = a
			}
			// ferry's restore reads it back, through the seek table
			// (zstd) that now lists the old one as a frame of no bytes.
			out := filepath.Join(t.TempDir(), "out")
			if code, _, stderr := runBinary(t, s.env(), "restore", "gs://"+s.bucket+"/land/", out); code != 0 {
				t.Fatalf("restore: exit %d, %s", code, stderr)
			}
			want, err := os.ReadFile(src)
			testutil.OK(t, err)
			got, err := os.ReadFile(filepath.Join(out, "logs", "app.csv"))
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("restored %d bytes (%v), the file has %d", len(got), err, len(want))
			}
			// --no-append: whole.
			size := int64(len(want)) + grow(1000)
			if done, compressed := send(true); compressed != size || done.Appended != 0 {
				t.Fatalf("--no-append: the producer compressed %d bytes of %d, %d files appended", compressed, size, done.Appended)
			}
			// The middle changed and the size grew, the mtime put back:
			// sent whole, the prefix's CRC32C tells.
			st, err := os.Stat(src)
			testutil.OK(t, err)
			b, err := os.ReadFile(src)
			testutil.OK(t, err)
			b[1000] ^= 1
			testutil.OK(t, os.WriteFile(src, b, 0o644))
			added := grow(1000)
			testutil.OK(t, os.Chtimes(src, st.ModTime(), st.ModTime()))
			if _, compressed := send(); compressed != int64(len(b))+added {
				t.Fatalf("a changed prefix: the producer compressed %d bytes, want the whole %d", compressed, int64(len(b))+added)
			}
			// Truncated, then grown back to the same length: whole.
			b, err = os.ReadFile(src)
			testutil.OK(t, err)
			testutil.OK(t, os.Truncate(src, int64(len(b))/2))
			fh, err := os.OpenFile(src, os.O_APPEND|os.O_WRONLY, 0)
			testutil.OK(t, err)
			_, err = fh.Write(bytes.Repeat([]byte("z"), len(b)-len(b)/2))
			testutil.OK(t, err)
			testutil.OK(t, fh.Close())
			if done, compressed := send(); compressed != int64(len(b)) || done.Appended != 0 {
				t.Fatalf("truncated and grown back: the producer compressed %d bytes of %d, %d appended", compressed, len(b), done.Appended)
			}
			if _, err := verify.Object(context.Background(), s.store, s.bucket, object, c, src); err != nil {
				t.Fatalf("after the whole resend: %v", err)
			}
		})
	}
}

// A directory of logs an hour later: one grew, one did not change, one is
// new and one was rotated (shorter, other bytes). One transfer with
// --skip-unchanged appends the first, skips the second and sends the
// others whole; every object reads back as its file.
func TestAnHourOfLogs(t *testing.T) {
	s := newStack(t, stackOptions{workers: 2, inlineMax: 64 << 10})
	dir := filepath.Join(t.TempDir(), "logs")
	testutil.OK(t, os.MkdirAll(dir, 0o755))
	path := func(n string) string { return filepath.Join(dir, n) }
	line := func(i int) string {
		return "2026-12-04T10:00:00Z level=info msg=\"request\" n=" + strings.Repeat("7", i%50) + "\n"
	}
	write := func(n string, lines, from int) {
		fh, err := os.OpenFile(path(n), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		testutil.OK(t, err)
		for i := range lines {
			_, err := fh.WriteString(line(from + i))
			testutil.OK(t, err)
		}
		testutil.OK(t, fh.Close())
	}
	write("app.log", 40_000, 0)
	write("db.log", 20_000, 0)
	write("old.log", 30_000, 0)
	req := producer.Request{Sources: []string{dir}, Destination: "gs://" + s.bucket + "/land", Codec: codec.Zstd, ChunkSize: 1 << 20,
		Method: "e2e-logs", SkipUnchanged: true}
	if done, err := s.transfer(req); err != nil || done.Status != message.StatusOK || done.Files != 3 {
		t.Fatalf("first hour: %v, done %+v", err, done)
	}
	size := func(n string) int64 {
		fi, err := os.Stat(path(n))
		testutil.OK(t, err)
		return fi.Size()
	}
	before := size("app.log")
	write("app.log", 500, 40_000)              // grew
	write("new.log", 1_000, 0)                 // new
	testutil.OK(t, os.Remove(path("old.log"))) // rotated: a shorter file of other lines
	write("old.log", 100, 7)
	done, err := s.transfer(req)
	if err != nil || done.Status != message.StatusOK || done.Files != 3 || done.FilesSkipped != 1 || done.Appended != 1 {
		t.Fatalf("second hour: %v, done %+v; want app.log appended, db.log skipped, new.log and old.log whole", err, done)
	}
	// Issue 41 §4: the event says what moved, not only what is stored.
	read := size("app.log") - before + size("new.log") + size("old.log")
	if done.FilesWhole != 2 || done.BytesRead != read || done.BytesSent <= 0 || done.BytesSent >= done.WireBytes {
		t.Fatalf("second hour: done says %d files whole, %d bytes read, %d sent (%d stored); want 2, %d read, and less sent than stored",
			done.FilesWhole, done.BytesRead, done.BytesSent, done.WireBytes, read)
	}
	for _, n := range []string{"app.log", "db.log", "new.log", "old.log"} {
		if _, err := verify.Object(context.Background(), s.store, s.bucket, "land/logs/"+n+".zst", codec.Zstd, path(n)); err != nil {
			t.Fatalf("%s: %v", n, err)
		}
	}
}
