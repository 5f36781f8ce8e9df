package teststack

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// HeapGrowth runs fn while it samples the heap every 5 ms, and returns how
// far the heap in use grew above where it was before fn (after a GC): a
// peak, not a total, so that memory tests see what bounds a process.
func HeapGrowth(fn func()) int64 {
	return growth(fn, func() uint64 {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse
	})
}

// LiveGrowth runs fn and returns how far the live heap, as each garbage
// collection during fn marked it, grew above the live heap before fn: what
// fn holds at its peak, without the garbage a collector lets pile up in
// proportion to everything else the test process holds (HeapGrowth counts
// that too). It samples every 5 ms, with the collector set to run after
// every 5 % of growth, so that many collections see fn's peak.
func LiveGrowth(fn func()) int64 {
	defer debug.SetGCPercent(debug.SetGCPercent(5))
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	return growth(fn, func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	})
}

// growth runs fn while it reads a measure every 5 ms, and returns the
// measure's peak during fn less its value before fn (after a GC).
func growth(fn func(), read func() uint64) int64 {
	runtime.GC()
	base := read()
	var mu sync.Mutex
	peak := base
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			v := read()
			mu.Lock()
			peak = max(peak, v)
			mu.Unlock()
		}
	}()
	fn()
	close(stop)
	wg.Wait()
	return int64(peak) - int64(base)
}
