// Command producer splits and compresses source files and publishes one
// message per chunk for ferry's workers; it also shows, lists and cancels
// transfers. See `producer --help`.
package main

import (
	"github.com/spf13/cobra"

	"github.com/ferry-dev/ferry/internal/cli"
	"github.com/ferry-dev/ferry/internal/commands"
	"github.com/ferry-dev/ferry/internal/config"
)

const about = `producer — hand files to the ferry fleet, and follow them.

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

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() { cli.Main(command()) }

func command() *cobra.Command {
	root := &cobra.Command{
		Use:     "producer",
		Short:   "hand files to the ferry fleet, and follow them",
		Long:    about,
		Version: version,
		RunE: func(*cobra.Command, []string) error {
			return cli.Usagef("missing command: submit, serve, status, list, cancel or doctor")
		},
	}
	root.AddCommand(submitCommand(), serveCommand(), commands.Status(), listCommand(), cancelCommand(), doctorCommand())
	for _, c := range append(root.Commands(), root) {
		cli.Env(c, &config.Producer{})
	}
	return root
}
