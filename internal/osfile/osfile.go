// Package osfile is what ferry asks of the operating system about files
// beyond the os package: an exclusive lock on a file, whether a file may
// be read, a file's owner, identity and change time (what change
// detection compares), a flag that refuses to open a link, and a file
// system's free space. Each need has one function here and one body per
// platform (_unix.go, _windows.go), so the rest of ferry builds and
// behaves alike on Linux, macOS and Windows.
package osfile

import (
	"errors"
	"os"
	"path/filepath"
)

// ErrLocked: another process holds the lock TryLock asked for.
var ErrLocked = errors.New("locked by another process")

// WriteFile writes data to path as a whole or not at all: to a temporary
// file beside it, synced, then renamed over path (which replaces it on
// every platform), so a crash leaves the old content or the new.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, perm)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}
