package table_test

import (
	"bytes"
	"sync"
	"testing"

	"github.com/ferry-dev/ferry/internal/bench/datagen"
	"github.com/ferry-dev/ferry/internal/table"
)

// BenchmarkConvert converts one 32 MiB part of seed-like CSV (the default
// chunk) to Parquet: MB/s per core of the conversion alone.
func BenchmarkConvert(b *testing.B) {
	data := seedCSV(b)
	l, err := table.Cut(bytes.NewReader(data), "b.csv", int64(len(data)), ',')
	if err != nil {
		b.Fatal(err)
	}
	src, err := table.Scan(bytes.NewReader(data), int64(len(data)), "b.csv", int64(len(data)), table.ScanOptions{Comma: ','})
	if err != nil {
		b.Fatal(err)
	}
	c, err := table.NewConverter(src.Schema, table.Options{})
	if err != nil {
		b.Fatal(err)
	}
	p := l.Parts[0]
	part := data[p.Offset : p.Offset+p.Size]
	b.SetBytes(int64(len(part)))
	b.ResetTimer()
	var out int
	for range b.N {
		pq, _, err := c.Convert(part, "b.csv", p.Line)
		if err != nil {
			b.Fatal(err)
		}
		out = len(pq)
	}
	b.ReportMetric(float64(len(part))/float64(out), "csv/parquet")
}

// seedCSV is 32 MiB of seed-like CSV, made once per run: the benchmark
// function runs several times, and its profile should show the conversion,
// not the data's generation.
func seedCSV(b *testing.B) []byte {
	seedOnce.Do(func() {
		var buf bytes.Buffer
		if _, err := datagen.WriteCSV(&buf, 32<<20, 3); err != nil {
			seedErr = err
		}
		seed = buf.Bytes()
	})
	if seedErr != nil {
		b.Fatal(seedErr)
	}
	return seed
}

var (
	seedOnce sync.Once
	seed     []byte
	seedErr  error
)

// BenchmarkCut scans 32 MiB of seed-like CSV for record boundaries.
func BenchmarkCut(b *testing.B) {
	data := seedCSV(b)
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for range b.N {
		if _, err := table.Cut(bytes.NewReader(data), "b.csv", 8<<20, ','); err != nil {
			b.Fatal(err)
		}
	}
}
