package producer

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkCompressVsZstdCLI runs the producer's pipeline (read, compress
// independent frames on all cores, spool) and the stock `zstd -3 -T2` on the
// same file in the same run, and reports both speeds, their quotient and both
// ratios. FERRY_BENCH_FILE names the file; by default a 200 MB seed-like CSV
// is generated.
func BenchmarkCompressVsZstdCLI(b *testing.B) {
	zstdCLI, err := exec.LookPath("zstd")
	if err != nil {
		b.Skip("zstd CLI not on PATH")
	}
	src := os.Getenv("FERRY_BENCH_FILE")
	if src == "" {
		src = filepath.Join(b.TempDir(), "medium_upload.csv")
		genFile(b, src, 200_000_000)
	}
	st, err := os.Stat(src)
	if err != nil {
		b.Fatal(err)
	}
	size := st.Size()
	dir := b.TempDir()
	var ferryNS, cliNS, ferryWire, cliWire int64
	// No b.SetBytes: each iteration runs both ferry and the CLI, so the
	// MB/s it would print divides by their time together. The metrics
	// below are each one's own.
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		spool := filepath.Join(dir, "spool")
		p := New(Options{Store: nopStore{}, Chunks: nopPublisher{}, Events: nopPublisher{}, SpoolDir: spool})
		t0 := time.Now()
		man, err := p.Submit(context.Background(), Request{Sources: []string{src}, Destination: "gs://bench/x", ChunkSize: 32 << 20})
		if err != nil {
			b.Fatal(err)
		}
		ferryNS += time.Since(t0).Nanoseconds()
		ferryWire = man.Files[0].WireSize
		if err := os.RemoveAll(spool); err != nil {
			b.Fatal(err)
		}

		out := filepath.Join(dir, "cli.zst")
		t0 = time.Now()
		if msg, err := exec.Command(zstdCLI, "-3", "-T2", "-q", "-f", "-o", out, src).CombinedOutput(); err != nil {
			b.Fatalf("zstd: %v: %s", err, msg)
		}
		cliNS += time.Since(t0).Nanoseconds()
		fi, err := os.Stat(out)
		if err != nil {
			b.Fatal(err)
		}
		cliWire = fi.Size()
	}
	b.StopTimer()
	n := float64(b.N)
	ferryMBps := float64(size) / 1e6 / (float64(ferryNS) / n / 1e9)
	cliMBps := float64(size) / 1e6 / (float64(cliNS) / n / 1e9)
	b.ReportMetric(ferryMBps, "ferry-MB/s")
	b.ReportMetric(cliMBps, "zstd-T2-MB/s")
	b.ReportMetric(ferryMBps/cliMBps, "speed-vs-zstd")
	b.ReportMetric(float64(size)/float64(ferryWire), "ferry-ratio")
	b.ReportMetric(float64(size)/float64(cliWire), "zstd-ratio")
}
