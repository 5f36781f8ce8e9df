package plan

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// SourceFile is one file to transfer, as the walk found it.
type SourceFile struct {
	Path string // as named or walked; what error messages show
	Rel  string // relative path, slash separated: the object name under the prefix
	Size int64
	Mod  int64 // modification time, UnixNano, to detect changes while reading
	// Ino and Ctime (UnixNano) are the inode and change time the walk saw:
	// a reader refuses a file that was replaced, or changed even with its
	// mtime set back.
	Ino   uint64
	Ctime int64
	// Perm, UID and GID are the file's permission bits, owner and group
	// (Owned: the platform reported them).
	Perm     uint32
	UID, GID uint32
	Owned    bool
	// Root and InRoot are set when sources are confined (Spec.Roots): the
	// root the file's resolved path lies under, and that path relative to
	// it. Open reads such a file through an os.Root, so a link swapped in
	// after planning cannot lead out of the root.
	Root, InRoot string
}

// Open opens the file for reading, through its root when it has one, and
// without blocking: a FIFO or device swapped in after planning opens at once
// and is refused, never read (a blocking open of a FIFO waits in the kernel
// for a writer, past every deadline and signal). What is opened must still
// be the regular file the walk saw: the same inode.
func (f SourceFile) Open() (*os.File, error) {
	const flags = os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_NOCTTY
	var fh *os.File
	var err error
	if f.Root == "" {
		fh, err = os.OpenFile(f.Path, flags, 0)
	} else {
		var r *os.Root
		if r, err = os.OpenRoot(f.Root); err != nil {
			return nil, err
		}
		fh, err = r.OpenFile(f.InRoot, flags, 0)
		_ = r.Close()
	}
	if err != nil {
		return nil, err
	}
	st, err := fh.Stat()
	switch {
	case err != nil:
	case !st.Mode().IsRegular():
		err = fmt.Errorf("%w: it is now a %s, not the regular file planned; not read", ErrChanged, typeName(st.Mode()))
	default:
		if ino, _ := statID(st); f.Ino != 0 && ino != f.Ino {
			err = fmt.Errorf("%w: replaced by another file (inode %d, planned %d)", ErrChanged, ino, f.Ino)
		}
	}
	if err != nil {
		_ = fh.Close()
		return nil, err
	}
	return fh, nil
}

// ErrChanged: a source file is not what the walk saw, or changed while it
// was read. Its transfer fails: a torn or swapped file is never stored.
var ErrChanged = errors.New("changed after planning")

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
