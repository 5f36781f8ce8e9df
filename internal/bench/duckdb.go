package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/ferry-dev/ferry/internal/bench/verdict"
)

// duckdbArgv is how to run one DuckDB statement: a duckdb CLI on PATH,
// else the helper make duckdb builds into bin (tools/duckdb, a module of
// its own, so ferry's build never needs cgo). Neither: an error saying
// how to get one.
func (b *Bench) duckdbArgv(sql string) ([]string, error) {
	if p, err := exec.LookPath("duckdb"); err == nil {
		return []string{p, "-c", sql}, nil
	}
	helper := filepath.Join(b.cfg.Bin, "duckdb-sql")
	if _, err := os.Stat(helper); err == nil {
		return []string{helper, sql}, nil
	}
	return nil, errors.New("no DuckDB here: no duckdb on PATH and no " + helper + " (make duckdb builds it; it needs the Go module proxy)")
}

// duckdbMethod converts f with DuckDB, no upload: the Parquet file's
// size and the CPU it took.
func (b *Bench) duckdbMethod(f File) method {
	return method{name: verdict.DuckDBParquet, role: verdict.Ceiling, codec: "parquet",
		setting: "DuckDB: COPY (FROM read_csv('FILE')) TO 'FILE.parquet' (FORMAT parquet, COMPRESSION zstd) (no upload)",
		run: func(ctx context.Context, e *env) (verdict.Run, error) {
			out := filepath.Join(e.dir, "duckdb.parquet")
			argv, err := b.duckdbArgv(fmt.Sprintf("COPY (FROM read_csv(%s)) TO %s (FORMAT parquet, COMPRESSION zstd)", sqlString(f.Path), sqlString(out)))
			if err != nil {
				return verdict.Run{}, err
			}
			return localTool(ctx, e, "duckdb", argv, f, out)
		}}
}

// localTool runs argv, a local tool that turns f into the file out (no
// upload), and returns the run with out's size as what it stores.
func localTool(ctx context.Context, e *env, name string, argv []string, f File, out string) (verdict.Run, error) {
	r, err := measure(ctx, e, name, argv, nil)
	if err != nil {
		return r, err
	}
	st, err := os.Stat(out)
	if err != nil {
		return r, err
	}
	r.Files, r.Bytes, r.Wire, r.CompressMS = 1, f.Size, st.Size(), r.Wall.Milliseconds()
	return r, nil
}

// sqlString is s as a SQL string literal.
func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// variedDecimals writes, once, the CSV at src with each row's five prices
// (columns 6 to 10 of the seed-like CSV) cut to 2 to 6 decimals by row:
// the prices of varying decimals that real exports carry, which an exact
// type must keep at the largest scale.
func variedDecimals(src, dst string) (File, error) {
	if st, err := os.Stat(dst); err == nil {
		return File{Path: dst, Size: st.Size()}, nil
	}
	in, err := os.Open(src)
	if err != nil {
		return File{}, err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.Create(tmp)
	if err != nil {
		return File{}, err
	}
	defer os.Remove(tmp)
	w := bufio.NewWriterSize(out, 1<<20)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 0; sc.Scan(); n++ {
		line := sc.Bytes()
		if n > 0 {
			fields := bytes.Split(line, []byte{','})
			keep := 2 + n%5
			for i := 5; i < 10 && i < len(fields); i++ {
				if dot := bytes.IndexByte(fields[i], '.'); dot >= 0 && len(fields[i]) > dot+1+keep {
					fields[i] = fields[i][:dot+1+keep]
				}
			}
			line = bytes.Join(fields, []byte{','})
		}
		_, _ = w.Write(line)
		_ = w.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		out.Close()
		return File{}, fmt.Errorf("%s: %w", src, err)
	}
	if err := w.Flush(); err != nil {
		out.Close()
		return File{}, err
	}
	if err := out.Close(); err != nil {
		return File{}, err
	}
	if err := os.Rename(tmp, dst); err != nil {
		return File{}, err
	}
	st, err := os.Stat(dst)
	if err != nil {
		return File{}, err
	}
	return File{Path: dst, Size: st.Size()}, nil
}
