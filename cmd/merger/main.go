// Command merger composes chunk objects into final objects, verifies them and
// writes one benchmark row per transfer. See `merger --help`.
package main

import (
	"context"

	"github.com/ferry-dev/ferry/internal/cli"
	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/engine"
	"github.com/ferry-dev/ferry/internal/setup"
)

const about = `merger — finish ferry transfers.

Receives the workers' events from FERRY_EVENTS_SUBSCRIPTION and what
producers and submitters say (sealed, failed, cancel) from
FERRY_CONTROL_SUBSCRIPTION. When a transfer's manifest is
sealed and every chunk object is present with the CRC32C it names, composes
each file (a tree of at most 32 sources per compose), checks the final size and
CRC32C against the prediction, appends a benchmark row to FERRY_RESULTS_FILE
(or, with FERRY_BQ_DATASET, stages it in FERRY_RESULTS_BUCKET and loads it into
BigQuery with load jobs), publishes the done event to FERRY_DONE_TOPIC and
deletes the staging objects.
It keeps no state GCS does not have: restart it at any time.`

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() { cli.Main(cli.Service("merger", version, about, &config.Merger{}, realMain)) }

func realMain(ctx context.Context) error {
	var cfg config.Merger
	svc, err := setup.Start(ctx, &cfg)
	if err != nil {
		return err
	}
	defer svc.Close()
	return engine.Merger(ctx, cfg, svc.Clients, svc.Log, version, func() { svc.Health.SetReady(true) })
}
