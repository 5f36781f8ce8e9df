// Command producer splits and compresses source files and publishes one
// message per chunk for ferry's workers; it also shows, lists and cancels
// transfers. See `producer --help`; the commands are internal/command's.
package main

import (
	"github.com/ferry-dev/ferry/internal/cli"
	"github.com/ferry-dev/ferry/internal/command"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() { cli.Main(command.Producer(version)) }
