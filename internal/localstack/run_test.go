package localstack_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/localstack"
	"github.com/ferry-dev/ferry/internal/queue"
	"github.com/ferry-dev/ferry/internal/teststack"
)

// bin/localstack's run: the environment on stdout and in --env-file once
// the stack serves, topics provisioned on the emulator it names, and
// nothing left when its context ends.
func TestRunServesWritesItsEnvironmentAndCleansUp(t *testing.T) {
	var cfg config.LocalStack
	if err := config.FromEnvironment(context.Background(), &cfg); err != nil {
		t.Fatal(err)
	}
	envFile := filepath.Join(t.TempDir(), "stack.env")
	if err := os.WriteFile(envFile, []byte("export STALE=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout teststack.SyncBuffer
	done := make(chan error, 1)
	go func() {
		done <- localstack.Run(ctx, localstack.RunOptions{PubSub: cfg.PubSub, Kind: "pstest", Buckets: []string{"ls-run"}, EnvFile: envFile}, &stdout)
	}()
	var env string
	teststack.Until(t, time.Minute, "the environment in --env-file", func() bool {
		b, err := os.ReadFile(envFile)
		env = string(b)
		return err == nil && !strings.Contains(env, "STALE")
	})
	if env != stdout.String() || !strings.Contains(env, "export FERRY_BUCKETS=ls-run\n") {
		t.Fatalf("env file %q, stdout %q", env, stdout.String())
	}
	var host string
	for _, line := range strings.Split(env, "\n") {
		if v, ok := strings.CutPrefix(line, "export PUBSUB_EMULATOR_HOST="); ok {
			host = v
		}
	}
	q, err := queue.Dial(ctx, cfg.PubSub.Project, nil, queue.WithEmulator(host))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
	defer pcancel()
	if err := q.Publisher(cfg.PubSub.ChunksTopic).Publish(pctx, []byte("probe"), nil); err != nil {
		t.Fatalf("topic %s on %s: %v", cfg.PubSub.ChunksTopic, host, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v after its context ended", err)
	}
	if _, err := os.Stat(envFile); !os.IsNotExist(err) {
		t.Fatalf("--env-file left after the stack stopped: %v", err)
	}
}
