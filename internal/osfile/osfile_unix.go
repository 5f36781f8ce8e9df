//go:build unix

package osfile

import (
	"errors"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// NoFollow is the open flag that refuses a final symbolic link.
const NoFollow = syscall.O_NOFOLLOW

// Lock takes an exclusive lock on f, waiting for it (flock).
func Lock(f *os.File) error { return unix.Flock(int(f.Fd()), unix.LOCK_EX) }

// TryLock takes an exclusive lock on f, or fails with ErrLocked at once.
func TryLock(f *os.File) error {
	err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return ErrLocked
	}
	return err
}

// Unlock releases f's lock; closing f releases it too.
func Unlock(f *os.File) error { return unix.Flock(int(f.Fd()), unix.LOCK_UN) }

// Readable reports, as an error, whether this process may read path.
func Readable(path string) error { return unix.Access(path, unix.R_OK) }

// Owner is fi's owning user and group; ok false where the system has none.
func Owner(fi fs.FileInfo) (uid, gid uint32, ok bool) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Uid, st.Gid, true
	}
	return 0, 0, false
}

// Change is fi's inode and change time (UnixNano), 0 where unknown: what a
// reader compares to see that the file it opened is the one planned,
// unchanged. A change time cannot be set back, as a mtime can.
func Change(fi fs.FileInfo) (ino uint64, ctime int64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino, ctimeOf(st)
	}
	return 0, 0
}

// Allocated is the bytes fi takes on disk.
func Allocated(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512 //nolint:unconvert // Blocks' type differs between platforms
	}
	return fi.Size()
}

// FreeSpace is the bytes an unprivileged writer may still use in dir's
// file system.
func FreeSpace(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil //nolint:unconvert,gosec // field types differ between platforms
}

// ProcessRuns reports whether process pid runs on this host: signal 0
// checks without sending anything; EPERM is a process of another user.
func ProcessRuns(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
