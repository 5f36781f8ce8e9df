package benchrow

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Two mergers on one machine (a rolling restart) may share the rows file;
// a transfer still gets one row, whichever of them writes it.
func TestTwoSinksOnOneFileWriteATransferOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rows.ndjson")
	a, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		for _, s := range []*File{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := Row{TransferID: fmt.Sprintf("t%02d", i), Status: "ok"}
				if err := s.Write(ctx, r, slices.Values([]ChunkRow{{TransferID: r.TransferID}})); err != nil {
					t.Error(err)
				}
			}()
		}
	}
	wg.Wait()
	rows, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := ReadChunkFile(ChunksPath(path))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 20 || len(chunks) != 20 {
		t.Fatalf("%d rows and %d chunk rows for 20 transfers written by two sinks, want 20 and 20", len(rows), len(chunks))
	}
	seen := map[string]bool{}
	for _, r := range rows {
		if seen[r.TransferID] {
			t.Fatalf("transfer %s has two rows", r.TransferID)
		}
		seen[r.TransferID] = true
	}
	// A sink opened later knows them all.
	c, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Write(ctx, Row{TransferID: "t07"}, nil); err != nil {
		t.Fatal(err)
	}
	if rows, _ := ReadFile(path); len(rows) != 20 {
		t.Fatalf("%d rows after a repeated write, want 20", len(rows))
	}
}

// Issue 42 §5: a rows file that cannot be written (a missing directory)
// is found when the merger starts, naming it, not once a transfer is sent.
func TestARowsFileThatCannotBeWrittenIsFoundAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "rows.ndjson")
	if _, err := OpenFile(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("OpenFile(%s) = %v, want an error naming it", path, err)
	}
}
