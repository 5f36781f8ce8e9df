package plan

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// oddTree is a directory with what real trees hold besides files: links to
// a file, to a directory, back up (a loop), to nothing and to a device; a
// FIFO and a socket. It returns the tree's root.
func oddTree(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "tree")
	testutil.OK(t, os.MkdirAll(filepath.Join(root, "dir", "sub"), 0o755))
	testutil.OK(t, os.WriteFile(filepath.Join(root, "a.txt"), []byte("a"), 0o644))
	testutil.OK(t, os.WriteFile(filepath.Join(root, "dir", "sub", "b.txt"), []byte("b"), 0o644))
	teststack.OddEntries(t, root, "a.txt", "file-link")
	return root
}

func rels(p *Plan) (files, skipped []string) {
	for _, f := range p.Files {
		files = append(files, f.Rel)
	}
	for _, s := range p.Skipped {
		skipped = append(skipped, s.Rel+": "+s.Reason)
	}
	slices.Sort(skipped)
	return files, skipped
}

// Issue 16 §3: a real tree is never refused for what it holds besides
// regular files. By default links to files are followed and links to
// directories skipped; -L follows directories and skips a loop; with
// --ignore-symlinks every link is skipped. FIFOs, sockets and devices are
// skipped, never opened. Each skip is named with its reason.
func TestWalkTakesARealTree(t *testing.T) {
	root := oddTree(t)
	odd := []string{
		"tree/dangling: " + SkipDangling,
		"tree/fifo: not a regular file (named pipe)",
		"tree/sock: not a regular file (socket)",
	}
	for _, tc := range []struct {
		links   Symlinks
		files   []string
		skipped []string
	}{
		{"", []string{"tree/a.txt", "tree/dir/sub/b.txt", "tree/file-link"},
			append([]string{"tree/dir-link: " + SkipDirLink, "tree/dir/sub/up: " + SkipDirLink, "tree/zero: not a regular file (character device)"}, odd...)},
		{SymlinksFollow, []string{"tree/a.txt", "tree/dir-link/sub/b.txt", "tree/dir/sub/b.txt", "tree/file-link"},
			append([]string{"tree/dir-link/sub/up: " + SkipLoop, "tree/dir/sub/up: " + SkipLoop, "tree/zero: not a regular file (character device)"}, odd...)},
		{SymlinksIgnore, []string{"tree/a.txt", "tree/dir/sub/b.txt"},
			[]string{"tree/dangling: " + SkipLink, "tree/dir-link: " + SkipLink, "tree/dir/sub/up: " + SkipLink, "tree/fifo: not a regular file (named pipe)",
				"tree/file-link: " + SkipLink, "tree/sock: not a regular file (socket)", "tree/zero: " + SkipLink}},
	} {
		t.Run(string(tc.links), func(t *testing.T) {
			p, err := New(Spec{Sources: []string{root}, Destination: "gs://bkt/p", ChunkSize: 1 << 20, Selection: Selection{Symlinks: tc.links}}, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			files, skipped := rels(p)
			want := slices.Clone(tc.skipped)
			slices.Sort(want)
			if !slices.Equal(files, tc.files) || !slices.Equal(skipped, want) {
				t.Fatalf("files %q\nskipped %q\nwant files %q\nskipped %q", files, skipped, tc.files, want)
			}
			for _, s := range p.Skipped {
				if !strings.HasPrefix(s.Object, "p/tree/") || !strings.HasSuffix(s.Object, ".zst") {
					t.Errorf("skipped %s: object %q", s.Rel, s.Object)
				}
			}
		})
	}
}

// Issue 16 §4: --exclude and --include with rsync's semantics, first match
// wins, matched inside the source; an excluded directory is not walked.
func TestFiltersChooseWhatIsSent(t *testing.T) {
	root := filepath.Join(t.TempDir(), "src")
	for _, f := range []string{"a.csv", "a.tmp", "keep/b.csv", "keep/b.tmp", "logs/c.log", "deep/x/y/z.csv", "top.csv"} {
		testutil.OK(t, os.MkdirAll(filepath.Dir(filepath.Join(root, f)), 0o755))
		testutil.OK(t, os.WriteFile(filepath.Join(root, f), []byte(f), 0o644))
	}
	for _, tc := range []struct {
		rules []string
		want  []string
	}{
		{[]string{"- *.tmp"}, []string{"src/a.csv", "src/deep/x/y/z.csv", "src/keep/b.csv", "src/logs/c.log", "src/top.csv"}},
		{[]string{"- logs/", "- /top.csv"}, []string{"src/a.csv", "src/a.tmp", "src/deep/x/y/z.csv", "src/keep/b.csv", "src/keep/b.tmp"}},
		{[]string{"+ */", "+ *.csv", "- *"}, []string{"src/a.csv", "src/deep/x/y/z.csv", "src/keep/b.csv", "src/top.csv"}},
		{[]string{"+ keep/b.tmp", "- *.tmp"}, []string{"src/a.csv", "src/deep/x/y/z.csv", "src/keep/b.csv", "src/keep/b.tmp", "src/logs/c.log", "src/top.csv"}},
		{[]string{"- deep/**/z.csv", "- [ak]*"}, []string{"src/logs/c.log", "src/top.csv"}},
		{[]string{"- y/z.csv"}, []string{"src/a.csv", "src/a.tmp", "src/keep/b.csv", "src/keep/b.tmp", "src/logs/c.log", "src/top.csv"}},
	} {
		var sel Selection
		for _, r := range tc.rules {
			f, err := ParseFilter(r)
			testutil.OK(t, err)
			sel.Filters = append(sel.Filters, f)
		}
		p, err := New(Spec{Sources: []string{root}, Destination: "gs://bkt/p", ChunkSize: 1 << 20, Selection: sel}, Limits{})
		testutil.OK(t, err)
		if got, _ := rels(p); !slices.Equal(got, tc.want) {
			t.Errorf("rules %q: sent %q, want %q", tc.rules, got, tc.want)
		}
	}
	for _, bad := range []string{"* x", "-", "- ", "- [abc", "- a\\"} {
		if _, err := ParseFilter(bad); err == nil {
			t.Errorf("ParseFilter(%q) = nil error", bad)
		}
	}
}

// Issue 16 §4: --files-from sends exactly the paths listed, relative to
// the one source directory, named as a walk of it would name them.
func TestFilesFromSendsExactlyTheListedFiles(t *testing.T) {
	root := filepath.Join(t.TempDir(), "out")
	for _, f := range []string{"a.csv", "b.csv", "d/c.csv", "d/e/f.csv"} {
		testutil.OK(t, os.MkdirAll(filepath.Dir(filepath.Join(root, f)), 0o755))
		testutil.OK(t, os.WriteFile(filepath.Join(root, f), []byte(f), 0o644))
	}
	p, err := New(Spec{Sources: []string{root}, Destination: "gs://bkt/p", ChunkSize: 1 << 20,
		Selection: Selection{FilesFrom: []string{"b.csv", "./d/e"}}}, Limits{})
	testutil.OK(t, err)
	if got, _ := rels(p); !slices.Equal(got, []string{"out/b.csv", "out/d/e/f.csv"}) {
		t.Fatalf("sent %q", got)
	}
	for line, want := range map[string]string{"../a.csv": "line 1", "/etc/passwd": "line 1", "nope.csv": "no such file"} {
		_, err := New(Spec{Sources: []string{root}, Destination: "gs://bkt/p", ChunkSize: 1 << 20, Selection: Selection{FilesFrom: []string{line}}}, Limits{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--files-from %q: %v, want an error with %q", line, err, want)
		}
	}
}

// Issue 16 §5: a walk tells what it has found as it goes, and its total at
// the end, for the progress line of a large tree.
func TestWalkReportsWhatItFound(t *testing.T) {
	root := filepath.Join(t.TempDir(), "many")
	testutil.OK(t, os.MkdirAll(root, 0o755))
	for i := range 600 {
		testutil.OK(t, os.WriteFile(filepath.Join(root, strings.Repeat("x", 1+i%7)+string(rune('a'+i%26))+strconv.Itoa(i)), []byte("12345"), 0o644))
	}
	var calls []int
	var last int64
	sel := Selection{Found: func(files int, bytes int64) { calls = append(calls, files); last = bytes }}
	if _, err := New(Spec{Sources: []string{root}, Destination: "gs://bkt/p", ChunkSize: 1 << 20, Selection: sel}, Limits{}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(calls, []int{256, 512, 600}) || last != 3000 {
		t.Fatalf("Found called with %v, last %d bytes; want 256, 512, then 600 files and 3000 bytes", calls, last)
	}
}

// Issue 16 §2: Walk yields files in the order of their final object names,
// the order in which GCS lists them, which is not the walk's own
// ("a.b.zst" < "a.c/x.zst" < "a.zst"), also across sources and through a
// link -L follows; sources whose objects would interleave are collected
// and sorted instead.
func TestWalkYieldsObjectOrder(t *testing.T) {
	root := t.TempDir()
	tree := filepath.Join(root, "t")
	for _, f := range []string{"a", "a.b", "a-", "a.c/x", "ab/y", "ab/y.z/q", "b/0", "real/k"} {
		p := filepath.Join(tree, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("real", filepath.Join(tree, "linked")); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(root, "other", "s")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "f"), []byte("f"), 0o644); err != nil {
		t.Fatal(err)
	}
	twin := filepath.Join(root, "twin", "t") // a second source named t
	if err := os.MkdirAll(twin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(twin, "a.a"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		sources []string
		links   Symlinks
		codec   codec.Codec
	}{
		{"one tree, zstd", []string{tree}, SymlinksFiles, codec.Zstd},
		{"one tree, none", []string{tree}, SymlinksFiles, codec.None},
		{"-L", []string{tree}, SymlinksFollow, codec.Zstd},
		{"two sources", []string{other, tree}, SymlinksFiles, codec.Gzip},
		{"sources that interleave", []string{tree, twin}, SymlinksFiles, codec.Zstd},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := Spec{Sources: tc.sources, Destination: "gs://bkt/p", Codec: tc.codec, ChunkSize: 1 << 20, Selection: Selection{Symlinks: tc.links}}
			p, err := Open(spec, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			if err := p.Walk(func(f File) error { got = append(got, f.Object); return nil }, func(Skipped) {}); err != nil {
				t.Fatal(err)
			}
			if !slices.IsSorted(got) || len(got) < 8 {
				t.Fatalf("objects not in name order: %q", got)
			}
			for i := 1; i < len(got); i++ {
				if got[i] == got[i-1] {
					t.Fatalf("object %s twice", got[i])
				}
			}
			if tc.links == SymlinksFollow && !slices.Contains(got, "p/t/linked/k"+tc.codec.Ext()) {
				t.Fatalf("-L did not follow the link: %q", got)
			}
		})
	}
}
