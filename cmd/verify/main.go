// Command verify proves a finished transfer intact: it downloads every final
// object, decompresses it with Go and with the stock zstd/gzip CLI, compares
// the bytes with the sources, and prints the transfer's stage table from the
// benchmark rows. `make run` ends with it; users can run it after any
// transfer.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/plan"
	"github.com/ferry-dev/ferry/internal/result"
	"github.com/ferry-dev/ferry/internal/verify"
)

func main() {
	fs := flag.NewFlagSet("verify", flag.ExitOnError)
	codecName := fs.String("codec", "zstd", "codec the transfer used")
	results := fs.String("results", "", "NDJSON benchmark rows; with --transfer, print that transfer's stage table")
	tid := fs.String("transfer", "", "transfer id whose stage table to print")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `verify — prove a ferry transfer intact.

Usage: verify [flags] SOURCE... gs://BUCKET/PREFIX

Pairs each source file with its final object as producer submit names it,
downloads the object, decompresses it with Go and with the stock CLI, and
compares the bytes and CRC32Cs. Exits 1 on the first difference.

Flags:
`)
		fs.PrintDefaults()
	}
	_ = fs.Parse(os.Args[1:])
	if fs.NArg() < 2 {
		fs.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, fs.Args(), *codecName, *results, *tid); err != nil {
		fmt.Fprintf(os.Stderr, "verify: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, codecName, results, tid string) error {
	c, err := codec.Parse(codecName)
	if err != nil {
		return fmt.Errorf("--codec: %w", err)
	}
	dest, files, err := plan.Resolve(args[:len(args)-1], args[len(args)-1], c)
	if err != nil {
		return err
	}
	store, err := gcs.New(ctx)
	if err != nil {
		return err
	}
	defer store.Close()
	var raw, wire int64
	clis := map[string]int{}
	for _, f := range files {
		rep, err := verify.Object(ctx, store, dest.Bucket, f.Object, c, f.Path)
		if err != nil {
			return err
		}
		raw += rep.RawSize
		wire += rep.WireSize
		clis[rep.CLI]++
	}
	fmt.Printf("verified %d objects under %s: %s raw, %s wire; bytes and CRC32C identical to the sources (Go decoder: %d, stock %s -d: %d)\n",
		len(files), dest, result.FormatBytes(float64(raw)), result.FormatBytes(float64(wire)), len(files), c, clis[map[codec.Codec]string{codec.Zstd: "zstd", codec.Gzip: "gzip"}[c]])
	if results == "" || tid == "" {
		return nil
	}
	rows, err := result.ReadFile(results)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if r.TransferID == tid {
			fmt.Printf("\ntransfer %s (%s, %s tier)\n", tid, r.Method, r.Tier)
			result.StageTable(os.Stdout, r)
			return nil
		}
	}
	return fmt.Errorf("%s has no row for transfer %s", results, tid)
}
