package queue_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/queue"
	"github.com/ferry-dev/ferry/internal/queue/queuetest"
)

// The benchmarks measure messages per second through the emulators this
// machine runs; they assert nothing. Run them with a fixed count, e.g.
//
//	go test -run '^$' -bench . -benchtime 5000x ./internal/queue/
//
// pstest's streaming pull hands out about 70 messages a second whatever the
// client does; give BenchmarkReceive/pstest/streaming a smaller count.

// benchClient dials the emulator of kind through PUBSUB_EMULATOR_HOST, as
// the binaries do, or skips.
func benchClient(b *testing.B, kind string) *queue.Client {
	emu := emulators[kind]
	if emu == nil {
		b.Skipf("no %s emulator: %v", kind, javaErr)
	}
	b.Setenv("PUBSUB_EMULATOR_HOST", emu.Host)
	c, err := queue.Dial(context.Background(), "ferry-bench", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	return c
}

var benchSeq atomic.Int64

// benchTopic creates a topic with one subscription.
func benchTopic(b *testing.B, c *queue.Client) (topic, sub string) {
	ctx := context.Background()
	n := benchSeq.Add(1)
	topic, sub = fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), n), fmt.Sprintf("bench-%d-%d-s", time.Now().UnixNano(), n)
	if err := c.EnsureTopic(ctx, topic); err != nil {
		b.Fatal(err)
	}
	if err := c.EnsureSubscription(ctx, queue.Subscription{ID: sub, Topic: topic, AckDeadline: 60 * time.Second}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.DeleteSubscription(ctx, sub); _ = c.DeleteTopic(ctx, topic) })
	return topic, sub
}

// publishN publishes n small messages from concurrency goroutines and
// returns how long it took.
func publishN(b *testing.B, p *queue.Publisher, n, concurrency int) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				if err := p.Publish(context.Background(), fmt.Appendf(nil, "message %d", i), nil); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}

// BenchmarkReceive: b.N messages, published beforehand, received and acked
// by a handler that does nothing, so that the intake itself is measured.
func BenchmarkReceive(b *testing.B) {
	for _, kind := range []string{queuetest.Java, queuetest.Pstest} {
		for _, mode := range []queue.ReceiveMode{queue.ModeUnary, queue.ModeStreaming} {
			for _, max := range []int{16, 100} {
				b.Run(fmt.Sprintf("%s/%s/max%d", kind, mode, max), func(b *testing.B) {
					c := benchClient(b, kind)
					topic, sub := benchTopic(b, c)
					publishN(b, c.Publisher(topic), b.N, 256)
					var got atomic.Int64
					var once sync.Once
					all := make(chan struct{})
					ctx, cancel := context.WithCancel(context.Background())
					done := make(chan error, 1)
					b.ResetTimer()
					go func() {
						done <- c.Receive(ctx, sub, queue.ReceiveSettings{MaxMessages: max, Mode: mode}, func(context.Context, queue.Message) error {
							if got.Add(1) >= int64(b.N) {
								once.Do(func() { close(all) })
							}
							return nil
						})
					}()
					select {
					case <-all:
					case <-time.After(10 * time.Minute):
						b.Fatalf("received %d of %d messages in 10 minutes", got.Load(), b.N)
					}
					b.StopTimer()
					cancel()
					if err := <-done; err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
				})
			}
		}
	}
}

// BenchmarkPublish: b.N small messages published by 1, 16 or 256
// goroutines at once, each waiting for its message to be stored, with the
// publisher's batching delay at 1 ms (ferry's setting before), 5 ms (now) and
// 10 ms (the client library's default).
func BenchmarkPublish(b *testing.B) {
	saved := queue.PublishSettings
	b.Cleanup(func() { queue.PublishSettings = saved })
	for _, kind := range []string{queuetest.Java, queuetest.Pstest} {
		for _, delay := range []time.Duration{time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond} {
			for _, concurrency := range []int{1, 16, 256} {
				b.Run(fmt.Sprintf("%s/delay%v/publishers%d", kind, delay, concurrency), func(b *testing.B) {
					queue.PublishSettings.DelayThreshold = delay
					c := benchClient(b, kind)
					topic, _ := benchTopic(b, c)
					p := c.Publisher(topic)
					b.ResetTimer()
					publishN(b, p, b.N, concurrency)
					b.StopTimer()
					b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
				})
			}
		}
	}
}
