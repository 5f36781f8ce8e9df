// Package spool is the spool writer (FERRY_TRANSPORT=spool): a payload too
// large for its message goes to a file in the spool directory, which the
// workers read and remove once its objects are stored. The spool is bounded:
// one producer keeps at most FERRY_SPOOL_MAX bytes there at once, and waits
// while it is full.
//
// It counts what it wrote itself and checks which of those files the workers
// have removed, rather than polling the directory's usage: the directory may
// be shared with other producers (and, on a shared file system, hold anything
// else), which would make a usage figure stall this producer for bytes that
// are not its own; and stat calls on the files it wrote work the same on
// every file system, where free-space figures of network file systems do not.
// A file larger than the bound alone is written once the spool is empty.
package spool

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// FS is where spool files go: the spool directory, or in tests a stand-in
// that fails as a full disk does. Its methods are safe for concurrent use.
type FS interface {
	// Prepare makes the spool ready to be written (creates the directory).
	Prepare() error
	// WriteFile writes segs, in order, as the file name, under a
	// temporary name renamed into place, so a worker never reads a torn
	// file; on error nothing is left behind.
	WriteFile(name string, segs [][]byte) error
	// Exists reports whether name is still there.
	Exists(name string) (bool, error)
	// Remove removes name; a missing file is not an error.
	Remove(name string) error
	// Names lists the files whose names start with prefix.
	Names(prefix string) ([]string, error)
}

var _ FS = Dir{}

// Dir is a spool directory on a local or shared file system.
type Dir struct{ Path string }

// Prepare creates the directory and removes temporary files older than
// orphanAge: a write takes seconds, so such a file was left by a producer
// killed mid-write whose transfer was never resubmitted (a resubmission
// removes its own at once, removeTemps), and no worker will ever be sent it.
func (d Dir) Prepare() error {
	if err := os.MkdirAll(d.Path, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(d.Path)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !strings.Contains(e.Name(), Temp) {
			continue
		}
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() && time.Since(fi.ModTime()) > orphanAge {
			_ = os.Remove(filepath.Join(d.Path, e.Name()))
		}
	}
	return nil
}

// orphanAge is how old a temporary spool file must be to be an orphan.
const orphanAge = time.Hour

func (d Dir) WriteFile(name string, segs [][]byte) error {
	fh, err := os.CreateTemp(d.Path, name+Temp+"*")
	if err != nil {
		return err
	}
	for _, s := range segs { // one write per frame
		if _, err := fh.Write(s); err != nil {
			fh.Close()
			os.Remove(fh.Name())
			return err
		}
	}
	if err := fh.Close(); err != nil {
		os.Remove(fh.Name())
		return err
	}
	if err := os.Rename(fh.Name(), filepath.Join(d.Path, name)); err != nil {
		os.Remove(fh.Name())
		return err
	}
	return nil
}

func (d Dir) Exists(name string) (bool, error) {
	_, err := os.Lstat(filepath.Join(d.Path, name))
	if os.IsNotExist(err) {
		return false, nil
	}
	return err == nil, err
}

func (d Dir) Remove(name string) error {
	if err := os.Remove(filepath.Join(d.Path, name)); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

func (d Dir) Names(prefix string) ([]string, error) {
	entries, err := os.ReadDir(d.Path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// Name is the spool file of chunk index of file fi (for a bundle, its
// first file): one path element, starting with the transfer id, as
// message.DecodeChunk requires.
func Name(tid string, fi, index int) string { return fmt.Sprintf("%s-%06d-%05d", tid, fi, index) }

// Spool writes spool files within a bound of bytes.
type Spool struct {
	fs  FS
	max int64
	log *slog.Logger

	mu     sync.Mutex
	used   int64     // bytes reserved or written and not yet seen removed
	files  []spooled // written, oldest first
	looked time.Time // when backlog last looked for removed files
}

type spooled struct {
	name string
	size int64
}

// spoolPoll bounds how long a full spool waits before it looks again.
const spoolPoll = 500 * time.Millisecond

// New returns a spool that writes to fs and holds at most max bytes there
// at once; it logs a wait for room to log (none if nil).
func New(fs FS, max int64, log *slog.Logger) *Spool {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Spool{fs: fs, max: max, log: log}
}

// Write waits for room for size bytes, then writes segs as name. waited
// says whether it had to wait: the workers are behind.
func (s *Spool) Write(ctx context.Context, name string, segs [][]byte, size int64) (waited bool, err error) {
	if waited, err = s.reserve(ctx, size); err != nil {
		return waited, err
	}
	if err := s.fs.WriteFile(name, segs); err != nil {
		s.mu.Lock()
		s.used -= size
		s.mu.Unlock()
		return waited, err
	}
	s.mu.Lock()
	s.files = append(s.files, spooled{name, size})
	s.mu.Unlock()
	return waited, nil
}

// reserve waits until size more bytes fit the bound (or the spool holds
// nothing of this producer's) and counts them; waited says whether it
// waited.
func (s *Spool) reserve(ctx context.Context, size int64) (waited bool, err error) {
	wait, logged := 5*time.Millisecond, false
	for ; ; waited = true {
		s.mu.Lock()
		if s.used > 0 && s.used+size > s.max {
			s.reclaimLocked()
		}
		if s.used == 0 || s.used+size <= s.max {
			s.used += size
			s.mu.Unlock()
			return waited, nil
		}
		used := s.used
		s.mu.Unlock()
		if !logged {
			s.log.Info("spool full; waiting for workers to take chunks", "bytes", used, "spool_max", s.max)
			logged = true
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return waited, ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, spoolPoll)
	}
}

// reclaimLocked forgets the files workers have removed.
func (s *Spool) reclaimLocked() { s.reclaimOldestLocked(len(s.files)) }

// reclaimOldestLocked forgets the files workers have removed, looking at
// the oldest files only until it has found present of them still there:
// workers take files about in the order they were written, so the oldest
// say most, and on a network file system a stat per file of a full spool
// would hold the lock for long.
func (s *Spool) reclaimOldestLocked(present int) {
	kept := s.files[:0]
	for i, f := range s.files {
		if present <= 0 {
			kept = append(kept, s.files[i:]...)
			break
		}
		if ok, err := s.fs.Exists(f.name); err == nil && !ok {
			s.used -= f.size
			continue
		}
		present--
		kept = append(kept, f)
	}
	s.files = kept
}

// Backlog reports the bytes of spool files the workers have not removed
// yet, looking for removed files at most every backlogLook, and among the
// oldest only (backlogPresent of them still there end the look).
func (s *Spool) Backlog() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now := time.Now(); now.Sub(s.looked) >= backlogLook {
		s.reclaimOldestLocked(backlogPresent)
		s.looked = now
	}
	return s.used
}

// How often, and how far, backlog looks at the spool files.
const (
	backlogLook    = 10 * time.Millisecond
	backlogPresent = 16
)

// Usage reports the bytes counted against the bound.
func (s *Spool) Usage() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}

// Holds reports whether files of transfer tid are in the spool.
func (s *Spool) Holds(tid string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.files {
		if strings.HasPrefix(f.name, tid+"-") {
			return true
		}
	}
	return false
}

// RemoveTransfer removes every spool file of transfer tid, ours or left by an
// earlier run of the same transfer.
func (s *Spool) RemoveTransfer(tid string) {
	prefix := tid + "-"
	s.mu.Lock()
	kept := s.files[:0]
	for _, f := range s.files {
		if strings.HasPrefix(f.name, prefix) {
			_ = s.fs.Remove(f.name)
			s.used -= f.size
			continue
		}
		kept = append(kept, f)
	}
	s.files = kept
	s.mu.Unlock()
	names, _ := s.fs.Names(prefix)
	for _, n := range names {
		_ = s.fs.Remove(n)
	}
}

// Temp marks the temporary name a spool file has until it is renamed
// into place (Dir.WriteFile).
const Temp = ".tmp-"

// RemoveTemps removes the temporary files of transfer tid that an earlier
// run of the same transfer left behind when it was killed mid-write. Once
// this run has sealed the transfer it writes no more, so any such file is
// an orphan no worker will ever be sent.
func (s *Spool) RemoveTemps(tid string) {
	names, _ := s.fs.Names(tid + "-")
	for _, n := range names {
		if strings.Contains(n, Temp) {
			_ = s.fs.Remove(n)
		}
	}
}
