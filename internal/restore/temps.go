package restore

import (
	"os"
	"path"
	"strings"
	"sync"

	"github.com/ferry-dev/ferry/internal/names"
)

// temps keeps restores that run at once off each other's temporary files.
// A tree ferry sent may hold a directory at a file's temporary name
// (.q.ferry-part/ beside q): the directory is made only while no restore
// writes a temporary file by that name, and a temporary name is chosen
// only while no such directory is being made, so q takes the next one
// (altTemp) whichever comes first.
type temps struct {
	mu    sync.Mutex
	freed *sync.Cond
	inUse map[string]int // root and temporary name → restores writing it
}

func newTemps() *temps {
	t := &temps{inUse: map[string]int{}}
	t.freed = sync.NewCond(&t.mu)
	return t
}

// claim returns rel's temporary name in root (tempIn), and the function
// that gives it back once the file is renamed or removed.
func (t *temps) claim(root *os.Root, rel string) (string, func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tmp := tempIn(root, rel)
	k := root.Name() + "\x00" + tmp
	t.inUse[k]++
	return tmp, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.inUse[k]--; t.inUse[k] <= 0 {
			delete(t.inUse, k)
		}
		t.freed.Broadcast()
	}
}

// mkdirAll makes dir in root. Where one of its elements is a temporary
// name, it waits until no restore writes a file by that name, removes what
// an interrupted restore left there (no output is ever called so), and
// makes the directories before anyone can choose that name again.
func (t *temps) mkdirAll(root *os.Root, dir string) error {
	if dir == "." || dir == "" {
		return nil
	}
	var reserved []string
	elems := strings.Split(dir, "/")
	for i, e := range elems {
		if names.Reserved(e) {
			reserved = append(reserved, path.Join(elems[:i+1]...))
		}
	}
	if len(reserved) == 0 {
		return root.MkdirAll(dir, 0o755)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for t.busy(root, reserved) {
		t.freed.Wait()
	}
	for _, p := range reserved {
		if fi, err := root.Lstat(p); err == nil && fi.Mode().IsRegular() {
			_ = root.Remove(p)
			_ = root.Remove(p + logSuffix)
		}
	}
	return root.MkdirAll(dir, 0o755)
}

func (t *temps) busy(root *os.Root, reserved []string) bool {
	for _, p := range reserved {
		if t.inUse[root.Name()+"\x00"+p] > 0 {
			return true
		}
	}
	return false
}
