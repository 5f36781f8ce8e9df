package teststack

import (
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// OddEntries adds to the tree at root what real trees hold besides regular
// files: linkName, a link to the file linkTarget; dir-link, a link to the
// directory dir (which must exist); dir/sub/up, a link back up to root (a
// loop for -L); dangling, a link to nothing; zero, a link to /dev/zero; fifo,
// a named pipe; and sock, a listening socket, closed when the test ends.
func OddEntries(t testing.TB, root, linkTarget, linkName string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "dir", "sub"), 0o755))
	must(os.Symlink(linkTarget, filepath.Join(root, linkName)))
	must(os.Symlink("dir", filepath.Join(root, "dir-link")))
	must(os.Symlink("../..", filepath.Join(root, "dir", "sub", "up")))
	must(os.Symlink("nowhere", filepath.Join(root, "dangling")))
	must(os.Symlink("/dev/zero", filepath.Join(root, "zero")))
	must(syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644))
	l, err := net.Listen("unix", filepath.Join(root, "sock"))
	must(err)
	t.Cleanup(func() { _ = l.Close() })
}
