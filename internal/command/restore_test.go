package command

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/cli"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(teststack.MainWithGCS(m)) }

// ferry restore gs://B/OBJ - writes the object's bytes, proven, on stdout
// and nothing else there; a prefix of several objects is refused naming
// how many, and --json, which would mix with the bytes, too.
func TestRestoreToStandardOutput(t *testing.T) {
	const bucket = "restore-stdout"
	s := teststack.Bucket(t, bucket)
	raw := testutil.CSV(t, 3<<20, 7)
	teststack.FerryObject(t, s, bucket, "d/a.csv.zst", raw, teststack.FerryOptions{})
	teststack.FerryObject(t, s, bucket, "d/b.csv.zst", raw[:1000], teststack.FerryOptions{})
	t.Setenv("FERRY_ENV_FILE", "")
	code, out, errs := runFerry("restore", "gs://"+bucket+"/d/a.csv.zst", "-")
	if code != cli.ExitOK || out != string(raw) {
		t.Fatalf("restore to -: exit %d, %d bytes on stdout (want the object's %d), stderr %q", code, len(out), len(raw), errs)
	}
	if !strings.Contains(errs, "1 object") {
		t.Errorf("restore to -: stderr %q, want the summary there", errs)
	}
	// ferry cp copies back the same way, into a directory too.
	if code, out, errs := runFerry("cp", "gs://"+bucket+"/d/a.csv.zst", "-"); code != cli.ExitOK || out != string(raw) {
		t.Fatalf("cp gs://… -: exit %d, %d bytes on stdout, stderr %q", code, len(out), errs)
	}
	dir := t.TempDir()
	if code, _, errs := runFerry("cp", "gs://"+bucket+"/d/", dir); code != cli.ExitOK {
		t.Fatalf("cp gs://…/d/ DIR: exit %d, stderr %q", code, errs)
	}
	for name, want := range map[string][]byte{"a.csv": raw, "b.csv": raw[:1000]} {
		if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !bytes.Equal(got, want) {
			t.Errorf("cp gs://…/d/ DIR: %s holds %d bytes (%v), want %d", name, len(got), err, len(want))
		}
	}
	// Over a file with other bytes only with --overwrite; a flag of
	// uploads only is refused, not ignored.
	testutil.OK(t, os.WriteFile(filepath.Join(dir, "b.csv"), []byte("other"), 0o644))
	if code, _, _ := runFerry("cp", "gs://"+bucket+"/d/b.csv.zst", dir); code == cli.ExitOK {
		t.Error("cp gs://… DIR replaced a file with other bytes without --overwrite")
	}
	if code, _, errs := runFerry("cp", "--overwrite", "gs://"+bucket+"/d/b.csv.zst", dir); code != cli.ExitOK {
		t.Errorf("cp --overwrite gs://… DIR: exit %d, stderr %q", code, errs)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "b.csv")); !bytes.Equal(got, raw[:1000]) {
		t.Errorf("after cp --overwrite, b.csv holds %q", got)
	}
	if code, _, errs := runFerry("cp", "--exclude", "*.tmp", "gs://"+bucket+"/d/", dir); code != cli.ExitUsage || !strings.Contains(errs, "--exclude") {
		t.Errorf("cp --exclude gs://… DIR: exit %d, stderr %q; want a usage error naming --exclude", code, errs)
	}
	if code, out, errs := runFerry("restore", "gs://"+bucket+"/d/", "-"); code != cli.ExitUsage || out != "" || !strings.Contains(errs, "names 2 objects") {
		t.Errorf("a prefix of two objects to -: exit %d, stdout %d bytes, stderr %q; want exit 2 naming 2 objects", code, len(out), errs)
	}
	if code, _, errs := runFerry("restore", "--json", "gs://"+bucket+"/d/a.csv.zst", "-"); code != cli.ExitUsage || !strings.Contains(errs, "--json") {
		t.Errorf("--json to -: exit %d, stderr %q; want a usage error", code, errs)
	}
}
