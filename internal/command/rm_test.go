package command

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/cli"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// ferry rm deletes a directory's objects (not a neighbour's that starts
// alike) or one object, only with --yes off a terminal; --dry-run deletes
// nothing; a whole bucket and ferry's own prefixes are refused.
func TestRmDeletesAPrefixOnlyWhenAskedTo(t *testing.T) {
	const bucket = "rm-objects"
	s := teststack.Bucket(t, bucket)
	ctx := context.Background()
	for _, name := range []string{"d/a", "d/sub/b", "d2/c", "one.csv", ".ferry-done/t1"} {
		_, err := s.PutSmall(ctx, bucket, name, []byte(name), false, "text/plain")
		testutil.OK(t, err)
	}
	t.Setenv("FERRY_ENV_FILE", "")
	exists := func(name string) bool {
		_, err := s.Attrs(ctx, bucket, name)
		return err == nil
	}
	if code, out, errs := runFerry("rm", "--dry-run", "gs://"+bucket+"/d"); code != cli.ExitOK || !strings.Contains(out, "would delete gs://"+bucket+"/d/sub/b") ||
		strings.Contains(out, "d2/c") || !strings.Contains(errs, "2 objects") || !exists("d/a") {
		t.Errorf("rm --dry-run: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, _, errs := runFerry("rm", "gs://"+bucket+"/d"); code != cli.ExitUsage || !strings.Contains(errs, "--yes") || !exists("d/a") {
		t.Errorf("rm without --yes off a terminal: exit %d, stderr %q; want a usage error and nothing deleted", code, errs)
	}
	if code, _, errs := runFerry("rm", "-y", "gs://"+bucket+"/d"); code != cli.ExitOK || exists("d/a") || exists("d/sub/b") || !exists("d2/c") {
		t.Errorf("rm -y d: exit %d, stderr %q; want d/ gone and d2/ kept", code, errs)
	}
	if code, _, errs := runFerry("rm", "-y", "gs://"+bucket+"/one.csv"); code != cli.ExitOK || exists("one.csv") {
		t.Errorf("rm -y of one object: exit %d, stderr %q", code, errs)
	}
	for _, target := range []string{"gs://" + bucket, "gs://" + bucket + "/.ferry-done", "gs://" + bucket + "/.ferry/x"} {
		if code, _, errs := runFerry("rm", "-y", target); code != cli.ExitUsage {
			t.Errorf("rm -y %s: exit %d, stderr %q; want refused", target, code, errs)
		}
	}
	if !exists(".ferry-done/t1") {
		t.Error("rm deleted one of ferry's own objects")
	}
}

// Only y or yes confirms.
func TestAskTakesOnlyYes(t *testing.T) {
	for answer, want := range map[string]bool{"y\n": true, "YES\n": true, "\n": false, "n\n": false, "": false, "yep\n": false} {
		var w bytes.Buffer
		if got := ask(strings.NewReader(answer), &w, "delete? "); got != want || w.String() != "delete? " {
			t.Errorf("ask(%q) = %v, asked %q; want %v", answer, got, w.String(), want)
		}
	}
}

var _ rmStore = (*gcs.Store)(nil)
