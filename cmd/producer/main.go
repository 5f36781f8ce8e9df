// Command producer splits and compresses source files and publishes one
// message per chunk for ferry's workers; see `producer --help`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

const usage = `producer — hand files to the ferry fleet.

Usage:
  producer submit [flags] SOURCE... gs://BUCKET/PREFIX
  producer serve

SOURCE is a file or a directory (walked recursively; a directory keeps its own
name, as with gsutil cp -r). Each file is cut into chunks, each chunk is
compressed as an independent frame (zstd level 3 by default) and published to
the chunks topic; workers upload them and the merger composes the final
objects gs://BUCKET/PREFIX/<relative path>.zst, which stock zstd -d reads.

submit prints the transfer id on stdout. With --wait it blocks until the
transfer's done event and exits 0 only if the transfer succeeded.

serve runs the requests batch systems publish to FERRY_REQUESTS_TOPIC (JSON,
see the README), until SIGTERM. Every request ends with one done event on
FERRY_DONE_TOPIC, also one that is malformed or cannot start.

Run "producer submit --help" for its flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		fmt.Fprint(os.Stderr, usage)
		if len(os.Args) < 2 {
			os.Exit(2)
		}
		return
	}
	var err error
	switch os.Args[1] {
	case "submit":
		err = submit(ctx, os.Args[2:])
	case "serve":
		err = serve(ctx, os.Args[2:])
	default:
		fmt.Fprintf(os.Stderr, "producer: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	var ue usageError
	switch {
	case errors.Is(err, flag.ErrHelp):
	case errors.As(err, &ue):
		fmt.Fprintf(os.Stderr, "producer: %v\n", err)
		os.Exit(2)
	case err != nil:
		fmt.Fprintf(os.Stderr, "producer: %v\n", err)
		os.Exit(1)
	}
}

// usageError is a mistake on the command line.
type usageError struct{ error }
