package message

import "fmt"

// A manifest of more than PageFiles files is paged: manifest.json holds the
// header (Pages, Totals, no Files) and each page is an object of its own
// (ManifestPage), so that no reader holds more than one page of a
// transfer of any size. Skipped files are paged the same way
// (SkippedPage). A small manifest keeps its files inline, as one page.
//
// The files of a manifest are in object-name order, strictly increasing
// across pages: a listing of the destination, which GCS returns in name
// order, can then be joined with the pages one page at a time.
const (
	// PageFiles is the most files (and skipped files) a page holds.
	PageFiles = 1000
	// PageChunks bounds the chunks of a page's files, unless one file
	// alone has more: a page's size does not grow with file size.
	PageChunks = 4096
)

// Page is one page of a paged manifest's files, as the header lists it.
type Page struct {
	// First is the index of the page's first file; Files and Chunks
	// count its files and their chunks.
	First  int `json:"first"`
	Files  int `json:"files"`
	Chunks int `json:"chunks"`
}

// Totals sum a manifest's files, so that a reader of the header knows the
// transfer's size without reading its pages.
type Totals struct {
	Files     int   `json:"files"`
	Chunks    int   `json:"chunks"`
	Bytes     int64 `json:"bytes"`
	WireBytes int64 `json:"wire_bytes"`
	Skipped   int   `json:"skipped"`
	// Rows are the rows of the Parquet parts of converted sources, and
	// TableBytes the bytes of those sources they came from.
	Rows       int64 `json:"rows,omitempty"`
	TableBytes int64 `json:"table_bytes,omitempty"`
	// Rejected are the records left out of those parts (--bad-rows).
	Rejected int64 `json:"rejected,omitempty"`
}

// FilePage is the body of a ManifestPage object.
type FilePage struct {
	V     int    `json:"v"`
	Files []File `json:"files"`
}

// SkippedFiles is the body of a SkippedPage object.
type SkippedFiles struct {
	V       int       `json:"v"`
	Skipped []Skipped `json:"skipped"`
}

func (p *FilePage) version() int     { return p.V }
func (p *SkippedFiles) version() int { return p.V }

// ManifestPage is page k of the files of a paged manifest that run sealed.
// Each run writes pages of its own: a resubmission never mixes its pages
// with those of an earlier run's header.
func ManifestPage(transferID, run string, k int) string {
	return fmt.Sprintf("%sm/%s%07d.json", StagingPrefix(transferID), runDir(run), k)
}

// SkippedPage is page k of the skipped files of a paged manifest that run
// sealed.
func SkippedPage(transferID, run string, k int) string {
	return fmt.Sprintf("%sk/%s%07d.json", StagingPrefix(transferID), runDir(run), k)
}

func runDir(run string) string {
	if run == "" {
		return ""
	}
	return run + "/"
}

// Paged reports whether m's files live in pages of their own.
func (m *Manifest) Paged() bool { return len(m.Pages) > 0 }

// Paginate splits a manifest whose files and skipped files are inline into
// its header and pages, when it has more than one page of either; a
// smaller one is returned as it is, with Totals set. The header's files are
// the pages' (no copy).
func (m *Manifest) Paginate() (header Manifest, pages [][]File, skipped [][]Skipped) {
	header = *m
	header.Totals = m.sum()
	if len(m.Files) <= PageFiles && len(m.Skipped) <= PageFiles {
		header.Pages = nil
		return header, nil, nil
	}
	header.Files, header.Skipped = nil, nil
	for lo := 0; lo < len(m.Files); {
		hi, chunks := lo, 0
		for hi < len(m.Files) && hi-lo < PageFiles && (hi == lo || chunks+len(m.Files[hi].Chunks) <= PageChunks) {
			chunks += len(m.Files[hi].Chunks)
			hi++
		}
		header.Pages = append(header.Pages, Page{First: lo, Files: hi - lo, Chunks: chunks})
		pages = append(pages, m.Files[lo:hi])
		lo = hi
	}
	for lo := 0; lo < len(m.Skipped); lo += PageFiles {
		skipped = append(skipped, m.Skipped[lo:min(lo+PageFiles, len(m.Skipped))])
	}
	header.SkippedPages = len(skipped)
	if len(header.Pages) == 0 {
		// Only skipped files: an empty page keeps the header paged.
		header.Pages = []Page{{}}
		pages = [][]File{nil}
	}
	return header, pages, skipped
}

func (m *Manifest) sum() Totals {
	t := Totals{Files: len(m.Files), Skipped: len(m.Skipped)}
	for i := range m.Files {
		t.Chunks += len(m.Files[i].Chunks)
		t.Bytes += m.Files[i].Size
		t.WireBytes += m.Files[i].WireSize
		if tp := m.Files[i].Table; tp != nil {
			t.Rows += tp.Rows
			t.TableBytes += tp.Size
			t.Rejected += int64(len(tp.Rejects))
		}
	}
	return t
}

// Unpaged gives an inline manifest (as decoded, Pages empty) the one page
// and the totals of its files, so that readers treat every manifest as
// paged: page 0 is then m.Files, and Inline reports true.
func (m *Manifest) Unpaged() {
	if m.Paged() {
		return
	}
	m.Totals = m.sum()
	m.Pages = []Page{{First: 0, Files: len(m.Files), Chunks: m.Totals.Chunks}}
	m.inline = true
}

// Inline reports whether m's files and skipped files are in m itself
// (Unpaged was called on a manifest without pages).
func (m *Manifest) Inline() bool { return m.inline }

// CheckPages holds a paged header's pages to its totals: contiguous from
// file 0, within the page bounds, adding up, and no file listed inline. A
// header that fails is never acted on.
func (m *Manifest) CheckPages() error {
	if m.inline {
		return nil
	}
	if len(m.Files)+len(m.Skipped) > 0 {
		return fmt.Errorf("a paged manifest lists %d files and %d skipped files inline", len(m.Files), len(m.Skipped))
	}
	next, chunks := 0, 0
	for k, p := range m.Pages {
		if p.First != next || p.Files < 0 || p.Files > PageFiles || p.Chunks < p.Files || (p.Files > 1 && p.Chunks > PageChunks) {
			return fmt.Errorf("page %d (first %d, %d files, %d chunks) is not the page after %d files", k, p.First, p.Files, p.Chunks, next)
		}
		next += p.Files
		chunks += p.Chunks
	}
	if next != m.Totals.Files || chunks != m.Totals.Chunks {
		return fmt.Errorf("pages hold %d files and %d chunks, the totals say %d and %d", next, chunks, m.Totals.Files, m.Totals.Chunks)
	}
	if m.Totals.Skipped < 0 || m.SkippedPages != (m.Totals.Skipped+PageFiles-1)/PageFiles {
		return fmt.Errorf("%d pages of skipped files for %d skipped files", m.SkippedPages, m.Totals.Skipped)
	}
	return nil
}

// CheckLevels holds the levels and agents a manifest records to what a
// producer writes: levels of 0 to 22 in ascending order, each used by at
// least one chunk, together no more chunks and bytes than the totals; and
// checkAgents.
func (m *Manifest) CheckLevels() error {
	chunks, bytes := 0, int64(0)
	for i, u := range m.Levels {
		if u.Level < 0 || u.Level > 22 || (i > 0 && u.Level <= m.Levels[i-1].Level) || u.Chunks < 1 || u.Bytes < 0 {
			return fmt.Errorf("levels: entry %d (level %d, %d chunks, %d bytes) is not one a producer writes", i, u.Level, u.Chunks, u.Bytes)
		}
		chunks += u.Chunks
		bytes += u.Bytes
	}
	if chunks > m.Totals.Chunks || bytes > m.Totals.Bytes {
		return fmt.Errorf("levels count %d chunks of %d bytes; the transfer has %d of %d", chunks, bytes, m.Totals.Chunks, m.Totals.Bytes)
	}
	return m.checkAgents()
}

// checkAgents holds the agents a pooled transfer's manifest names to what
// its producer writes: at most MaxAgents, each named once, together no
// more bytes than the totals.
func (m *Manifest) checkAgents() error {
	if len(m.Agents) > MaxAgents || len(m.Agents) > 0 && !m.Pool {
		return fmt.Errorf("agents: %d named (pool %v), want at most %d and only for a pooled transfer", len(m.Agents), m.Pool, MaxAgents)
	}
	var bytes int64
	seen := map[string]bool{}
	for i, a := range m.Agents {
		if a.Agent == "" || len(a.Agent) > 64 || seen[a.Agent] || a.Bytes < 0 {
			return fmt.Errorf("agents: entry %d (%q, %d bytes) is not one a producer writes", i, a.Agent, a.Bytes)
		}
		seen[a.Agent] = true
		bytes += a.Bytes
	}
	if bytes > m.Totals.Bytes {
		return fmt.Errorf("agents sent %d bytes; the transfer has %d", bytes, m.Totals.Bytes)
	}
	return nil
}
