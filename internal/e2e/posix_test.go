package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/localstack"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// posixFile is one file of the attribute test's tree.
type posixFile struct {
	rel      string
	mode     os.FileMode
	uid, gid int
}

// Issue 32 §3: a tree with executables, a setuid-free mix of modes and two
// owners keeps its attributes through ferry (submit, restore), and through
// gcloud storage cp --preserve-posix on ferry's objects; and ferry's
// restore gives back the attributes of objects gcloud uploaded.
func TestTreeAttributesRoundTrip(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root: the tree's two owners cannot be made")
	}
	s := newStack(t, stackOptions{workers: 1, inlineMax: 4 << 10})
	src := filepath.Join(t.TempDir(), "tree")
	files := []posixFile{
		{"bin/run.sh", 0o755, 1000, 1000},
		{"bin/tool", 0o750, 1000, 2000},
		{"data/a.csv", 0o644, 2000, 2000},
		{"data/secret.csv", 0o600, 2000, 3000},
		{"read-only.txt", 0o444, 0, 0},
		{"data/big.csv", 0o640, 1000, 3000}, // several chunks: the merger's compose writes its metadata
	}
	mtime := time.Date(2026, 11, 30, 12, 34, 56, 0, time.UTC)
	for _, f := range files {
		p := filepath.Join(src, filepath.FromSlash(f.rel))
		testutil.OK(t, os.MkdirAll(filepath.Dir(p), 0o755))
		body := []byte("#!/bin/sh\necho " + f.rel + "\n")
		if strings.HasSuffix(f.rel, "big.csv") {
			body = make([]byte, 2_500_000) // zeros: small on the wire, three chunks
		}
		testutil.OK(t, os.WriteFile(p, body, 0o644))
		testutil.OK(t, os.Chmod(p, f.mode))
		testutil.OK(t, os.Chown(p, f.uid, f.gid))
		testutil.OK(t, os.Chtimes(p, mtime, mtime))
	}
	check := func(who, dir string, name func(string) string) {
		t.Helper()
		for _, f := range files {
			fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(name(f.rel))))
			if err != nil {
				var names []string
				_ = filepath.WalkDir(dir, func(p string, _ os.DirEntry, _ error) error { names = append(names, p); return nil })
				t.Fatalf("%s: %v; it holds %q", who, err, names)
			}
			st := fi.Sys().(*syscall.Stat_t)
			if fi.Mode().Perm() != f.mode || int(st.Uid) != f.uid || int(st.Gid) != f.gid || !fi.ModTime().Equal(mtime) {
				t.Errorf("%s: %s has mode %v, owner %d:%d, mtime %v; the source had %v, %d:%d, %v",
					who, f.rel, fi.Mode().Perm(), st.Uid, st.Gid, fi.ModTime().UTC(), f.mode, f.uid, f.gid, mtime)
			}
		}
	}
	env := s.env("FERRY_BUCKETS=" + s.bucket)
	if code, _, stderr := runBinary(t, env, "producer", "submit", "--wait", "--chunk-size", "1MiB", src, "gs://"+s.bucket+"/tree"); code != 0 {
		t.Fatalf("submit: exit %d, %s", code, stderr)
	}
	out := filepath.Join(t.TempDir(), "ferry")
	if code, _, stderr := runBinary(t, env, "restore", "gs://"+s.bucket+"/tree/", out); code != 0 {
		t.Fatalf("restore: exit %d, %s", code, stderr)
	}
	check("ferry restore", out, func(rel string) string { return "tree/" + rel })

	if _, err := exec.LookPath("gcloud"); err != nil {
		t.Skip("gcloud not on PATH: the round trips through gcloud are not tried")
	}
	gc := gcloudEnv(t)
	byGcloud := filepath.Join(t.TempDir(), "gcloud")
	testutil.OK(t, os.MkdirAll(byGcloud, 0o755))
	gcloudRun(t, gc, "storage", "cp", "-r", "--preserve-posix", "gs://"+s.bucket+"/tree/*", byGcloud)
	check("gcloud storage cp --preserve-posix of ferry's objects", byGcloud, func(rel string) string { return "tree/" + rel + ".zst" })

	gcloudRun(t, gc, "storage", "cp", "-r", "--preserve-posix", src+"/*", "gs://"+s.bucket+"/by-gcloud/")
	back := filepath.Join(t.TempDir(), "back")
	if code, _, stderr := runBinary(t, env, "restore", "gs://"+s.bucket+"/by-gcloud/", back); code != 0 {
		t.Fatalf("restore of gcloud's objects: exit %d, %s", code, stderr)
	}
	check("ferry restore of gcloud's objects", back, func(rel string) string { return rel })
}

// gcloudEnv is an environment in which gcloud storage talks to the test's
// fake-gcs-server, with a configuration directory of its own.
func gcloudEnv(t *testing.T) []string {
	env := append(os.Environ(), "CLOUDSDK_CONFIG="+t.TempDir(), "CLOUDSDK_CORE_DISABLE_PROMPTS=1")
	for _, line := range strings.Split(localstack.Env("ferry-test", "", os.Getenv("STORAGE_EMULATOR_HOST"), nil), "\n") {
		if kv, ok := strings.CutPrefix(line, "export "); ok && strings.HasPrefix(kv, "CLOUDSDK_") {
			env = append(env, kv)
		}
	}
	return env
}

func gcloudRun(t *testing.T, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command("gcloud", args...)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gcloud %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
