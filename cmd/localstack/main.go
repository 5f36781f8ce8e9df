// Command localstack runs ferry's embedded default on one machine: the Pub/Sub
// emulator and fake-gcs-server on loopback, with ferry's topics,
// subscriptions, dead-letter topics and bucket. It exists so that `make run`
// and a developer need no cloud project; it prints the environment the other
// binaries need and runs until interrupted.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/sethvargo/go-envconfig"

	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/localstack"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/queue"
)

func main() {
	fs := flag.NewFlagSet("localstack", flag.ExitOnError)
	kind := fs.String("pubsub", "", "Pub/Sub emulator: java (gcloud's pubsub-emulator), pstest (in-process), or empty for java with pstest as fallback")
	dir := fs.String("dir", "", "directory for the emulator's data and log (default: a temporary one)")
	gcsPort := fs.Uint("gcs-port", 0, "loopback port of fake-gcs-server (0: any free port)")
	buckets := fs.String("buckets", "ferry-local", "comma-separated buckets to create")
	envFile := fs.String("env-file", "", "also write the environment to this file, as export lines")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `localstack — the Pub/Sub emulator and fake-gcs-server for ferry, on loopback.

Usage: localstack [flags]

Prints export lines for PUBSUB_EMULATOR_HOST, STORAGE_EMULATOR_HOST and
FERRY_PROJECT, then runs until interrupted. Topic and subscription names come
from the same FERRY_* variables the binaries read.

Flags:
`)
		fs.PrintDefaults()
	}
	_ = fs.Parse(os.Args[1:])
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *kind, *dir, uint16(*gcsPort), strings.Split(*buckets, ","), *envFile); err != nil {
		fmt.Fprintf(os.Stderr, "localstack: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kind, dir string, gcsPort uint16, buckets []string, envFile string) error {
	var ps config.PubSub
	if err := envconfig.ProcessWith(ctx, &envconfig.Config{Target: &ps, Lookuper: envconfig.OsLookuper()}); err != nil {
		return err
	}
	if err := ps.Validate(); err != nil {
		return err
	}
	log := logging.New(os.Stderr, "info", "auto")
	emu, err := localstack.StartPubSub(ctx, localstack.PubSubOptions{Kind: kind, Dir: dir, Log: log})
	if err != nil {
		return err
	}
	defer emu.Stop()
	gcs, err := localstack.StartGCS(gcsPort)
	if err != nil {
		return err
	}
	defer gcs.Stop()
	for _, b := range buckets {
		if b = strings.TrimSpace(b); b != "" {
			gcs.CreateBucket(b)
		}
	}
	os.Setenv("PUBSUB_EMULATOR_HOST", emu.Host)
	q, err := queue.Dial(ctx, ps.Project, log)
	if err != nil {
		return err
	}
	err = localstack.Provision(ctx, q, ps)
	q.Close()
	if err != nil {
		return err
	}
	env := fmt.Sprintf("export PUBSUB_EMULATOR_HOST=%s\nexport STORAGE_EMULATOR_HOST=%s\nexport FERRY_PROJECT=%s\n", emu.Host, gcs.Host, ps.Project)
	fmt.Print(env)
	if envFile != "" {
		if err := os.WriteFile(envFile, []byte(env), 0o644); err != nil {
			return err
		}
	}
	log.Info("local stack ready", "pubsub", emu.Host, "pubsub_kind", emu.Kind, "gcs", gcs.Host, "buckets", buckets)
	<-ctx.Done()
	log.Info("local stack stopping")
	return nil
}
