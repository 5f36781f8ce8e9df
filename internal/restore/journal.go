package restore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
)

// journal records the positional ranges written to a temporary file, one
// JSON line each after its bytes are written, under a header naming the
// object generation they came from. A kill -9 can only lose the line being
// appended; the next run checks every recorded range on disk anyway.
type journal struct {
	mu sync.Mutex
	f  *os.File
}

type journalHeader struct {
	V          int    `json:"v"`
	Object     string `json:"object"`
	Generation int64  `json:"generation"`
	Size       int64  `json:"size"`
	CRC32C     uint32 `json:"crc32c"`
	RawSize    int64  `json:"raw_size"`
	RawCRC32C  uint32 `json:"raw_crc32c"`
}

type journalLine struct {
	task
	taskDone
}

// journalMax bounds how much of an old journal is read: ranges are at
// least 64 KiB, so this covers objects of several TB.
const journalMax = 64 << 20

func key(t task) [4]int64 { return [4]int64{t.WireOff, t.WireLen, t.RawOff, t.RawLen} }

// openJournal reads what an earlier run of the same object recorded beside
// tmp, and opens the journal for this run. A journal of another object, of
// another generation of it, or that cannot be read, is started afresh.
func openJournal(root *os.Root, tmp string, o object) (*journal, map[[4]int64]taskDone, error) {
	name := tmp + logSuffix
	hdr := journalHeader{V: 1, Object: o.obj, Generation: o.attrs.Generation, Size: o.attrs.Size,
		CRC32C: o.attrs.CRC32C, RawSize: o.want.size, RawCRC32C: o.want.crc}
	prior := readJournal(root, name, hdr)
	flag := os.O_WRONLY | os.O_APPEND
	if prior == nil {
		flag = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := root.OpenFile(name, flag, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: journal: %w", o.obj, err)
	}
	if prior == nil {
		line, _ := json.Marshal(hdr)
		if _, err := f.Write(append(line, '\n')); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("%s: journal: %w", o.obj, err)
		}
	}
	return &journal{f: f}, prior, nil
}

// readJournal returns the ranges recorded under hdr, or nil.
func readJournal(root *os.Root, name string, hdr journalHeader) map[[4]int64]taskDone {
	fi, err := root.Stat(name)
	if errors.Is(err, fs.ErrNotExist) || err != nil || fi.Size() > journalMax {
		return nil
	}
	b, err := root.ReadFile(name)
	if err != nil {
		return nil
	}
	lines := bytes.Split(b, []byte("\n"))
	lines = lines[:len(lines)-1] // the last is empty, or a line a kill cut short
	if len(lines) == 0 {
		return nil
	}
	var got journalHeader
	if err := strict(lines[0], &got); err != nil || got != hdr {
		return nil
	}
	prior := map[[4]int64]taskDone{}
	for _, l := range lines[1:] {
		var e journalLine
		if err := strict(l, &e); err != nil {
			return nil
		}
		prior[key(e.task)] = e.taskDone
	}
	return prior
}

func strict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// add records a task whose bytes are written. It is safe for concurrent use.
func (j *journal) add(t task, d taskDone) error {
	line, _ := json.Marshal(journalLine{t, d})
	j.mu.Lock()
	defer j.mu.Unlock()
	_, err := j.f.Write(append(line, '\n'))
	return err
}

func (j *journal) close() { j.f.Close() }
