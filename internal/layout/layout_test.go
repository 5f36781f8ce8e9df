package layout

import (
	"bytes"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/ferry-dev/ferry/"

// maxLines is the most lines of production Go (its tests not counted) one
// package may hold: past it a package is more than one room.
const maxLines = 3000

// rank orders the packages: one may import only packages of its own rank or
// a lower one. A package not named here is a part (rank 1).
func rank(pkg string) int {
	switch {
	case strings.HasPrefix(pkg, "cmd/"):
		return 5
	case pkg == "internal/command":
		return 4
	}
	switch pkg {
	case "internal/engine", "internal/copier", "internal/submit", "internal/doctor", "internal/transfers",
		"internal/requests", "internal/setup", "internal/cli", "internal/progress", "internal/bench", "internal/bench/tap":
		return 3 // wirings: what builds and runs the services
	case "internal/producer", "internal/worker", "internal/merger", "internal/restore", "internal/verify", "internal/pool":
		return 2 // the services
	}
	return 1
}

type pkgInfo struct {
	lines   int
	imports map[string]bool
}

// packages reads every package of the module under root: its production
// lines and its imports inside the module.
func packages(t *testing.T, root string) map[string]*pkgInfo {
	t.Helper()
	out := map[string]*pkgInfo{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "tools" || name == "terraform") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(rel)
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.ImportsOnly)
		if err != nil {
			return err
		}
		p := out[pkg]
		if p == nil {
			p = &pkgInfo{imports: map[string]bool{}}
			out[pkg] = p
		}
		p.lines += bytes.Count(src, []byte("\n"))
		for _, im := range f.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			if rest, ok := strings.CutPrefix(path, module); ok {
				p.imports[rest] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if out["internal/producer"] == nil || out["cmd/ferry"] == nil {
		t.Fatalf("found %d packages under %s, not the module's", len(out), root)
	}
	return out
}

func TestNoPackageIsOverItsSize(t *testing.T) {
	for pkg, p := range packages(t, "../..") {
		if p.lines > maxLines {
			t.Errorf("%s holds %d lines of production Go, more than %d: split it by what its parts do", pkg, p.lines, maxLines)
		}
	}
}

func TestNoImportRunsUpward(t *testing.T) {
	pkgs := packages(t, "../..")
	var bad []string
	for pkg, p := range pkgs {
		for im := range p.imports {
			if rank(im) > rank(pkg) {
				bad = append(bad, pkg+" imports "+im)
			}
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Errorf("%s, a package above it (see rank)", b)
	}
}

// TestRankCatchesAnUpwardImport: a part that imported a service would fail.
func TestRankCatchesAnUpwardImport(t *testing.T) {
	if rank("internal/gcs") >= rank("internal/worker") || rank("internal/worker") >= rank("internal/engine") ||
		rank("internal/engine") >= rank("internal/command") || rank("internal/command") >= rank("cmd/ferry") {
		t.Fatal("the ranks do not order parts, services, wirings, commands and mains")
	}
}
