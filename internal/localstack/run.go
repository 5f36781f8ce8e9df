package localstack

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"

	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/queue"
)

// RunOptions are bin/localstack's flags.
type RunOptions struct {
	PubSub config.PubSub
	// Kind is the Pub/Sub emulator (PubSubOptions.Kind), or "none" for
	// storage only.
	Kind string
	// Dir holds the emulator's data and log, and the TLS certificate;
	// empty: a temporary directory where one is needed.
	Dir     string
	Buckets []string
	// EnvFile, when set, receives the environment once the stack is
	// ready, and is removed when Run returns.
	EnvFile string
	GCS     GCSOptions
	Log     *slog.Logger
}

// Run starts the local stack, writes its environment (export lines) to
// stdout and to EnvFile, and serves until ctx ends; every part it started
// has stopped when it returns.
func Run(ctx context.Context, o RunOptions, stdout io.Writer) error {
	log := logging.OrDiscard(o.Log)
	if o.EnvFile != "" {
		// A file left by an earlier run that was killed must not be
		// mistaken for this one's.
		if err := os.Remove(o.EnvFile); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("--env-file: %w", err)
		}
	}
	gcs, err := StartGCSWith(o.GCS)
	if err != nil {
		return err
	}
	defer gcs.Stop()
	for _, b := range o.Buckets {
		gcs.CreateBucket(b)
	}
	var extra string
	dir := o.Dir
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
	if o.Kind != "none" {
		emu, err := StartPubSub(ctx, PubSubOptions{Kind: o.Kind, Dir: dir, Log: log})
		if err != nil {
			return err
		}
		defer emu.Stop()
		q, err := queue.Dial(ctx, o.PubSub.Project, log, queue.WithEmulator(emu.Host))
		if err != nil {
			return err
		}
		err = Provision(ctx, q, o.PubSub)
		q.Close()
		if err != nil {
			return err
		}
		emuHost, emuKind = emu.Host, emu.Kind
	}
	env := Env(o.PubSub.Project, emuHost, gcs.Host, o.Buckets) + extra
	fmt.Fprint(stdout, env)
	if o.EnvFile != "" {
		if err := renameio.WriteFile(o.EnvFile, []byte(env), 0o644); err != nil {
			return fmt.Errorf("--env-file: %w", err)
		}
		defer os.Remove(o.EnvFile)
	}
	log.Info("local stack ready", "pubsub", emuHost, "pubsub_kind", emuKind, "gcs", gcs.Host, "gcs_tls", gcs.TLSHost,
		"compose", gcs.Stats().FastCompose, "gcs_root", o.GCS.StorageRoot, "buckets", o.Buckets, "done_subscription", DoneSubscription(o.PubSub.DoneTopic), "env_file", o.EnvFile)
	<-ctx.Done()
	log.Info("local stack stopping")
	return nil
}
