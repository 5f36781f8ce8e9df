package restore_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/restore"
)

// Issue 32 §3: restore gives each file the mode, owner, group and mtime
// the object's metadata names under gcloud's --preserve-posix keys (an
// object gcloud uploaded has no ferry metadata): the mode always (never a
// setuid bit), owner and group as root or with --preserve-posix, and a
// note, once, when it does not set them.
func TestRestoreSetsPosixAttributes(t *testing.T) {
	s, bucket := newBucket(t)
	ctx := context.Background()
	put := func(name string, md map[string]string) {
		body := []byte("#!/bin/sh\necho " + name + "\n")
		if _, err := s.Upload(ctx, bucket, name, bytes.NewReader(body), gcs.UploadOptions{Size: int64(len(body)), CRC32C: crc32c.Checksum(body), Metadata: md}); err != nil {
			t.Fatal(err)
		}
	}
	gcloud := func(mode string, uid, gid int) map[string]string {
		md := map[string]string{}
		message.PosixMetadata(md, nil, time.Unix(1_700_000_000, 0))
		md[message.MetaPosixMode] = mode
		md[message.MetaPosixUID], md[message.MetaPosixGID] = itoa(uid), itoa(gid)
		return md
	}
	put("t/run.sh", gcloud("755", 1000, 1001))
	put("t/secret", gcloud("600", 2000, 2001))
	put("t/suid", gcloud("4755", 0, 0)) // not three octal digits: ignored, as gcloud does
	put("t/odd", map[string]string{message.MetaPosixMode: "9x", message.MetaPosixUID: "-3", message.MetaFileMtime: "soon"})

	check := func(dir, name string, mode os.FileMode, uid, gid int, mtime time.Time) {
		t.Helper()
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode().Perm() != mode || fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 || (uid >= 0 && (int(st.Uid) != uid || int(st.Gid) != gid)) ||
			(!mtime.IsZero() && !fi.ModTime().Equal(mtime)) {
			t.Errorf("%s: mode %v, owner %d:%d, modified %v; want %v, %d:%d, %v", name, fi.Mode(), st.Uid, st.Gid, fi.ModTime(), mode, uid, gid, mtime)
		}
	}
	umasked := os.FileMode(0o644) &^ umask()

	// Not root, no --preserve-posix: modes and times, and one note.
	dir := t.TempDir()
	r := newRestorer(t, s, options())
	restore.SetEUID(r, 4242)
	sum, err := r.Run(ctx, "gs://"+bucket+"/t/", dir)
	if err != nil {
		t.Fatal(err)
	}
	me := os.Getuid()
	check(dir, "run.sh", 0o755, -1, -1, time.Unix(1_700_000_000, 0))
	check(dir, "secret", 0o600, -1, -1, time.Time{})
	check(dir, "suid", umasked, -1, -1, time.Time{})
	check(dir, "odd", umasked, -1, -1, time.Time{})
	if me != 1000 && (!strings.Contains(sum.Note, "owners and groups were not restored") || !strings.Contains(sum.Note, "--preserve-posix")) {
		t.Errorf("summary note %q, want one saying owners were not restored and naming --preserve-posix", sum.Note)
	}

	if os.Geteuid() != 0 {
		t.Skip("not root: owners and groups cannot be set here")
	}
	dir = t.TempDir()
	sum, err = newRestorer(t, s, options()).Run(ctx, "gs://"+bucket+"/t/", dir)
	if err != nil {
		t.Fatal(err)
	}
	check(dir, "run.sh", 0o755, 1000, 1001, time.Unix(1_700_000_000, 0))
	check(dir, "secret", 0o600, 2000, 2001, time.Time{})
	check(dir, "suid", umasked, 0, 0, time.Time{})
	if sum.Note != "" {
		t.Errorf("note %q as root", sum.Note)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// umask is the process's file creation mask.
func umask() os.FileMode {
	m := syscall.Umask(0)
	syscall.Umask(m)
	return os.FileMode(m)
}
