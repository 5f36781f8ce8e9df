// Command ferry is ferry in one binary, against your own bucket: cp moves
// files into GCS with the whole engine in this one process (no Pub/Sub, no
// fleet to deploy), restore brings them back proven, and status shows a
// transfer. See `ferry --help`; the commands are internal/command's.
package main

import (
	"github.com/ferry-dev/ferry/internal/cli"
	"github.com/ferry-dev/ferry/internal/command"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() { cli.Main(command.Ferry(cli.BuildVersion(version))) }
