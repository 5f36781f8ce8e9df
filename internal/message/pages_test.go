package message

import (
	"fmt"
	"strings"
	"testing"
)

func filesOf(chunks ...int) []File {
	var fs []File
	for i, n := range chunks {
		f := File{Path: fmt.Sprintf("f%07d", i), Object: fmt.Sprintf("p/f%07d", i), Size: int64(n) * 10, WireSize: int64(n) * 5}
		f.Chunks = make([]ChunkInfo, n)
		fs = append(fs, f)
	}
	return fs
}

// Issue 16 §2: a manifest of any size is a header of bounded pages, each
// within PageFiles files and PageChunks chunks, which add up to the totals.
func TestPaginateBoundsEveryPage(t *testing.T) {
	counts := make([]int, 2500)
	for i := range counts {
		counts[i] = 1
	}
	counts[1500] = 5000 // one file of more chunks than a page holds
	counts[1501] = 3000
	m := Manifest{V: Version, TransferID: "t1", Files: filesOf(counts...)}
	for i := range 2100 {
		m.Skipped = append(m.Skipped, Skipped{Path: fmt.Sprint(i), Object: fmt.Sprint(i), Reason: "r"})
	}
	header, pages, skipped := m.Paginate()
	if len(header.Files)+len(header.Skipped) != 0 || !header.Paged() {
		t.Fatalf("header holds %d files and %d skipped inline", len(header.Files), len(header.Skipped))
	}
	if err := header.CheckPages(); err != nil {
		t.Fatal(err)
	}
	n, chunks := 0, 0
	for k, p := range pages {
		c := 0
		for _, f := range p {
			c += len(f.Chunks)
		}
		if len(p) > PageFiles || (len(p) > 1 && c > PageChunks) || header.Pages[k].Files != len(p) || header.Pages[k].Chunks != c || header.Pages[k].First != n {
			t.Fatalf("page %d: %d files, %d chunks; header says %+v", k, len(p), c, header.Pages[k])
		}
		n += len(p)
		chunks += c
	}
	if n != 2500 || chunks != header.Totals.Chunks || header.Totals.Bytes != m.sum().Bytes || len(skipped) != 3 || header.SkippedPages != 3 || header.Totals.Skipped != 2100 {
		t.Fatalf("%d files in pages, %d chunks, totals %+v, %d skipped pages", n, chunks, header.Totals, len(skipped))
	}
	if n := len(Encode(header)); n > 64<<10 {
		t.Fatalf("header of 2,500 files is %d bytes", n)
	}
}

func TestSmallManifestStaysInline(t *testing.T) {
	m := Manifest{V: Version, TransferID: "t1", Files: filesOf(1, 2, 3)}
	header, pages, skipped := m.Paginate()
	if header.Paged() || len(pages)+len(skipped) != 0 || len(header.Files) != 3 || header.Totals.Chunks != 6 {
		t.Fatalf("paged %v, %d pages, totals %+v", header.Paged(), len(pages), header.Totals)
	}
	var back Manifest
	if err := Decode(Encode(header), &back); err != nil {
		t.Fatal(err)
	}
	back.Unpaged()
	if !back.Inline() || len(back.Pages) != 1 || back.Pages[0].Files != 3 || back.Pages[0].Chunks != 6 || back.CheckPages() != nil {
		t.Fatalf("unpaged: %+v", back.Pages)
	}
}

func TestCheckPagesRefusesHeadersThatDoNotAddUp(t *testing.T) {
	good := func() Manifest {
		return Manifest{Pages: []Page{{0, 1000, 1000}, {1000, 10, 40}}, Totals: Totals{Files: 1010, Chunks: 1040}}
	}
	for name, edit := range map[string]func(*Manifest){
		"a gap":              func(m *Manifest) { m.Pages[1].First = 1001 },
		"an oversized page":  func(m *Manifest) { m.Pages[0].Files, m.Pages[0].Chunks = 1001, 1001; m.Pages[1].First = 1001 },
		"too many chunks":    func(m *Manifest) { m.Pages[1].Chunks = PageChunks + 1 },
		"totals that differ": func(m *Manifest) { m.Totals.Files = 5 },
		"files inline":       func(m *Manifest) { m.Files = filesOf(1) },
		"skipped pages":      func(m *Manifest) { m.Totals.Skipped = 1 },
	} {
		m := good()
		if err := m.CheckPages(); err != nil {
			t.Fatal(err)
		}
		edit(&m)
		if err := m.CheckPages(); err == nil || strings.TrimSpace(err.Error()) == "" {
			t.Errorf("%s: accepted", name)
		}
	}
}
