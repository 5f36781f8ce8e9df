package plan

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A file another host's walk planned is adopted only as this plan would
// plan it: its object and chunks from this plan's destination and chunk
// size, its path under this host's roots. A shard cannot name another
// object, another chunk size, or a path elsewhere.
func TestAdoptRefusesWhatThisPlanWouldNotPlan(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "d", "a.csv")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, make([]byte, 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := Open(Spec{Sources: []string{filepath.Join(root, "d")}, Destination: "gs://bucket/p", ChunkSize: 1 << 20, Roots: []string{root}}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	sf := SourceFile{Path: path, Rel: "d/a.csv", Size: 3 << 20}
	if _, err := p.Adopt(sf, "p/d/a.csv.zst", 1<<20, 3, nil); err != nil {
		t.Fatalf("the plan's own file: %v", err)
	}
	for name, c := range map[string]struct {
		sf     SourceFile
		object string
		chunk  int64
		chunks int
		want   string
	}{
		"another object":     {sf, "elsewhere/a.csv.zst", 1 << 20, 3, "names its object"},
		"another chunk size": {sf, "p/d/a.csv.zst", 512 << 10, 6, "cuts it into"},
		"outside the roots":  {SourceFile{Path: "/etc/hostname", Rel: "d/a.csv", Size: 3 << 20}, "p/d/a.csv.zst", 1 << 20, 3, "outside the source roots"},
	} {
		if _, err := p.Adopt(c.sf, c.object, c.chunk, c.chunks, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
	}
}
