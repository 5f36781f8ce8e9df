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
	"path/filepath"
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
	kind := fs.String("pubsub", "", "Pub/Sub emulator: java (gcloud's pubsub-emulator), pstest (in-process), none (storage only), or empty for java with pstest as fallback")
	dir := fs.String("dir", "", "directory for the emulator's data and log (default: a temporary one)")
	gcsPort := fs.Uint("gcs-port", 0, "loopback port of fake-gcs-server (0: any free port)")
	buckets := fs.String("buckets", "ferry-local", "comma-separated buckets to create")
	envFile := fs.String("env-file", "", "also write the environment to this file, as export lines")
	gcsTLS := fs.Bool("gcs-tls", false, "also serve fake-gcs-server over HTTPS with a self-signed certificate (written to DIR/gcs-cert.pem): LOCALSTACK_GCS_TLS_HOST, LOCALSTACK_GCS_CERT")
	compose := fs.String("compose", "fast", "compose: fast (the shim's: one copy, CRC32C combined) or fake (fake-gcs-server's own)")
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
	if *compose != "fast" && *compose != "fake" {
		fmt.Fprintf(os.Stderr, "localstack: --compose %q: want fast or fake\n", *compose)
		os.Exit(2)
	}
	gcsOpts := localstack.GCSOptions{Port: uint16(*gcsPort), TLS: *gcsTLS, StockCompose: *compose == "fake"}
	if err := run(ctx, *kind, *dir, gcsOpts, strings.Split(*buckets, ","), *envFile); err != nil {
		fmt.Fprintf(os.Stderr, "localstack: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kind, dir string, gcsOpts localstack.GCSOptions, buckets []string, envFile string) error {
	var ps config.PubSub
	if err := envconfig.ProcessWith(ctx, &envconfig.Config{Target: &ps, Lookuper: envconfig.OsLookuper()}); err != nil {
		return err
	}
	if err := ps.Validate(); err != nil {
		return err
	}
	log := logging.New(os.Stderr, "info", "auto")
	gcs, err := localstack.StartGCSWith(gcsOpts)
	if err != nil {
		return err
	}
	defer gcs.Stop()
	for _, b := range buckets {
		if b = strings.TrimSpace(b); b != "" {
			gcs.CreateBucket(b)
		}
	}
	env := fmt.Sprintf("export STORAGE_EMULATOR_HOST=%s\nexport FERRY_PROJECT=%s\n", gcs.Host, ps.Project)
	if gcs.TLSHost != "" {
		if dir == "" {
			if dir, err = os.MkdirTemp("", "ferry-localstack-"); err != nil {
				return err
			}
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		cert := filepath.Join(dir, "gcs-cert.pem")
		if err := os.WriteFile(cert, gcs.CertPEM, 0o644); err != nil {
			return err
		}
		env += fmt.Sprintf("export LOCALSTACK_GCS_TLS_HOST=%s\nexport LOCALSTACK_GCS_CERT=%s\n", gcs.TLSHost, cert)
	}
	emuKind := "none"
	if kind != "none" {
		emu, err := localstack.StartPubSub(ctx, localstack.PubSubOptions{Kind: kind, Dir: dir, Log: log})
		if err != nil {
			return err
		}
		defer emu.Stop()
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
		env = fmt.Sprintf("export PUBSUB_EMULATOR_HOST=%s\n", emu.Host) + env
		emuKind = emu.Kind
	}
	fmt.Print(env)
	if envFile != "" {
		if err := os.WriteFile(envFile, []byte(env), 0o644); err != nil {
			return err
		}
	}
	log.Info("local stack ready", "pubsub", os.Getenv("PUBSUB_EMULATOR_HOST"), "pubsub_kind", emuKind, "gcs", gcs.Host, "gcs_tls", gcs.TLSHost, "compose", gcs.Stats().FastCompose, "buckets", buckets)
	<-ctx.Done()
	log.Info("local stack stopping")
	return nil
}
