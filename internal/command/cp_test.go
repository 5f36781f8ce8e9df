package command

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ferry-dev/ferry/internal/cli"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// A plain copy (--codec none) keeps the names and gets the content type
// gcloud storage cp would set, on a one-chunk object (written by the
// uploads) and on a composed one (by the merger) alike.
func TestAPlainCopyGetsTheTypeOfItsExtension(t *testing.T) {
	const bucket = "cp-plain"
	s := teststack.Bucket(t, bucket)
	dir := t.TempDir()
	testutil.WriteCSV(t, filepath.Join(dir, "big.csv"), 3<<20, 1)
	testutil.WriteCSV(t, filepath.Join(dir, "small.csv"), 10_000, 2)
	testutil.OK(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hello\n"), 0o644))
	t.Setenv("FERRY_ENV_FILE", "")
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	t.Setenv("FERRY_BUCKETS", bucket)
	code, _, errs := runFerry("cp", "--codec", "none", "--chunk-size", "1MiB",
		filepath.Join(dir, "big.csv"), filepath.Join(dir, "small.csv"), filepath.Join(dir, "notes.txt"), "gs://"+bucket+"/plain")
	if code != cli.ExitOK {
		t.Fatalf("ferry cp --codec none: exit %d\n%s", code, errs)
	}
	for name, want := range map[string]string{"plain/big.csv": "text/csv", "plain/small.csv": "text/csv", "plain/notes.txt": "text/plain"} {
		a, err := s.Attrs(context.Background(), bucket, name)
		if err != nil || a.ContentType != want {
			t.Errorf("%s: content type %q (%v), want %q", name, a.ContentType, err, want)
		}
	}
}
