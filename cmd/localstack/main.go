// Command localstack runs ferry's embedded default on one machine: the Pub/Sub
// emulator and fake-gcs-server on loopback, with ferry's topics,
// subscriptions, dead-letter topics and bucket. It exists so that `make run`
// and a developer need no cloud project; it prints the environment the other
// binaries need and runs until interrupted.
package main

import (
	"context"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ferry-dev/ferry/internal/cli"
	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/localstack"
	"github.com/ferry-dev/ferry/internal/logging"
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
	uploads                              string
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
	fs.StringVar(&f.compose, "compose", "fast", "compose: fast (the shim's: CRC32C combined, no MD5 as on Cloud Storage; with --gcs-root the sources' bytes never pass through the process) or fake (fake-gcs-server's own)")
	fs.StringVar(&f.uploads, "uploads", "fast", "uploads with --gcs-root: fast (the shim's: streamed to the file, hashed once) or fake (fake-gcs-server's own, in memory, a resumable upload hashed again at every chunk)")
	cli.Env(cmd, &config.LocalStack{})
	return cmd
}

func realMain(ctx context.Context, stdout io.Writer, f flags) error {
	if f.compose != "fast" && f.compose != "fake" {
		return cli.Usagef("--compose %q: want fast or fake", f.compose)
	}
	if f.uploads != "fast" && f.uploads != "fake" {
		return cli.Usagef("--uploads %q: want fast or fake", f.uploads)
	}
	var cfg config.LocalStack
	if err := config.FromEnvironment(ctx, &cfg); err != nil {
		return err
	}
	var buckets []string
	for _, b := range strings.Split(f.buckets, ",") {
		if b = strings.TrimSpace(b); b != "" {
			buckets = append(buckets, b)
		}
	}
	return localstack.Run(ctx, localstack.RunOptions{PubSub: cfg.PubSub, Kind: f.kind, Dir: f.dir, Buckets: buckets, EnvFile: f.envFile,
		GCS: localstack.GCSOptions{Port: f.gcsPort, TLS: f.gcsTLS, StockCompose: f.compose == "fake", StockUploads: f.uploads == "fake", StorageRoot: f.gcsRoot},
		Log: logging.New(os.Stderr, "info", "auto")}, stdout)
}
