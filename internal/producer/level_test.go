package producer

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/spool/spooltest"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// levelsUsed checks that a manifest's levels add up to its transfer and
// returns them as level → chunks.
func levelsUsed(t *testing.T, man *message.Manifest) map[int]int {
	t.Helper()
	got := map[int]int{}
	chunks, bytes := 0, int64(0)
	for _, u := range man.Levels {
		got[u.Level] = u.Chunks
		chunks += u.Chunks
		bytes += u.Bytes
	}
	if chunks != man.Totals.Chunks || bytes != man.Totals.Bytes {
		t.Fatalf("levels %+v count %d chunks of %d bytes; the transfer has %d of %d", man.Levels, chunks, bytes, man.Totals.Chunks, man.Totals.Bytes)
	}
	if err := man.CheckLevels(); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestLevelRisesWhileTheWorkersFallBehind: with the spool transport and
// no worker taking anything, every chunk stays in the spool, so the link
// is the bound: an adaptive transfer compresses most chunks at level 6
// (the first few, while the spool holds less than two chunk buffers, are
// taken for chunks in flight), and the manifest counts each level's chunks
// and bytes.
func TestLevelRisesWhileTheWorkersFallBehind(t *testing.T) {
	src := filepath.Join(t.TempDir(), "a.csv")
	testutil.WriteCSV(t, src, 32<<20, 1) // 32 chunks of 1 MiB: each large enough to vote
	fs := spooltest.NewMem()
	p := New(Options{Store: nopStore{}, Chunks: nopPublisher{}, Events: &teststack.Recorder{}, Spool: fs, InlineMax: 1 << 10, Concurrency: 2})
	man, err := p.Submit(context.Background(), Request{Sources: []string{src}, Destination: "gs://bkt/x", ChunkSize: 1 << 20})
	testutil.OK(t, err)
	if man.Level != 0 {
		t.Fatalf("manifest level %d, want 0 (adaptive)", man.Level)
	}
	used := levelsUsed(t, man)
	if used[6] <= man.Totals.Chunks/2 {
		t.Fatalf("levels %+v: want most chunks at level 6 while nothing leaves the spool", man.Levels)
	}
}

// TestSmallFilesKeepTheLevel: the same spool that never drains, but small
// files in bundles: they are bound by requests, not bytes, so they do not
// raise the level.
func TestSmallFilesKeepTheLevel(t *testing.T) {
	dir := t.TempDir()
	for i := range 200 {
		testutil.WriteCSV(t, filepath.Join(dir, fmt.Sprintf("f%03d.csv", i)), 20_000, 1)
	}
	p := New(Options{Store: nopStore{}, Chunks: nopPublisher{}, Events: &teststack.Recorder{}, Spool: spooltest.NewMem(), InlineMax: 1 << 10,
		BundleMax: 256 << 10, Concurrency: 2})
	man, err := p.Submit(context.Background(), Request{Sources: []string{dir}, Destination: "gs://bkt/x", ChunkSize: 1 << 20})
	testutil.OK(t, err)
	if used := levelsUsed(t, man); len(used) != 1 || used[1] != 200 {
		t.Fatalf("levels %+v: want all 200 files at level 1", man.Levels)
	}
}

// TestLevelStaysLowWhileTheLinkKeepsUp: with every chunk inside its
// message and a publisher that takes each at once, nothing piles up
// downstream: most chunks stay at level 1. The chunks still decompress to
// the file.
func TestLevelStaysLowWhileTheLinkKeepsUp(t *testing.T) {
	src := filepath.Join(t.TempDir(), "a.csv")
	testutil.WriteCSV(t, src, 16<<20, 1)
	rec := &teststack.Recorder{}
	p := New(Options{Store: nopStore{}, Chunks: rec, Events: &teststack.Recorder{}, SpoolDir: t.TempDir(), Transport: config.TransportPubSub, Concurrency: 2})
	man, err := p.Submit(context.Background(), Request{Sources: []string{src}, Destination: "gs://bkt/x", ChunkSize: 1 << 20})
	testutil.OK(t, err)
	used := levelsUsed(t, man)
	if used[1] <= man.Totals.Chunks/2 {
		t.Fatalf("levels %+v: want most chunks at level 1 when the link keeps up", man.Levels)
	}
	msgs := decodeAll(t, rec, "")
	sort.Slice(msgs, func(i, j int) bool { return msgs[i].c.Parts[0].Index < msgs[j].c.Parts[0].Index })
	var wire []byte
	for _, m := range msgs {
		wire = append(wire, m.partBytes()[0]...)
	}
	want, err := os.ReadFile(src)
	testutil.OK(t, err)
	if got := decompress(t, codec.Zstd, wire); !bytes.Equal(got, want) {
		t.Fatalf("chunks decompress to %d bytes, not the file's %d", len(got), len(want))
	}
}

// TestAFixedLevelStaysFixed: a level asked for is every chunk's.
func TestAFixedLevelStaysFixed(t *testing.T) {
	src := filepath.Join(t.TempDir(), "a.csv")
	testutil.WriteCSV(t, src, 1<<20, 1)
	fs := spooltest.NewMem()
	p := New(Options{Store: nopStore{}, Chunks: nopPublisher{}, Events: &teststack.Recorder{}, Spool: fs, InlineMax: 1 << 10, Concurrency: 2})
	man, err := p.Submit(context.Background(), Request{Sources: []string{src}, Destination: "gs://bkt/x", ChunkSize: 64 << 10, Level: 3})
	testutil.OK(t, err)
	if used := levelsUsed(t, man); man.Level != 3 || len(used) != 1 {
		t.Fatalf("level %d, levels %+v: want 3 for all chunks", man.Level, man.Levels)
	}
	for _, c := range []codec.Codec{codec.Gzip, codec.None} {
		man, err := p.Submit(context.Background(), Request{Sources: []string{src}, Destination: "gs://bkt/" + string(c), ChunkSize: 64 << 10, Codec: c})
		testutil.OK(t, err)
		want := c.DefaultLevel()
		if levelsUsed(t, man); man.Level != want || len(man.Levels) != 1 || man.Levels[0].Level != want {
			t.Fatalf("%s: level %d, levels %+v; want %d throughout", c, man.Level, man.Levels, want)
		}
	}
}
