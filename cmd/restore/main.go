// Command restore brings data back out of GCS: ferry's objects decompressed
// and proven against their metadata, any other object as stored, proven
// against its CRC32C. The work is internal/restore's, the command
// internal/commands' (ferry restore is the same).
package main

import (
	"github.com/ferry-dev/ferry/internal/cli"
	"github.com/ferry-dev/ferry/internal/commands"
	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() { cli.Main(command()) }

func command() *cobra.Command { return commands.Restore(version) }
