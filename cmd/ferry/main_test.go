package main

import (
	"os"
	"os/exec"
	"testing"
)

// ferry builds for Windows and macOS as for Linux: the platform code is
// internal/osfile's, one body per platform. (make release builds all six
// of linux, darwin and windows on amd64 and arm64.)
func TestFerryBuildsForWindowsAndMacOS(t *testing.T) {
	for _, target := range [][2]string{{"windows", "amd64"}, {"darwin", "arm64"}} {
		cmd := exec.Command("go", "build", "-o", os.DevNull, ".")
		cmd.Env = append(os.Environ(), "GOOS="+target[0], "GOARCH="+target[1], "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("GOOS=%s GOARCH=%s go build ./cmd/ferry: %v\n%s", target[0], target[1], err, out)
		}
	}
}
