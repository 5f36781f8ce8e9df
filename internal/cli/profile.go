package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
)

// ProfileDirVar names a directory into which each ferry binary writes a CPU
// profile of its whole run, as NAME-PID.pprof (go tool pprof reads it).
// It is for finding where CPU goes (make bench's CPU table says how much);
// it is read by Main only, not by the services' configuration.
const ProfileDirVar = "FERRY_CPU_PROFILE_DIR"

// startProfile starts a CPU profile when ProfileDirVar is set and returns
// the function that ends and writes it; problems are reported to stderr and
// never stop the run.
func startProfile(name string, stderr io.Writer) func() {
	dir := os.Getenv(ProfileDirVar)
	if dir == "" {
		return func() {}
	}
	path := filepath.Join(dir, fmt.Sprintf("%s-%d.pprof", name, os.Getpid()))
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %s: %v; no profile\n", name, ProfileDirVar, err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		fmt.Fprintf(stderr, "%s: %s=%s: %v; no profile\n", name, ProfileDirVar, dir, err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintf(stderr, "%s: profile %s: %v\n", name, path, err)
		}
	}
}
