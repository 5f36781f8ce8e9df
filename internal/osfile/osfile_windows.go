//go:build windows

package osfile

import (
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/windows"
)

// NoFollow is 0 on Windows: opens inside an os.Root already refuse links
// that leave it.
const NoFollow = 0

// Lock takes an exclusive lock on f's first byte, waiting for it
// (LockFileEx).
func Lock(f *os.File) error { return lock(f, 0) }

// TryLock takes an exclusive lock on f, or fails with ErrLocked at once.
func TryLock(f *os.File) error {
	err := lock(f, windows.LOCKFILE_FAIL_IMMEDIATELY)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
		return ErrLocked
	}
	return err
}

func lock(f *os.File, flags uint32) error {
	var o windows.Overlapped
	return windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|flags, 0, 1, 0, &o)
}

// Unlock releases f's lock; closing f releases it too.
func Unlock(f *os.File) error {
	var o windows.Overlapped
	return windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, &o)
}

// Readable reports, as an error, whether this process may read path: it
// opens the file and closes it.
func Readable(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return f.Close()
}

// Owner is false on Windows: files have no POSIX owner.
func Owner(fs.FileInfo) (uid, gid uint32, ok bool) { return 0, 0, false }

// Change is 0 on Windows: change detection compares size and mtime.
func Change(fs.FileInfo) (ino uint64, ctime int64) { return 0, 0 }

// Allocated is fi's size on Windows.
func Allocated(fi fs.FileInfo) int64 { return fi.Size() }

// FreeSpace is the bytes the caller may still use on dir's volume.
func FreeSpace(dir string) (int64, error) {
	p, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return 0, err
	}
	var free, total, all uint64
	if err := windows.GetDiskFreeSpaceEx(p, &free, &total, &all); err != nil {
		return 0, err
	}
	return int64(free), nil //nolint:gosec // a volume's bytes fit
}

// ProcessRuns cannot tell here, so it answers that pid runs: a lease's
// holder then holds others off until the transfer timeout, as a lease
// without a holder does.
func ProcessRuns(int) bool { return true }
