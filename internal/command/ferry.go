package command

import (
	"github.com/spf13/cobra"

	"github.com/ferry-dev/ferry/internal/cli"
)

const ferryAbout = `ferry — move files into Google Cloud Storage fast and provably intact.

ferry cp splits and compresses files (zstd frames that the stock zstd -d
reads), uploads the chunks in parallel with a CRC32C on every one, and
composes the final objects, confirmed in a listing of the bucket before it
says ok. It runs the whole engine in this process, against Google Cloud
Storage with Application Default Credentials (or the stand-in
STORAGE_EMULATOR_HOST names): nothing to deploy first.

ferry restore gives the objects back, every byte range checked; ferry status
shows what a transfer did. When one machine is not enough, the same engine
runs as a fleet (producer, worker, merger): see docs/deploying.md.`

// Ferry is the ferry binary's root command, of version.
func Ferry(version string) *cobra.Command {
	root := &cobra.Command{
		Use:     "ferry",
		Short:   "move files into Google Cloud Storage fast and provably intact",
		Long:    ferryAbout,
		Version: version,
		RunE: func(*cobra.Command, []string) error {
			return cli.Usagef("missing command: cp, ls, rm, restore or status")
		},
	}
	root.AddCommand(cpCommand(version), Restore(version), Status(), lsCommand(), rmCommand(), agentCommand(version))
	cli.WithCompletion(root)
	return root
}
