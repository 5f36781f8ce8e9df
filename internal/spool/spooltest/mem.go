// Package spooltest holds a spool in memory for tests: it counts what the
// spool writer does and can fail writes as a full disk does.
package spooltest

import (
	"fmt"
	"strings"
	"sync"

	"github.com/ferry-dev/ferry/internal/spool"
)

// Mem is a spool.FS in memory. Set FailAt and Err before the first write.
type Mem struct {
	FailAt int   // the FailAt-th write and every later one fail (0: never)
	Err    error // what a failed write returns

	mu      sync.Mutex
	files   map[string]int
	writes  int
	looks   int // Exists calls
	peak    int // most bytes present at once
	present int
}

var _ spool.FS = (*Mem)(nil)

// NewMem returns an empty spool.
func NewMem() *Mem { return &Mem{files: map[string]int{}} }

// Prepare does nothing.
func (m *Mem) Prepare() error { return nil }

// WriteFile stores the size of segs as name, or fails from the FailAt-th write on.
func (m *Mem) WriteFile(name string, segs [][]byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.writes++
	if m.FailAt > 0 && m.writes >= m.FailAt {
		return m.Err
	}
	n := 0
	for _, s := range segs {
		n += len(s)
	}
	m.files[name] = n
	m.present += n
	m.peak = max(m.peak, m.present)
	return nil
}

// Exists reports whether name is there, and counts the look.
func (m *Mem) Exists(name string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.looks++
	_, ok := m.files[name]
	return ok, nil
}

// Remove removes name, as a worker does once it stored the chunk.
func (m *Mem) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.present -= m.files[name]
	delete(m.files, name)
	return nil
}

// Names lists the files whose names start with prefix.
func (m *Mem) Names(prefix string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for n := range m.files {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out, nil
}

// Writes is how many writes were tried.
func (m *Mem) Writes() int { m.mu.Lock(); defer m.mu.Unlock(); return m.writes }

// Looks is how many times the writer asked whether a file is still there.
func (m *Mem) Looks() int { m.mu.Lock(); defer m.mu.Unlock(); return m.looks }

// Peak is the most bytes the spool held at once.
func (m *Mem) Peak() int { m.mu.Lock(); defer m.mu.Unlock(); return m.peak }

func (m *Mem) String() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return fmt.Sprintf("%d files, %d writes", len(m.files), m.writes)
}
