package manifest

import (
	"context"
	"fmt"
	"testing"

	"github.com/ferry-dev/ferry/internal/message"
)

// The manifest's files are held a page at a time. Files are
// added as the walk plans them and recorded as their chunks are
// compressed, a few hundred behind; the writer holds the open page and the
// closed pages with chunks pending, never more than two pages of files,
// whatever the file count.
func TestTheWriterHoldsPagesNotTheTransfer(t *testing.T) {
	ctx := context.Background()
	g := NewWriter(&message.Manifest{V: message.Version, TransferID: "t-pager", Run: "0123456789abcdef"}, nil)
	drained := make(chan struct{})
	go func() {
		for range g.ready {
		}
		close(drained)
	}()
	const n, lag = 50_000, 300
	held, most := func() int {
		h := len(g.open.files)
		for _, pg := range g.pages {
			h += len(pg.files)
		}
		return h
	}, 0
	record := func(i int) {
		if err := g.Record(ctx, i, 0, message.ChunkInfo{Object: fmt.Sprintf("o/%07d", i), RawSize: 1, WireSize: 1}, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		f := message.File{Path: fmt.Sprintf("f%07d", i), Size: 1, Object: fmt.Sprintf("o/%07d", i), Chunks: make([]message.ChunkInfo, 1)}
		if _, err := g.Add(ctx, f); err != nil {
			t.Fatal(err)
		}
		if i >= lag {
			record(i - lag)
		}
		most = max(most, held())
	}
	for i := n - lag; i < n; i++ {
		record(i)
	}
	g.Close()
	<-drained
	if most > 2*message.PageFiles {
		t.Fatalf("the writer held %d files at once over %d files, want at most two pages (%d)", most, n, 2*message.PageFiles)
	}
}
