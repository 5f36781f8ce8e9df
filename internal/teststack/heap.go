package teststack

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// HeapGrowth runs fn while it samples the heap every 5 ms, and returns how
// far the heap in use grew above where it was before fn (after a GC): a
// peak, not a total, so that memory tests see what bounds a process.
func HeapGrowth(fn func()) int64 {
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
		}
	}()
	fn()
	close(stop)
	wg.Wait()
	return int64(peak.Load()) - int64(base.HeapInuse)
}
