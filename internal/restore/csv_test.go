package restore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/restore"
)

// restore --to csv writes only inside its destination, and treats an
// output that exists as restore does: a link in the destination does not
// lead the write out, other bytes are an error without --overwrite, the
// same bytes are left.
func TestToCSVStaysInsideAndKeepsWhatDiffers(t *testing.T) {
	dest, outside := t.TempDir(), t.TempDir()
	stage := func(rel, body string) {
		p := filepath.Join(dest, restore.StageDir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(dest, "out")); err != nil {
		t.Fatal(err)
	}
	stage("out/readme.txt", "hello\n")
	if _, err := restore.ToCSV(context.Background(), dest, false); err == nil {
		t.Fatal("a file under a link out of the destination was moved")
	}
	if left, _ := os.ReadDir(outside); len(left) != 0 {
		t.Fatalf("written outside the destination: %v", left)
	}
	if err := os.Remove(filepath.Join(dest, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dest, restore.StageDir)); err != nil {
		t.Fatal(err)
	}

	if err := os.WriteFile(filepath.Join(dest, "same.txt"), []byte("same\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dest, "other.txt"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stage("same.txt", "same\n")
	stage("other.txt", "theirs\n")
	_, err := restore.ToCSV(context.Background(), dest, false)
	if !errors.Is(err, restore.ErrExists) || !strings.Contains(err.Error(), "other.txt") {
		t.Fatalf("ToCSV over a different output: %v, want ErrExists naming other.txt", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dest, "other.txt")); string(b) != "mine\n" {
		t.Fatalf("other.txt replaced without --overwrite: %q", b)
	}
	if _, err := restore.ToCSV(context.Background(), dest, true); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dest, "other.txt")); string(b) != "theirs\n" {
		t.Fatalf("other.txt with --overwrite: %q", b)
	}
	if _, err := os.Stat(filepath.Join(dest, restore.StageDir)); !os.IsNotExist(err) {
		t.Fatalf("the stage is still there: %v", err)
	}
}
