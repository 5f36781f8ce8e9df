package engine

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sethvargo/go-envconfig"

	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(teststack.MainWithGCS(m)) }

// A message that ran out of its deliveries on any in-process subscription
// lands in that subscription's dead-letter topic, which nothing else reads:
// the watch then says the transfer cannot end, naming the topic, so that
// ferry cp stops waiting (for FERRY_TRANSFER_TIMEOUT, six hours, before).
// One whose handler failed it for good (ferry_error set) is that
// handler's to report, and the watch leaves it.
func TestAMessageThatRanOutOfDeliveriesStopsTheLocalEngine(t *testing.T) {
	teststack.Bucket(t, "engine-dead-letters")
	var cfg config.Copy
	testutil.OK(t, config.Load(context.Background(), &cfg, envconfig.MapLookuper(map[string]string{
		"STORAGE_EMULATOR_HOST": os.Getenv("STORAGE_EMULATOR_HOST"), "FERRY_BUCKETS": "engine-dead-letters"})))
	log := logging.New(&teststack.SyncBuffer{}, "info", "text")
	pcfg := cfg.Producer()
	l, err := OpenLocal(context.Background(), LocalConfig{Copy: &cfg, Producer: pcfg, Worker: cfg.Worker(), Merger: cfg.Merger(t.TempDir()), Log: log, Version: "test"})
	testutil.OK(t, err)
	defer l.Close()
	stopped := make(chan error, 8)
	l.Start(context.Background(), "t1", func(cause error) { stopped <- cause })
	for _, dl := range deadLetters(pcfg.PubSub) {
		pub := l.Clients.Queue.Publisher(dl)
		testutil.OK(t, pub.Publish(context.Background(), []byte(`{"v":1}`), map[string]string{"ferry_error": "decode: refused for good"}))
		testutil.OK(t, pub.Publish(context.Background(), []byte(`{"v":1}`), nil))
		select {
		case cause := <-stopped:
			if !strings.Contains(cause.Error(), "ran out of its") || !strings.Contains(cause.Error(), "dead-letter topic "+dl) {
				t.Fatalf("the watch of %s said %q", dl, cause)
			}
		case <-time.After(30 * time.Second): // a guard, not a measure: it comes at once
			t.Fatalf("a message in %s stopped nothing", dl)
		}
	}
	select {
	case cause := <-stopped:
		t.Fatalf("a message its handler refused for good stopped the engine: %v", cause)
	default:
	}
}
