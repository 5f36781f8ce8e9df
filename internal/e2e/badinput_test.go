package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/producer"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// TestProducerCLIRejectsBadInput runs `producer submit` on bad input: a
// clear error naming the input, a non-zero exit, nothing written. (A link
// loop inside a tree is skipped, not refused: TestRealTreeThroughTheStack.)
func TestProducerCLIRejectsBadInput(t *testing.T) {
	s := newStack(t, stackOptions{})
	dir := t.TempDir()
	good := filepath.Join(dir, "good.csv")
	testutil.WriteCSV(t, good, 1000, 1)
	fifo := filepath.Join(dir, "pipe.csv")
	testutil.OK(t, syscall.Mkfifo(fifo, 0o644))
	badUTF8 := filepath.Join(dir, "bad\xff.csv")
	testutil.OK(t, os.WriteFile(badUTF8, []byte("x"), 0o644))
	ctrl := filepath.Join(dir, "tab\tname.csv")
	testutil.OK(t, os.WriteFile(ctrl, []byte("x"), 0o644))
	deep := dir
	for i := 0; i < 5; i++ {
		deep = filepath.Join(deep, strings.Repeat("d", 220))
	}
	testutil.OK(t, os.MkdirAll(deep, 0o755))
	testutil.OK(t, os.WriteFile(filepath.Join(deep, "f.csv"), []byte("x"), 0o644))
	longRoot := filepath.Join(dir, strings.Repeat("d", 220))
	dest := "gs://" + s.bucket + "/p"

	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"missing source", []string{filepath.Join(dir, "nope.csv"), dest}, 2, "nope.csv: no such file or directory"},
		{"not a regular file", []string{fifo, dest}, 2, "pipe.csv: not a regular file"},
		{"unknown codec", []string{"--codec", "lz4", good, dest}, 2, `"lz4"`},
		{"chunk size 0", []string{"--chunk-size", "0", good, dest}, 2, "chunk size 0"},
		{"chunk size negative", []string{"--chunk-size", "-5", good, dest}, 2, "chunk-size"},
		{"chunk size absurd", []string{"--chunk-size", "5TiB", good, dest}, 2, "chunk size"},
		{"not gs://", []string{good, "s3://bucket/p"}, 2, `"s3://bucket/p"`},
		{"no prefix separator", []string{good, "bucket/p"}, 2, `"bucket/p"`},
		{"dotdot in prefix", []string{good, "gs://" + s.bucket + "/a/../b"}, 2, `".."`},
		{"control character in prefix", []string{good, "gs://" + s.bucket + "/a\x01"}, 2, "control character"},
		{"non-UTF-8 name", []string{badUTF8, dest}, 2, "not valid UTF-8"},
		{"control character in name", []string{ctrl, dest}, 2, "control character"},
		{"name over 1024 bytes", []string{longRoot, dest}, 2, "1024"},
		{"missing bucket", []string{good, "gs://no-such-bucket-ferry/p"}, 1, "no-such-bucket-ferry"},
		{"no destination", []string{good}, 2, "destination"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := s.start("producer", "producer", s.env(), append([]string{"submit"}, tc.args...)...)
			code := p.wait(time.Minute)
			out := p.out.String()
			if code != tc.code || !strings.Contains(out, tc.want) {
				t.Fatalf("exit %d, output:\n%s\nwant exit %d and %q", code, out, tc.code, tc.want)
			}
		})
	}
	var left []string
	_ = s.store.List(context.Background(), s.bucket, "", func(a gcs.Attrs) error { left = append(left, a.Name); return nil })
	if len(left) != 0 {
		t.Fatalf("bad input wrote objects: %v", left)
	}
}

// TestSourceChangingWhileReadFailsCleanly: a file that grows while the
// producer reads it is never uploaded torn; the transfer fails naming it.
func TestSourceChangingWhileReadFailsCleanly(t *testing.T) {
	s := newStack(t, stackOptions{workers: 2, inlineMax: 4 << 10})
	src := filepath.Join(t.TempDir(), "growing.csv")
	testutil.WriteCSV(t, src, 40_000_000, 31)
	// A slow producer: one encoder, small chunks, so the append lands while
	// it reads.
	s.prod = producer.New(producer.Options{Store: s.store, Chunks: s.q.Publisher(s.ps.ChunksTopic), Events: s.q.Publisher(s.ps.ControlTopic),
		SpoolDir: s.spool, InlineMax: 4 << 10, Concurrency: 1})
	wait := s.transferAsync(producer.Request{Sources: []string{src}, Destination: "gs://" + s.bucket + "/g", Codec: codec.Gzip, ChunkSize: 256 << 10})
	teststack.Until(t, 30*time.Second, "the producer to start reading", func() bool { r, _ := s.prod.Progress(); return r > 0 })
	f, err := os.OpenFile(src, os.O_APPEND|os.O_WRONLY, 0)
	testutil.OK(t, err)
	_, err = f.WriteString("1999-01-01,APPENDED,row\n")
	testutil.OK(t, err)
	testutil.OK(t, f.Close())

	done, submitErr := wait()
	if submitErr == nil || !strings.Contains(submitErr.Error(), "growing.csv") {
		t.Fatalf("submit error %v, want one naming growing.csv", submitErr)
	}
	if done.Status != message.StatusFailed || !strings.Contains(done.Error, "while it was read") {
		t.Fatalf("done %+v, want failed: changed while it was read", done)
	}
	if _, err := s.store.Attrs(context.Background(), s.bucket, "g/growing.csv.gz"); !errors.Is(err, gcs.ErrNotFound) {
		t.Fatalf("a torn file was uploaded: %v", err)
	}
	s.assertClean()
}

// TestEmptyDirectoryTransfersNothingSuccessfully: an empty directory is a
// valid request with no objects.
func TestEmptyDirectoryTransfersNothingSuccessfully(t *testing.T) {
	s := newStack(t, stackOptions{workers: 1})
	empty := filepath.Join(t.TempDir(), "empty")
	testutil.OK(t, os.MkdirAll(empty, 0o755))
	done, err := s.transfer(producer.Request{Sources: []string{empty}, Destination: "gs://" + s.bucket + "/e", ChunkSize: 1 << 20})
	if err != nil || done.Status != message.StatusOK || len(done.Objects) != 0 {
		t.Fatalf("transfer: %v, done %+v", err, done)
	}
	if row := s.row(done.TransferID); row.Files != 0 || row.Status != "ok" {
		t.Fatalf("row %+v", row)
	}
}
