// Command restore brings data back out of GCS: ferry's objects decompressed
// and proven against their metadata, any other object as stored, proven
// against its CRC32C. The work is internal/restore's, the command
// internal/command's (ferry restore is the same).
package main

import (
	"github.com/spf13/cobra"

	"github.com/ferry-dev/ferry/internal/cli"
	cmdpkg "github.com/ferry-dev/ferry/internal/command"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() { cli.Main(command()) }

func command() *cobra.Command { return cmdpkg.Restore(version) }
