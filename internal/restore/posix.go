package restore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"time"

	"github.com/ferry-dev/ferry/internal/message"
)

// posix is what an object's metadata says of its source file's
// attributes, under gcloud storage cp --preserve-posix's keys (which ferry
// writes too). Values gcloud would ignore (not a number, a negative one, a
// mode that is not three octal digits) are ignored, as gcloud does.
type posix struct {
	mode     fs.FileMode // permission bits only; hasMode says it is set
	hasMode  bool
	uid, gid int // -1: none
	mtime    time.Time
}

// posixOf reads the attributes in m.
func posixOf(m map[string]string) posix {
	p := posix{uid: -1, gid: -1}
	if v, ok := m[message.MetaPosixMode]; ok && len(v) >= 1 && len(v) <= 3 {
		if n, err := strconv.ParseUint(v, 8, 32); err == nil {
			p.mode, p.hasMode = fs.FileMode(n)&fs.ModePerm, true
		}
	}
	id := func(key string) int {
		if n, err := strconv.ParseUint(m[key], 10, 31); err == nil {
			return int(n)
		}
		return -1
	}
	p.uid, p.gid = id(message.MetaPosixUID), id(message.MetaPosixGID)
	if n, err := strconv.ParseInt(m[message.MetaFileMtime], 10, 64); err == nil && n >= 0 {
		p.mtime = time.Unix(n, 0)
	}
	return p
}

// attributes gives tmp (inside root) the mode, owner and group p names:
// the mode always (permission bits only, so never setuid), owner and group
// when the Restorer may (Options.PreservePosix, or running as root). A
// chown the system refuses is said once (Restorer.Note), not an error.
func (r *Restorer) attributes(root *os.Root, tmp, obj string, p posix) error {
	if p.hasMode {
		if err := root.Chmod(tmp, p.mode); err != nil {
			return fmt.Errorf("%s: mode %03o: %w", obj, p.mode, err)
		}
	}
	if p.uid < 0 && p.gid < 0 {
		return nil
	}
	if !r.o.PreservePosix && r.euid() != 0 {
		if (p.uid >= 0 && p.uid != os.Getuid()) || (p.gid >= 0 && p.gid != os.Getgid()) {
			r.note(fmt.Sprintf("owners and groups were not restored (first: %s, uid %d gid %d): restore runs as uid %d, not root; --preserve-posix tries",
				obj, p.uid, p.gid, os.Getuid()))
		}
		return nil
	}
	if err := root.Lchown(tmp, p.uid, p.gid); err != nil {
		if errors.Is(err, fs.ErrPermission) {
			r.note(fmt.Sprintf("owners and groups were not restored (first: %s, uid %d gid %d): %v (chown needs root or CAP_CHOWN)", obj, p.uid, p.gid, err))
			return nil
		}
		return fmt.Errorf("%s: owner %d group %d: %w", obj, p.uid, p.gid, err)
	}
	return nil
}

// note keeps the first of the things restore could not do but did not
// fail for; Summary.Note carries it, and the command says it once.
func (r *Restorer) note(s string) {
	r.noteOnce.Do(func() { r.noteText.Store(&s) })
}
