package restore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/plan"
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

// ToCSV turns what a restore into dest's StageDir holds into dest: each
// directory of Parquet parts (part-00000.parquet, part-00001.parquet, … as
// producer submit --convert parquet names them) becomes the delimited file
// of the directory's name (tab-separated for .tsv) with the parts' rows in
// order, its mode and mtime those the parts were restored with (and the
// directory's rejects object, --bad-rows, moves beside it as
// <file>.rejects.ndjson); every other file moves as it is. Everything happens inside dest (an os.Root: a
// link in it never leads out), and an output that exists is treated as
// restore treats one (the same bytes: left; other bytes: an error unless
// overwrite; not a regular file: an error). The stage is removed once
// everything is in dest.
func ToCSV(ctx context.Context, dest string, overwrite bool) (CSVSummary, error) {
	var sum CSVSummary
	root, err := os.OpenRoot(dest)
	if err != nil {
		return sum, err
	}
	defer root.Close()
	err = fs.WalkDir(root.FS(), StageDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == StageDir {
			return err
		}
		rel := strings.TrimPrefix(p, StageDir+"/")
		switch {
		case d.IsDir():
			parts, rejects, err := partsOf(root, p)
			if err != nil || parts == nil {
				return err
			}
			rows, err := writeCSV(ctx, root, parts, rel, overwrite)
			if err != nil {
				return err
			}
			sum.Files++
			sum.Rows += rows
			if rejects {
				// The records --bad-rows left out, beside the file.
				if err := move(root, path.Join(p, message.RejectsName), rel+"."+message.RejectsName, overwrite); err != nil {
					return err
				}
				sum.Moved++
			}
			return fs.SkipDir
		case !d.Type().IsRegular():
			return fmt.Errorf("%s: restore writes regular files only, found %s", p, d.Type())
		}
		if err := move(root, p, rel, overwrite); err != nil {
			return err
		}
		sum.Moved++
		return nil
	})
	if err != nil {
		return sum, err
	}
	return sum, root.RemoveAll(StageDir)
}

// partsOf lists the Parquet parts of dir in order, nil when dir holds
// anything else or they do not run from part-00000 without a gap; rejects
// reports a rejects object (--bad-rows) after them.
func partsOf(root *os.Root, dir string) (parts []string, rejects bool, err error) {
	es, err := fs.ReadDir(root.FS(), dir)
	if err != nil {
		return nil, false, err
	}
	if n := len(es); n > 1 && es[n-1].Name() == message.RejectsName && es[n-1].Type().IsRegular() {
		es, rejects = es[:n-1], true
	}
	for i, e := range es {
		if !e.Type().IsRegular() || e.Name() != plan.PartName(i) {
			return nil, false, nil
		}
		parts = append(parts, path.Join(dir, e.Name()))
	}
	return parts, rejects, nil
}

// writeCSV writes the rows of parts to out, through a temporary file beside
// it.
func writeCSV(ctx context.Context, root *os.Root, parts []string, out string, overwrite bool) (int64, error) {
	st, err := root.Stat(parts[0])
	if err != nil {
		return 0, err
	}
	if err := root.MkdirAll(path.Dir(out), 0o755); err != nil {
		return 0, err
	}
	// A reserved name (names.Reserved): never an object's, which a
	// name of its own (.NAME.ferry-csv) was, and O_TRUNC emptied.
	tmp := tempIn(root, out)
	fh, err := root.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, st.Mode().Perm())
	if err != nil {
		return 0, err
	}
	defer func() { _ = root.Remove(tmp) }()
	h := crc32c.New()
	cw := &counter{w: io.MultiWriter(fh, h)}
	w := table.NewCSVWriter(cw, table.Comma(out))
	for _, p := range parts {
		if err := csvPart(ctx, root, w, p); err != nil {
			_ = fh.Close()
			return 0, err
		}
	}
	err = errors.Join(w.Flush(), fh.Sync(), fh.Close())
	if err == nil {
		err = place(root, tmp, out, want{size: cw.n, crc: h.Sum32()}, overwrite)
	}
	if err == nil {
		err = root.Chtimes(out, st.ModTime(), st.ModTime())
	}
	return w.Rows, err
}

func csvPart(ctx context.Context, root *os.Root, w *table.CSVWriter, p string) error {
	f, err := root.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	return w.Part(ctx, path.Join(root.Name(), p), f)
}

// counter counts the bytes written through it.
type counter struct {
	w io.Writer
	n int64
}

func (c *counter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// move puts the restored file p at out.
func move(root *os.Root, p, out string, overwrite bool) error {
	if err := root.MkdirAll(path.Dir(out), 0o755); err != nil {
		return err
	}
	var w want
	if _, err := root.Lstat(out); err == nil {
		// Something is there: compare with what would replace it.
		f, err := root.Open(p)
		if err != nil {
			return err
		}
		h := crc32c.New()
		w.size, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return err
		}
		w.crc = h.Sum32()
	}
	return place(root, p, out, w, overwrite)
}

// place renames from to to, unless to exists: with the bytes w describes it
// is left and from removed; otherwise restore's rule for an existing output
// decides.
func place(root *os.Root, from, to string, w want, overwrite bool) error {
	same, err := existing(root, to, w, overwrite)
	if err != nil {
		return err
	}
	if same {
		return root.Remove(from)
	}
	return root.Rename(from, to)
}

// CheckToCSV refuses --to values other than csv.
func CheckToCSV(to string) error {
	if to != "" && to != "csv" {
		return usageError{fmt.Errorf("--to %.32q: want csv", to)}
	}
	return nil
}
