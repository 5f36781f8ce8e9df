package plan

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/ferry-dev/ferry/internal/names"
	"github.com/ferry-dev/ferry/internal/osfile"
)

// Symlinks is what a walk does with a symbolic link it finds inside a
// directory. A source named on the command line is always followed.
type Symlinks string

// The choices, recorded in the manifest.
const (
	// SymlinksFiles (the default, as gcloud storage cp -r): links to
	// files are followed, links to directories skipped.
	SymlinksFiles Symlinks = "files"
	// SymlinksFollow (-L): links to directories are walked too; a link
	// back to a directory being walked (by device and inode) is skipped.
	SymlinksFollow Symlinks = "follow"
	// SymlinksIgnore (--ignore-symlinks): every link is skipped.
	SymlinksIgnore Symlinks = "ignore"
)

// ParseSymlinks parses a request's symlinks field; "" is SymlinksFiles.
func ParseSymlinks(s string) (Symlinks, error) {
	switch Symlinks(s) {
	case "", SymlinksFiles:
		return SymlinksFiles, nil
	case SymlinksFollow, SymlinksIgnore:
		return Symlinks(s), nil
	}
	return "", fmt.Errorf("symlinks %.32q: want files (the default), follow or ignore", s)
}

// Skip is something a walk found and did not take, and why. Skipped files
// are counted and named in the transfer's listing; they are never read.
type Skip struct {
	Path   string // as walked, for messages
	Rel    string // the relative path it would have had
	Reason string
}

// Reasons a walk skips a file.
const (
	SkipDirLink    = "symlink to a directory (-L follows them)"
	SkipLink       = "symlink (--ignore-symlinks)"
	SkipDangling   = "dangling symlink"
	SkipLoop       = "symlink loop: leads back to a directory being walked"
	SkipUnreadable = "unreadable (--skip-unreadable)"
	SkipEmptyTable = "empty (0 bytes): no header, nothing to convert (--convert)"
)

// Selection is how a walk chooses what to send besides the sources.
type Selection struct {
	Symlinks Symlinks
	// SkipUnreadable skips files and directories the producer may not
	// read instead of failing the transfer on them.
	SkipUnreadable bool
	// Filters are rsync-style rules, first match wins: "- PATTERN"
	// excludes, "+ PATTERN" includes (see Filter).
	Filters []Filter
	// FilesFrom, when not nil, are the only paths sent: each relative to
	// the one source directory (--files-from).
	FilesFrom []string
	// Found, when set, is told how many files and bytes the walk has
	// found so far, every foundEvery files and once at its end: progress
	// on a large tree. It must be safe for use from the walk's goroutine.
	Found func(files int, bytes int64)
}

// foundEvery is how often, in files, a walk reports what it found.
const foundEvery = 256

// walker expands sources into files, and collects what it skips.
type walker struct {
	conf    *confiner
	sel     Selection
	files   []SourceFile
	skipped []Skip
	// excluded counts what the filters left out; bytes what files hold,
	// found how many files were taken.
	excluded int
	bytes    int64
	found    int
	// ordered: each directory's entries are taken in the order of their
	// object names, files named with their suffix appended; out is told
	// of each file, and onSkip of each skip, as the walk finds them.
	// Otherwise files and skipped collect them.
	ordered bool
	suffix  func(name string) string
	out     func(SourceFile) error
	onSkip  func(Skip)
}

// walk expands sources into files, sorted by relative path. A file keeps
// its base name; a directory is walked recursively and keeps its own name
// as the first path element, as gsutil cp -r does. Links inside a
// directory are handled as sel.Symlinks says; FIFOs, sockets and devices
// are skipped, never opened. With a confiner, every file's resolved path
// must lie under one of its roots.
func walk(sources []string, conf *confiner, sel Selection) (*walker, error) {
	sel, err := checkSelection(sources, sel)
	if err != nil {
		return nil, err
	}
	w := &walker{conf: conf, sel: sel}
	if err := w.all(sources); err != nil {
		return nil, err
	}
	slices.SortStableFunc(w.files, func(a, b SourceFile) int { return strings.Compare(a.Rel, b.Rel) })
	for i := 1; i < len(w.files); i++ {
		if a, b := w.files[i-1], w.files[i]; a.Rel == b.Rel {
			return nil, fmt.Errorf("sources %s and %s would both become object %q", a.Path, b.Path, a.Rel)
		}
	}
	return w, nil
}

func checkSelection(sources []string, sel Selection) (Selection, error) {
	if len(sources) == 0 {
		return sel, errors.New("no source given")
	}
	if sel.Symlinks == "" {
		sel.Symlinks = SymlinksFiles
	}
	if len(sel.Filters) > MaxFilters {
		return sel, fmt.Errorf("%d filters; %d at most", len(sel.Filters), MaxFilters)
	}
	return sel, nil
}

// walkOrdered is walk for a transfer: it tells out of each file in the
// order of its object name (its relative path with its suffix appended,
// the order in which GCS lists), and onSkip of each skip, as it finds them. It holds
// no list of files, only the entries of the directories it is in. When the
// sources cannot be walked one after the other in that order (--files-from,
// two sources of one name, a source such as "." whose entries stand beside
// other sources'), it collects them first, as walk does, and sorts them. It
// returns how many entries the filters left out.
func walkOrdered(sources []string, conf *confiner, sel Selection, suffix func(name string) string, out func(SourceFile) error, onSkip func(Skip)) (int, error) {
	sel, err := checkSelection(sources, sel)
	if err != nil {
		return 0, err
	}
	if sel.FilesFrom == nil {
		if sorted, ok := orderSources(sources, conf, suffix); ok {
			w := &walker{conf: conf, sel: sel, ordered: true, suffix: suffix, out: out, onSkip: onSkip}
			err := w.all(sorted)
			return w.excluded, err
		}
	}
	w, err := walk(sources, conf, sel)
	if err != nil {
		return 0, err
	}
	for _, k := range w.skipped {
		onSkip(k)
	}
	slices.SortStableFunc(w.files, func(a, b SourceFile) int { return strings.Compare(a.Rel+suffix(a.Rel), b.Rel+suffix(b.Rel)) })
	for _, f := range w.files {
		if err := out(f); err != nil {
			return w.excluded, err
		}
	}
	return w.excluded, nil
}

// orderSources sorts sources by the object names they lead to; ok is false
// when their objects would interleave.
func orderSources(sources []string, conf *confiner, suffix func(name string) string) ([]string, bool) {
	keys := map[string]string{}
	probe := &walker{conf: conf}
	for _, src := range sources {
		_, fi, base, err := probe.open(src)
		switch {
		case err != nil:
			return nil, false // the walk names the error
		case base == "" && len(sources) > 1:
			return nil, false
		case fi.IsDir():
			base += "/"
		default:
			base = filepath.Base(filepath.Clean(src))
			base += suffix(base)
		}
		for _, k := range keys {
			if k == base {
				return nil, false
			}
		}
		keys[src] = base
	}
	sorted := slices.Clone(sources)
	slices.SortStableFunc(sorted, func(a, b string) int { return strings.Compare(keys[a], keys[b]) })
	return sorted, true
}

// all walks every source (or the --files-from list).
func (w *walker) all(sources []string) error {
	sel := w.sel
	if sel.FilesFrom != nil {
		if len(sources) != 1 {
			return fmt.Errorf("--files-from takes one source directory, not %d sources", len(sources))
		}
		if err := w.listed(sources[0], sel.FilesFrom); err != nil {
			return err
		}
	}
	for _, src := range sources {
		if sel.FilesFrom != nil {
			break
		}
		if err := w.source(src); err != nil {
			return err
		}
	}
	if sel.Found != nil {
		sel.Found(w.found, w.bytes)
	}
	return nil
}

// open resolves a source named by the user: the path to walk (with a
// confiner, its resolved path, checked before anything inside it is looked
// at, so no link or ".." in it is followed after the check), what stat says
// of it, and the first path element its objects get (its base name; none
// for "." and "/").
func (w *walker) open(src string) (walkFrom string, fi fs.FileInfo, base string, err error) {
	walkFrom = src
	if w.conf != nil {
		root, in, err := w.conf.place(src)
		if err != nil {
			return "", nil, "", err
		}
		walkFrom = filepath.Join(root, in)
	}
	if fi, err = os.Stat(walkFrom); err != nil {
		return "", nil, "", fmt.Errorf("source %s: %w", src, unwrapPathErr(err))
	}
	base = filepath.Base(filepath.Clean(src))
	if base == "." || base == "/" || base == ".." {
		base = ""
	}
	return filepath.Clean(walkFrom), fi, base, nil
}

func (w *walker) source(src string) error {
	walkFrom, fi, base, err := w.open(src)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		if !fi.Mode().IsRegular() {
			// Named by the user, not found in a tree: say so rather than
			// skip it (producer submit <(cmd) names a pipe).
			return fmt.Errorf("source %s: not a regular file (%s); a pipe is read only as standard input (SOURCE -)", src, typeName(fi.Mode()))
		}
		return w.file(src, filepath.Base(filepath.Clean(src)), "", fi)
	}
	return w.dir(walkFrom, base, "", []fs.FileInfo{fi})
}

// dir walks directory p, whose objects are named rel/…; inner is p's path
// inside its source, which filters match. ancestors are the directories
// being walked, for -L's loop check.
func (w *walker) dir(p, rel, inner string, ancestors []fs.FileInfo) error {
	entries, err := os.ReadDir(p)
	if err != nil {
		if w.sel.SkipUnreadable && errors.Is(err, fs.ErrPermission) {
			w.skip(p, rel, SkipUnreadable)
			return nil
		}
		return fmt.Errorf("source %s: %w", p, unwrapPathErr(err))
	}
	if w.ordered {
		w.order(p, entries)
	}
	for _, e := range entries {
		ep := filepath.Join(p, e.Name())
		if err := w.entry(ep, path.Join(rel, e.Name()), path.Join(inner, e.Name()), e.Type(), e.Info, ancestors); err != nil {
			return err
		}
	}
	return nil
}

// entry takes one thing found in a directory (or named by --files-from):
// path p, object path rel, path inner inside its source, its type as
// lstat gives it, and a way to get its lstat info.
func (w *walker) entry(p, rel, inner string, typ fs.FileMode, lstat func() (fs.FileInfo, error), ancestors []fs.FileInfo) error {
	isDir := typ.IsDir()
	var info fs.FileInfo // set for a followed link: its target's
	if typ&fs.ModeSymlink != 0 {
		if w.sel.Symlinks == SymlinksIgnore {
			if w.sel.selected(inner, false) {
				w.skip(p, rel, SkipLink)
			} else {
				w.excluded++
			}
			return nil
		}
		var err error
		info, err = os.Stat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			w.skip(p, rel, SkipDangling)
			return nil
		case errors.Is(err, syscall.ELOOP):
			w.skip(p, rel, SkipLoop)
			return nil
		case err != nil:
			return fmt.Errorf("source %s: symlink cannot be followed: %w", p, unwrapPathErr(err))
		}
		isDir = info.IsDir()
	}
	if !isDir {
		if info == nil {
			var err error
			if info, err = lstat(); err != nil {
				return fmt.Errorf("source %s: %w", p, unwrapPathErr(err))
			}
		}
		return w.file(p, rel, inner, info)
	}
	if !w.sel.selected(inner, true) {
		w.excluded++
		return nil
	}
	var id fs.FileInfo // nil: no loop to look for
	switch {
	case info != nil && w.sel.Symlinks != SymlinksFollow:
		w.skip(p, rel, SkipDirLink)
		return nil
	case info != nil: // a followed link: it may lead back up
		id = info
		if slices.ContainsFunc(ancestors, func(a fs.FileInfo) bool { return a != nil && os.SameFile(a, info) }) {
			w.skip(p, rel, SkipLoop)
			return nil
		}
		if w.conf != nil {
			if _, _, err := w.conf.place(p); err != nil {
				return err
			}
		}
	case w.sel.Symlinks == SymlinksFollow:
		d, err := lstat()
		if err != nil {
			return fmt.Errorf("source %s: %w", p, unwrapPathErr(err))
		}
		id = d
	}
	return w.dir(p, rel, inner, append(ancestors, id))
}

// listed takes the paths of a --files-from list, each relative to the one
// source directory root (named rel/… in the bucket, as a walk of it would
// name them); a path naming a directory is walked.
func (w *walker) listed(src string, list []string) error {
	root, fi, base, err := w.open(src)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("source %s: --files-from names paths inside one source directory; this is not a directory", src)
	}
	ancestors := []fs.FileInfo{fi}
	for n, line := range list {
		inner := path.Clean(strings.TrimPrefix(line, "./"))
		if err := names.Check(inner); err != nil || inner == "." {
			return fmt.Errorf("--files-from line %d: %.64q is not a plain relative path (%v)", n+1, line, err)
		}
		p := filepath.Join(root, filepath.FromSlash(inner))
		st, err := os.Lstat(p)
		if err != nil {
			return fmt.Errorf("--files-from line %d: source %s: %w", n+1, p, unwrapPathErr(err))
		}
		if err := w.entry(p, path.Join(base, inner), inner, st.Mode().Type(), func() (fs.FileInfo, error) { return st, nil }, ancestors); err != nil {
			return err
		}
	}
	return nil
}

// file takes one file the walk found (or a source named itself).
func (w *walker) file(p, rel, inner string, fi fs.FileInfo) error {
	if inner != "" && !w.sel.selected(inner, false) {
		w.excluded++
		return nil
	}
	if !fi.Mode().IsRegular() {
		w.skip(p, rel, "not a regular file ("+typeName(fi.Mode())+")")
		return nil
	}
	if err := names.Check(rel); err != nil {
		return fmt.Errorf("source %s: %w", p, err)
	}
	if err := osfile.Readable(p); err != nil {
		if w.sel.SkipUnreadable {
			w.skip(p, rel, SkipUnreadable)
			return nil
		}
		return fmt.Errorf("source %s: %w (--skip-unreadable skips what cannot be read)", p, err)
	}
	f := SourceFile{Path: p, Rel: rel, Size: fi.Size(), Mod: fi.ModTime().UnixNano()}
	w.bytes += f.Size
	f.Ino, f.Ctime = statID(fi)
	f.Perm = uint32(fi.Mode().Perm())
	f.UID, f.GID, f.Owned = osfile.Owner(fi)
	if w.conf != nil {
		var err error
		if f.Root, f.InRoot, err = w.conf.place(p); err != nil {
			return err
		}
	}
	w.found++
	if w.sel.Found != nil && w.found%foundEvery == 0 {
		w.sel.Found(w.found, w.bytes)
	}
	if w.out != nil {
		return w.out(f)
	}
	w.files = append(w.files, f)
	return nil
}

func (w *walker) skip(p, rel, reason string) {
	k := Skip{Path: p, Rel: rel, Reason: reason}
	if w.onSkip != nil {
		w.onSkip(k)
		return
	}
	w.skipped = append(w.skipped, k)
}

// order sorts the entries of directory p by the object names they lead
// to: a file's name with its suffix (the codec's extension, or "/" for a
// converted file), a directory's (or a link to one that -L follows) with
// "/", as GCS lists the objects.
func (w *walker) order(p string, entries []fs.DirEntry) {
	keys := make(map[string]string, len(entries))
	for _, e := range entries {
		dir := e.IsDir()
		if e.Type()&fs.ModeSymlink != 0 && w.sel.Symlinks == SymlinksFollow {
			if st, err := os.Stat(filepath.Join(p, e.Name())); err == nil {
				dir = st.IsDir()
			}
		}
		if dir {
			keys[e.Name()] = e.Name() + "/"
		} else {
			keys[e.Name()] = e.Name() + w.suffix(e.Name())
		}
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(keys[a.Name()], keys[b.Name()]) })
}

// statID is a file's inode and change time (UnixNano): what a reader
// compares to see that the file it opened is the one planned, unchanged.
// ctime cannot be set back, as mtime can (cp -p, rsync -t, tar x).
func statID(fi fs.FileInfo) (ino uint64, ctime int64) { return osfile.Change(fi) }

// StatID is statID for a reader's fstat.
func StatID(fi fs.FileInfo) (ino uint64, ctime int64) { return statID(fi) }

// typeName names a file type for a skip reason.
func typeName(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	case m.IsDir():
		return "directory"
	}
	return m.Type().String()
}

// TypeName is typeName for a reader that finds a file is no longer regular.
func TypeName(m fs.FileMode) string { return typeName(m) }
