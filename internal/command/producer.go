package command

import (
	"github.com/spf13/cobra"

	"github.com/ferry-dev/ferry/internal/cli"
	"github.com/ferry-dev/ferry/internal/config"
)

const producerAbout = `producer — hand files to the ferry fleet, and follow them.

submit cuts each file into chunks, compresses each chunk as an independent
frame (zstd; by default each chunk's level adapts to what waits, the
compressor or the link) and publishes it to the chunks topic; workers
upload them and the merger composes the final objects
gs://BUCKET/PREFIX/<relative path>.zst, which stock zstd -d reads.

serve runs the requests batch systems publish to FERRY_REQUESTS_TOPIC (JSON,
see docs/usage.md), until SIGTERM. Every request ends with one done event on
FERRY_DONE_TOPIC, also one that is malformed or cannot start.

status, list and cancel read a bucket's manifests (.ferry/) and done markers
(.ferry-done/); cancel asks the merger to end a transfer.

doctor proves a deployment: topics, subscriptions, the bucket, your
permissions, and a canary transfer through the fleet, read back and removed.`

// Producer is the producer binary's root command, of version.
func Producer(version string) *cobra.Command {
	root := &cobra.Command{
		Use:     "producer",
		Short:   "hand files to the ferry fleet, and follow them",
		Long:    producerAbout,
		Version: version,
		RunE: func(*cobra.Command, []string) error {
			return cli.Usagef("missing command: submit, serve, status, list, cancel or doctor")
		},
	}
	root.AddCommand(submitCommand(version), serveCommand(version), Status(), listCommand(), cancelCommand(), doctorCommand(version))
	for _, c := range append(root.Commands(), root) {
		cli.Env(c, &config.Producer{})
	}
	return root
}
