package e2e

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/setup"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
	"github.com/ferry-dev/ferry/internal/worker"
)

// Issue 31 §1: each process's memory is its budget plus a stated overhead
// (setup.MemoryOverhead), on a mixed tree through the whole stack, every
// process a real binary: many small files, files of 10–30 MB, one larger
// than the producer's budget, and incompressible ones. Each process's peak
// RSS (the kernel's, from its rusage) must stay within budget + overhead.
func TestEachProcessStaysWithinItsBudgetOnAMixedTree(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: about 150 MB through the stack")
	}
	const (
		producerBudget = 32 << 20
		workerBytes    = 16 << 20 // FERRY_WORKER_MAX_OUTSTANDING_BYTES
		workerConc     = 8
		mergerBudget   = 32 << 20
	)
	s := newStack(t, stackOptions{noMerger: true})
	dir := filepath.Join(t.TempDir(), "mixed")
	for i := range 1500 {
		body := make([]byte, 100+(i*397)%4000)
		for j := range body {
			body[j] = "abcdefgh,0123456789\n"[(i+j)%20]
		}
		p := filepath.Join(dir, "small", fmt.Sprintf("d%02d", i/100), fmt.Sprintf("f%04d.txt", i))
		testutil.OK(t, os.MkdirAll(filepath.Dir(p), 0o755))
		testutil.OK(t, os.WriteFile(p, body, 0o644))
	}
	for i, mb := range []int64{12, 20, 30, 60} { // the last is larger than the producer's budget
		testutil.WriteCSV(t, filepath.Join(dir, "csv", fmt.Sprintf("c%d.csv", i)), mb<<20, int64(90+i))
	}
	for i := range 2 {
		b := make([]byte, 8<<20)
		_, _ = rand.Read(b)
		testutil.OK(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("random-%d.bin", i)), b, 0o644))
	}

	env := s.env("FERRY_BUCKETS="+s.bucket, fmt.Sprintf("FERRY_PRODUCER_MEMORY=%d", producerBudget),
		fmt.Sprintf("FERRY_WORKER_MAX_OUTSTANDING_BYTES=%d", workerBytes), fmt.Sprintf("FERRY_WORKER_CONCURRENCY=%d", workerConc),
		fmt.Sprintf("FERRY_MERGER_MEMORY=%d", mergerBudget), "FERRY_LOG_LEVEL=warn")
	workers := []*proc{s.start("worker-1", "worker", append(env, "FERRY_WORKER_ID=wb1")), s.start("worker-2", "worker", append(env, "FERRY_WORKER_ID=wb2"))}
	merger := s.start("merger", "merger", env)
	prod := s.start("producer", "producer", env, "submit", "--wait", "--chunk-size", "8MiB", dir, "gs://"+s.bucket+"/mixed")
	peaks := map[*proc]func() int64{}
	for _, p := range append([]*proc{prod, merger}, workers...) {
		peaks[p] = watchPeakRSS(p)
	}
	if code := prod.wait(5 * time.Minute); code != 0 {
		t.Fatalf("producer submit: exit %d\n%s", code, tail(prod.out.String(), 4000))
	}
	id := transferIDIn(prod.out.String())
	teststack.Until(t, time.Minute, "the done marker", func() bool {
		_, err := s.store.Attrs(t.Context(), s.bucket, message.DoneMarker(id))
		return err == nil
	})
	if r := s.row(id); r.Status != message.StatusOK || r.Files != 1500+4+2 {
		t.Fatalf("row %+v, want ok with %d files", r, 1506)
	}
	for _, p := range append(workers, merger) {
		testutil.OK(t, p.cmd.Process.Signal(syscall.SIGTERM))
		if code := p.wait(time.Minute); code != 0 {
			t.Errorf("%s exited %d on SIGTERM", p.name, code)
		}
	}
	peak := func(p *proc) int64 { return peaks[p]() }
	check := func(name string, got, budget int64) {
		limit := budget + setup.MemoryOverhead
		t.Logf("%s: peak RSS %d MiB, budget %d MiB + overhead %d MiB = %d MiB", name, got>>20, budget>>20, setup.MemoryOverhead>>20, limit>>20)
		if got > limit {
			t.Errorf("%s peaked at %d MiB RSS, over its budget %d MiB + the stated overhead %d MiB", name, got>>20, budget>>20, setup.MemoryOverhead>>20)
		}
	}
	check("producer", peak(prod), producerBudget)
	for _, w := range workers {
		check(w.name, peak(w), worker.Budget(workerBytes, workerConc<<20)) // FERRY_WORKER_REQUEST_MEMORY's default
	}
	check("merger", peak(merger), mergerBudget)
}

// transferIDIn is the first line of out that is a transfer id (producer
// submit prints it first on stdout; its stderr may be interleaved).
func transferIDIn(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); message.ValidTransferID(l) {
			return l
		}
	}
	return ""
}

// Issue 29: a producer converting a CSV larger than its budget to Parquet
// stays within budget + overhead, as the zstd path does (the conversion
// makes garbage at several times its input rate).
func TestAConvertingProducerStaysWithinItsBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 60 MB converted")
	}
	const producerBudget = 64 << 20
	s := newStack(t, stackOptions{workers: 2, noMerger: false})
	dir := filepath.Join(t.TempDir(), "table")
	testutil.WriteCSV(t, filepath.Join(dir, "prices.csv"), 60<<20, 77)
	env := s.env("FERRY_BUCKETS="+s.bucket, fmt.Sprintf("FERRY_PRODUCER_MEMORY=%d", producerBudget), "FERRY_LOG_LEVEL=warn")
	prod := s.start("producer", "producer", env, "submit", "--wait", "--convert", "parquet", "--chunk-size", "8MiB", dir, "gs://"+s.bucket+"/table")
	peak := watchPeakRSS(prod)
	if code := prod.wait(5 * time.Minute); code != 0 {
		t.Fatalf("producer submit --convert parquet: exit %d\n%s", code, tail(prod.out.String(), 4000))
	}
	got, limit := peak(), int64(producerBudget+setup.MemoryOverhead)
	t.Logf("converting producer: peak RSS %d MiB, budget %d MiB + overhead %d MiB = %d MiB", got>>20, producerBudget>>20, setup.MemoryOverhead>>20, limit>>20)
	if got > limit {
		t.Errorf("converting producer peaked at %d MiB RSS, over its budget %d MiB + the stated overhead %d MiB", got>>20, producerBudget>>20, setup.MemoryOverhead>>20)
	}
	if n := len(s.objects("table/")); n < 8 {
		t.Fatalf("%d Parquet parts of a 60 MB CSV in 8 MiB parts", n)
	}
}

// watchPeakRSS follows p's peak RSS, the kernel's VmHWM of its own program,
// until it exits, and returns what reads it. Not the rusage's maxrss: the
// kernel starts that from the parent's peak when the child execs (the test
// binary's, 176 MiB once it had converted tables in-process, was reported as
// every child's). VmHWM only grows, so the last reading before the exit
// holds the peak; what a process adds in its last 20 ms is not seen.
func watchPeakRSS(p *proc) func() int64 {
	var mu sync.Mutex
	var peak int64
	read := func() {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
		if err != nil {
			return
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				if err == nil {
					mu.Lock()
					peak = max(peak, kb<<10)
					mu.Unlock()
				}
			}
		}
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			read()
			select {
			case <-p.done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() int64 {
		<-stopped
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}
