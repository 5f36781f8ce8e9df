package command

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/ferry-dev/ferry/internal/cli"
	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/doctor"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/setup"
)

// errChecksFailed ends doctor with exit 1 once the table says why.
var errChecksFailed = errors.New("doctor: checks failed (see the table above)")

func doctorCommand(version string) *cobra.Command {
	var bucket, bqProject, bqDataset, bqLocation, dir string
	var asJSON, noCanary, pool bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "doctor [flags]",
		Short: "prove a deployment: topics, bucket, dataset, permissions, and a canary transfer through the fleet",
		Long: `Checks, with your own credentials and the configuration the fleet uses
(FERRY_* as for submit; terraform output submitter_env gives a submitter's):

  - every topic and dead-letter topic exists (under FERRY_KMS_KEY, when set);
  - the workers', merger's and producer's subscriptions exist on their topics
    and dead-letter into their own dead-letter topics (skipped for a caller
    that may not read subscriptions, as a submitter);
  - the bucket exists with FERRY_KMS_KEY as its key, uniform access, its soft
    delete and the lifecycle rule that removes a crash's staging;
  - you may do what producer submit does: testIamPermissions on the bucket
    and the topics, and a probe object written, read and deleted under .ferry/;
  - with --bq-dataset, the dataset's location is FERRY_BQ_LOCATION's and its
    tables have the schema of schema/;
  - the pool: which agents (ferry agent) answered in the last 2 minutes, from
    the heartbeat each writes under .ferry/_agents/, and each source root an
    agent cannot read (not there, empty as an unmounted share is, or no answer
    within 10s as a hung one); with --pool, no agent answering fails;
  - and then a canary transfer: a few small files and a three-chunk file go
    through the fleet to gs://BUCKET/ferry-doctor/ID/, are read back and
    compared with their sources (bytes and CRC32C), and removed. When it does
    not end within --canary-timeout the table says whether no worker or no
    merger answered.

Prints a table (check, result, what was found, what to do) or, with --json,
one JSON object; exits 1 when any check failed, 2 on a usage error.`,
		Example: `  producer doctor
  FERRY_ENV_FILE=ferry.env producer doctor --json
  producer doctor --bq-project my-project --bq-dataset ferry --bq-location us-central1
  producer doctor --pool --no-canary`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if timeout <= 0 {
				return cli.Usagef("--canary-timeout %s: want more than 0", timeout)
			}
			var cfg config.Producer
			if err := config.FromEnvironment(cmd.Context(), &cfg); err != nil {
				return err
			}
			b, err := BucketOf(bucket, cfg)
			if err != nil {
				return err
			}
			return runDoctor(cmd, &cfg, b, doctorFlags{bqProject, bqDataset, bqLocation, dir, asJSON, noCanary, pool, timeout}, version)
		},
	}
	f := cmd.Flags()
	f.StringVar(&bucket, "bucket", "", BucketHelp)
	f.BoolVar(&asJSON, "json", false, "print the results as one JSON object")
	f.BoolVar(&noCanary, "no-canary", false, "make the checks only; send no canary transfer")
	f.BoolVar(&pool, "pool", false, "the deployment runs the pool (terraform: pool = true): fail unless an agent answers and reads its roots")
	f.DurationVar(&timeout, "canary-timeout", 3*time.Minute, "how long the fleet may take to end the canary")
	f.StringVar(&dir, "dir", os.TempDir(), "where the canary's files are written while it runs")
	f.StringVar(&bqProject, "bq-project", "", "project of the dataset (the merger's FERRY_BQ_PROJECT; default FERRY_PROJECT)")
	f.StringVar(&bqDataset, "bq-dataset", "", "dataset of the benchmark rows (the merger's FERRY_BQ_DATASET); empty: not checked")
	f.StringVar(&bqLocation, "bq-location", "", "the merger's FERRY_BQ_LOCATION, which the dataset's location must equal")
	return cmd
}

type doctorFlags struct {
	bqProject, bqDataset, bqLocation, dir string
	asJSON, noCanary, pool                bool
	timeout                               time.Duration
}

func runDoctor(cmd *cobra.Command, cfg *config.Producer, bucket string, f doctorFlags, version string) error {
	ctx := cmd.Context()
	log := logging.New(cmd.ErrOrStderr(), "warn", cfg.Log.Format)
	// Every check has its deadline; this bounds the connection too.
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute+f.timeout)
	defer cancel()
	clients, err := setup.Connect(cctx, cfg.PubSub.Project, cfg.Emulators, log)
	if err != nil {
		return err
	}
	defer clients.Close()
	id := message.NewTransferID("")
	project := f.bqProject
	if project == "" {
		project = cfg.PubSub.Project
	}
	o := doctor.Options{PubSub: cfg.PubSub, Bucket: bucket, KMSKey: cfg.Buckets.KMSKey, Emulated: cfg.Emulators.GCS != "",
		Queue: clients.Queue, Store: clients.Store, Datasets: doctor.NewBigQuery(), BQProject: project, BQDataset: f.bqDataset,
		BQLocation: f.bqLocation, WantTables: doctor.Tables(), ID: id, Pool: f.pool}
	rs := doctor.Run(cctx, o)
	if f.noCanary {
		rs = append(rs, doctor.Result{Check: "canary: transfer", Status: doctor.Skip, Detail: "--no-canary"})
	} else {
		rs = append(rs, doctor.Canary(cctx, doctor.CanaryOptions{Config: cfg, Bucket: bucket, Store: clients.Store, Timeout: f.timeout,
			Dir: f.dir, ID: id, Version: version})...)
	}
	out := cmd.OutOrStdout()
	if f.asJSON {
		err = doctor.WriteJSON(out, rs)
	} else {
		err = doctor.Write(out, rs)
	}
	if err != nil {
		return fmt.Errorf("doctor: %w", err)
	}
	if doctor.Failed(rs) {
		return errChecksFailed
	}
	return nil
}
