package restore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ferry-dev/ferry/internal/table"
)

// StageDir is where restore --to csv restores to inside its destination
// before it writes the CSV files: an interrupted run resumes there.
const StageDir = ".ferry-to-csv"

// CSVSummary is what ToCSV wrote.
type CSVSummary struct {
	Files int64 `json:"csv_files"` // delimited files written from Parquet parts
	Rows  int64 `json:"csv_rows"`
	Moved int64 `json:"moved"` // other files, moved as they were restored
}

// ToCSV turns what a restore into stage holds into dest: each directory of
// Parquet parts (part-00000.parquet, part-00001.parquet, … as producer
// submit --convert parquet names them) becomes the delimited file of the
// directory's name (tab-separated for .tsv) with the parts' rows in order,
// its mode and mtime those the parts were restored with; every other file
// moves as it is. An output that exists with other bytes is an error
// unless overwrite. stage is removed once everything is in dest.
func ToCSV(ctx context.Context, stage, dest string, overwrite bool) (CSVSummary, error) {
	var sum CSVSummary
	err := filepath.WalkDir(stage, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == stage {
			return err
		}
		rel, err := filepath.Rel(stage, p)
		if err != nil {
			return err
		}
		out := filepath.Join(dest, rel)
		if d.IsDir() {
			parts, err := partsOf(p)
			if err != nil || parts == nil {
				return err
			}
			rows, err := writeCSV(ctx, parts, out, overwrite)
			if err != nil {
				return err
			}
			sum.Files++
			sum.Rows += rows
			return filepath.SkipDir
		}
		if err := move(p, out, overwrite); err != nil {
			return err
		}
		sum.Moved++
		return nil
	})
	if err != nil {
		return sum, err
	}
	return sum, os.RemoveAll(stage)
}

// partsOf lists the Parquet parts of dir in order, nil when dir holds
// anything else or they do not run from part-00000 without a gap.
func partsOf(dir string) ([]string, error) {
	es, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var parts []string
	for i, e := range es {
		if !e.Type().IsRegular() || e.Name() != fmt.Sprintf("part-%05d.parquet", i) {
			return nil, nil
		}
		parts = append(parts, filepath.Join(dir, e.Name()))
	}
	return parts, nil
}

// writeCSV writes the rows of parts to out, through a temporary file beside
// it.
func writeCSV(ctx context.Context, parts []string, out string, overwrite bool) (int64, error) {
	st, err := os.Stat(parts[0])
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return 0, err
	}
	tmp := filepath.Join(filepath.Dir(out), "."+filepath.Base(out)+".ferry-csv")
	fh, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, st.Mode().Perm())
	if err != nil {
		return 0, err
	}
	defer func() { _ = os.Remove(tmp) }()
	w := table.NewCSVWriter(fh, table.Comma(out))
	for _, p := range parts {
		if err := w.Part(ctx, p); err != nil {
			_ = fh.Close()
			return 0, err
		}
	}
	err = errors.Join(w.Flush(), fh.Sync(), fh.Close())
	if err == nil {
		err = place(tmp, out, overwrite)
	}
	if err == nil {
		err = os.Chtimes(out, st.ModTime(), st.ModTime())
	}
	return w.Rows, err
}

// move puts the restored file p at out.
func move(p, out string, overwrite bool) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	return place(p, out, overwrite)
}

// place renames from to to, unless to exists with other bytes and
// overwrite is not set; one with the same bytes is left as it is.
func place(from, to string, overwrite bool) error {
	if _, err := os.Lstat(to); err == nil && !overwrite {
		same, err := sameBytes(from, to)
		if err != nil {
			return err
		}
		if !same {
			return fmt.Errorf("%s exists with other bytes; --overwrite replaces it", to)
		}
		return os.Remove(from)
	}
	return os.Rename(from, to)
}

// sameBytes compares two files a megabyte at a time.
func sameBytes(a, b string) (bool, error) {
	fa, err := os.Open(a)
	if err != nil {
		return false, err
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		return false, err
	}
	defer fb.Close()
	x, y := make([]byte, 1<<20), make([]byte, 1<<20)
	for {
		n, errA := io.ReadFull(fa, x)
		m, errB := io.ReadFull(fb, y)
		if n != m || !bytes.Equal(x[:n], y[:m]) {
			return false, nil
		}
		endA, endB := errA == io.EOF || errA == io.ErrUnexpectedEOF, errB == io.EOF || errB == io.ErrUnexpectedEOF
		switch {
		case endA && endB:
			return true, nil
		case endA != endB:
			return false, nil
		case errA != nil:
			return false, errA
		case errB != nil:
			return false, errB
		}
	}
}

// CheckToCSV refuses --to values other than csv, and a destination inside
// the stage.
func CheckToCSV(to string) error {
	if to != "" && to != "csv" {
		return usageError{fmt.Errorf("--to %.32q: want csv", to)}
	}
	return nil
}
