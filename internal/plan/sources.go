package plan

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// SourceFile is one file to transfer, as the walk found it.
type SourceFile struct {
	Path string // as named or walked; what error messages show
	Rel  string // relative path, slash separated: the object name under the prefix
	Size int64
	Mod  int64 // modification time, UnixNano, to detect changes while reading
	// Root and InRoot are set when sources are confined (Spec.Roots): the
	// root the file's resolved path lies under, and that path relative to
	// it. Open reads such a file through an os.Root, so a link swapped in
	// after planning cannot lead out of the root.
	Root, InRoot string
}

// Open opens the file for reading: through its root when it has one.
func (f SourceFile) Open() (*os.File, error) {
	if f.Root == "" {
		return os.Open(f.Path)
	}
	r, err := os.OpenRoot(f.Root)
	if err != nil {
		return nil, err
	}
	defer func() { _ = r.Close() }()
	return r.Open(f.InRoot)
}

// walk expands sources into files. A file keeps its base name; a directory
// is walked recursively and keeps its own name as the first path element, as
// gsutil cp -r does. Symlinked files are followed; symlinked directories are
// not (that is how loops are avoided) and are reported. With a confiner,
// every file's resolved path must lie under one of its roots.
func walk(sources []string, conf *confiner) ([]SourceFile, error) {
	if len(sources) == 0 {
		return nil, errors.New("no source given")
	}
	var files []SourceFile
	seen := map[string]string{}
	add := func(p, rel string, fi fs.FileInfo) error {
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("source %s: not a regular file (%s)", p, fi.Mode().Type())
		}
		if err := checkName(rel); err != nil {
			return fmt.Errorf("source %s: %w", p, err)
		}
		if prev, dup := seen[rel]; dup {
			return fmt.Errorf("sources %s and %s would both become object %q", prev, p, rel)
		}
		f := SourceFile{Path: p, Rel: rel, Size: fi.Size(), Mod: fi.ModTime().UnixNano()}
		if conf != nil {
			var err error
			if f.Root, f.InRoot, err = conf.place(p); err != nil {
				return err
			}
		}
		seen[rel] = p
		files = append(files, f)
		return nil
	}
	for _, src := range sources {
		walkFrom := src
		if conf != nil {
			// Check the source itself before looking inside it, and walk
			// its resolved path, so no link or ".." in it is followed
			// after the check.
			root, in, err := conf.place(src)
			if err != nil {
				return nil, err
			}
			walkFrom = filepath.Join(root, in)
		}
		fi, err := os.Stat(walkFrom)
		if err != nil {
			return nil, fmt.Errorf("source %s: %w", src, unwrapPathErr(err))
		}
		if !fi.IsDir() {
			if err := add(src, filepath.Base(filepath.Clean(src)), fi); err != nil {
				return nil, err
			}
			continue
		}
		base := filepath.Base(filepath.Clean(src))
		if base == "." || base == "/" || base == ".." {
			base = ""
		}
		root := filepath.Clean(walkFrom)
		err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return fmt.Errorf("source %s: %w", p, unwrapPathErr(err))
			}
			if d.IsDir() {
				return nil
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			rel = path.Join(base, filepath.ToSlash(rel))
			info, err := d.Info()
			if err != nil {
				return fmt.Errorf("source %s: %w", p, unwrapPathErr(err))
			}
			if d.Type()&fs.ModeSymlink != 0 {
				info, err = os.Stat(p) // follow
				if err != nil {
					return fmt.Errorf("source %s: symlink cannot be followed: %w", p, unwrapPathErr(err))
				}
				if info.IsDir() {
					return fmt.Errorf("source %s: symlink to a directory; ferry does not follow those (they can loop)", p)
				}
			}
			return add(p, rel, info)
		})
		if err != nil {
			return nil, err
		}
	}
	sort.SliceStable(files, func(i, j int) bool { return files[i].Rel < files[j].Rel })
	return files, nil
}

// confiner keeps sources under a set of root directories.
type confiner struct {
	roots []string // resolved: no links, no ".."
	named string   // as configured, for error messages
}

func newConfiner(roots []string) (*confiner, error) {
	c := &confiner{named: strings.Join(roots, ",")}
	for _, r := range roots {
		if !filepath.IsAbs(r) {
			return nil, fmt.Errorf("source root %q is not an absolute path", r)
		}
		real, err := filepath.EvalSymlinks(r)
		if err != nil {
			return nil, fmt.Errorf("source root %s: %w", r, unwrapPathErr(err))
		}
		c.roots = append(c.roots, real)
	}
	return c, nil
}

// place resolves p (links and "..", as the kernel would) and returns the
// root it lies under and its path inside that root.
func (c *confiner) place(p string) (root, in string, err error) {
	abs := p
	if !filepath.IsAbs(p) {
		// Not filepath.Abs: it would clean "link/.." lexically, which is
		// not where the kernel goes when link is a symlink.
		wd, err := os.Getwd()
		if err != nil {
			return "", "", err
		}
		abs = wd + string(filepath.Separator) + p
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", "", fmt.Errorf("source %s: %w", p, unwrapPathErr(err))
	}
	for _, r := range c.roots {
		rel, err := filepath.Rel(r, real)
		if err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel) {
			return r, rel, nil
		}
	}
	return "", "", fmt.Errorf("source %s (resolved %s) is outside the source roots (FERRY_SOURCE_ROOTS=%s): %w", p, real, c.named, ErrOutsideRoots)
}

// ErrOutsideRoots: a source lies outside the directories it may be read from.
var ErrOutsideRoots = errors.New("source outside the allowed roots")

func unwrapPathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
