// Command localstack runs ferry's embedded default on one machine: the Pub/Sub
// emulator and fake-gcs-server on loopback, with ferry's topics,
// subscriptions, dead-letter topics and bucket. It exists so that `make run`
// and a developer need no cloud project; it prints the environment the other
// binaries need and runs until interrupted.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/renameio/v2"
	"github.com/spf13/cobra"

	"github.com/ferry-dev/ferry/internal/cli"
	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/localstack"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/queue"
)

const about = `localstack — the Pub/Sub emulator and fake-gcs-server for ferry, on loopback.

Starts both, creates the topics and subscriptions (names from the same
FERRY_* variables the binaries read; also ferry-done-sub, a subscription on
the done topic for humans to pull) and the buckets, then prints the
environment for the other binaries as export lines and runs until
interrupted.

With --env-file it also writes that environment to a file: atomically, only
once everything is ready, and removed again on exit. Besides the emulators'
variables the file sets FERRY_BUCKETS to the buckets created,
FERRY_HTTP_ADDR=127.0.0.1:0 (each service on its own free port, which it
logs) and the CLOUDSDK_* variables that point gcloud storage and gcloud
pubsub at the emulators.`

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

type flags struct {
	kind, dir, buckets, envFile, compose string
	gcsRoot                              string
	gcsPort                              uint16
	gcsTLS                               bool
}

func main() { cli.Main(command()) }

func command() *cobra.Command {
	var f flags
	cmd := &cobra.Command{
		Use:     "localstack [flags]",
		Short:   "the Pub/Sub emulator and fake-gcs-server for ferry, on loopback",
		Long:    about,
		Version: version,
		Args:    cli.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return realMain(cmd.Context(), cmd.OutOrStdout(), f) },
	}
	fs := cmd.Flags()
	fs.StringVar(&f.kind, "pubsub", "", "Pub/Sub emulator: java (gcloud's pubsub-emulator), pstest (in-process), none (storage only), or empty for java with pstest as fallback")
	fs.StringVar(&f.dir, "dir", "", "directory for the emulator's data and log (default: a temporary one)")
	fs.Uint16Var(&f.gcsPort, "gcs-port", 0, "loopback port of fake-gcs-server (0: any free port)")
	fs.StringVar(&f.buckets, "buckets", "ferry-local", "comma-separated buckets to create")
	fs.StringVar(&f.envFile, "env-file", "", "also write the environment to this file once ready (export lines; removed on exit)")
	fs.BoolVar(&f.gcsTLS, "gcs-tls", false, "also serve fake-gcs-server over HTTPS with a self-signed certificate (written to DIR/gcs-cert.pem): LOCALSTACK_GCS_TLS_HOST, LOCALSTACK_GCS_CERT")
	fs.StringVar(&f.gcsRoot, "gcs-root", "", "keep objects in this directory with fake-gcs-server's filesystem backend (on a tmpfs, per-request cost does not grow with the bucket, as the memory backend's does); empty: in memory")
	fs.StringVar(&f.compose, "compose", "fast", "compose: fast (the shim's: one copy, CRC32C combined) or fake (fake-gcs-server's own)")
	cli.Env(cmd, &config.LocalStack{})
	return cmd
}

func realMain(ctx context.Context, stdout io.Writer, f flags) error {
	if f.compose != "fast" && f.compose != "fake" {
		return cli.Usagef("--compose %q: want fast or fake", f.compose)
	}
	var cfg config.LocalStack
	if err := config.FromEnvironment(ctx, &cfg); err != nil {
		return err
	}
	ps := cfg.PubSub
	var buckets []string
	for _, b := range strings.Split(f.buckets, ",") {
		if b = strings.TrimSpace(b); b != "" {
			buckets = append(buckets, b)
		}
	}
	if f.envFile != "" {
		// A file left by an earlier run that was killed must not be
		// mistaken for this one's.
		if err := os.Remove(f.envFile); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("--env-file: %w", err)
		}
	}
	log := logging.New(os.Stderr, "info", "auto")
	gcs, err := localstack.StartGCSWith(localstack.GCSOptions{Port: f.gcsPort, TLS: f.gcsTLS, StockCompose: f.compose == "fake", StorageRoot: f.gcsRoot})
	if err != nil {
		return err
	}
	defer gcs.Stop()
	for _, b := range buckets {
		gcs.CreateBucket(b)
	}
	var extra string
	dir := f.dir
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
		extra = fmt.Sprintf("export LOCALSTACK_GCS_TLS_HOST=%s\nexport LOCALSTACK_GCS_CERT=%s\n", gcs.TLSHost, cert)
	}
	emuHost, emuKind := "", "none"
	if f.kind != "none" {
		emu, err := localstack.StartPubSub(ctx, localstack.PubSubOptions{Kind: f.kind, Dir: dir, Log: log})
		if err != nil {
			return err
		}
		defer emu.Stop()
		q, err := queue.Dial(ctx, ps.Project, log, queue.WithEmulator(emu.Host))
		if err != nil {
			return err
		}
		err = localstack.Provision(ctx, q, ps)
		q.Close()
		if err != nil {
			return err
		}
		emuHost, emuKind = emu.Host, emu.Kind
	}
	env := localstack.Env(ps.Project, emuHost, gcs.Host, buckets) + extra
	fmt.Fprint(stdout, env)
	if f.envFile != "" {
		if err := renameio.WriteFile(f.envFile, []byte(env), 0o644); err != nil {
			return fmt.Errorf("--env-file: %w", err)
		}
		defer os.Remove(f.envFile)
	}
	log.Info("local stack ready", "pubsub", emuHost, "pubsub_kind", emuKind, "gcs", gcs.Host, "gcs_tls", gcs.TLSHost,
		"compose", gcs.Stats().FastCompose, "buckets", buckets, "done_subscription", localstack.DoneSubscription(ps.DoneTopic), "env_file", f.envFile)
	<-ctx.Done()
	log.Info("local stack stopping")
	return nil
}
