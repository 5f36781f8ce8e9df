package command

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ferry-dev/ferry/internal/benchrow"
	"github.com/ferry-dev/ferry/internal/cli"
	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/plan"
	"github.com/ferry-dev/ferry/internal/setup"
	"github.com/ferry-dev/ferry/internal/transfers"
)

// lsCommand is ferry ls: the objects under a prefix, with their sizes, their
// CRC32C as gcloud storage shows it, and the transfer that wrote each.
func lsCommand() *cobra.Command {
	var asJSON, all bool
	cmd := &cobra.Command{
		Use:   "ls [flags] gs://BUCKET[/PREFIX]",
		Short: "list objects: size, CRC32C, and the ferry transfer that wrote each",
		Long: `Lists every object under gs://BUCKET/PREFIX (all the way down), one a line:
its size, its CRC32C as gcloud storage shows it, the ferry transfer that
wrote it ("-" for an object ferry did not write) and its name; then the
count and the bytes. ferry's own objects (.ferry/, .ferry-done/) are left
out unless --all. The listing streams: a prefix of millions of objects takes
no more memory than one.`,
		Args: oneURL("gs://BUCKET[/PREFIX]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			d, err := parseURL(args[0])
			if err != nil {
				return err
			}
			store, cfg, err := openGCS(ctx)
			if err != nil {
				return err
			}
			defer store.Close()
			l := newLister(cmd.OutOrStdout(), asJSON)
			err = store.List(ctx, d.Bucket, d.Prefix, func(a gcs.Attrs) error {
				if !all && message.ReservedRoot(a.Name) != "" {
					return nil
				}
				return l.add(d.Bucket, a)
			})
			if err != nil {
				return fmt.Errorf("list %s (on %s): %w", d, cfg.Emulators.GCSEndpoint(), err)
			}
			return l.end()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON document: the objects, their count and bytes")
	cmd.Flags().BoolVar(&all, "all", false, "list ferry's own objects (.ferry/, .ferry-done/) too")
	return cmd
}

// oneURL accepts one argument, a gs:// URL shaped as what says.
func oneURL(what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != 1 {
			return cli.Usagef("want one %s, got %d arguments", what, len(args))
		}
		return nil
	}
}

// parseURL parses a gs://BUCKET[/PREFIX] argument, as a usage error.
func parseURL(arg string) (plan.Destination, error) {
	d, err := plan.ParseDestination(arg)
	if err != nil {
		return d, cli.Usagef("%s", strings.Replace(err.Error(), "destination ", "", 1))
	}
	return d, nil
}

// openGCS opens GCS (or the stand-in) as the environment names it.
func openGCS(ctx context.Context) (*gcs.Store, config.Restore, error) {
	var cfg config.Restore
	if err := config.FromEnvironment(ctx, &cfg); err != nil {
		return nil, cfg, err
	}
	store, err := setup.OpenStore(ctx, cfg.Emulators)
	return store, cfg, err
}

// listedObject is an object as ls shows it: transfers.Object's fields (raw
// ones for objects ferry wrote) and the transfer that wrote it.
type listedObject struct {
	transfers.Object
	TransferID string `json:"transfer_id,omitempty"`
}

// lister writes the listing as it comes: lines, or one JSON document whose
// objects array is written an object at a time.
type lister struct {
	w            io.Writer
	json         bool
	count, bytes int64
	err          error
}

func newLister(w io.Writer, asJSON bool) *lister { return &lister{w: w, json: asJSON} }

func (l *lister) add(bucket string, a gcs.Attrs) error {
	o := listedObject{Object: transfers.Object{Name: "gs://" + bucket + "/" + a.Name, Size: a.Size, CRC32C: crc32c.Base64(a.CRC32C)},
		TransferID: a.Metadata[message.MetaTransfer]}
	if n, err := strconv.ParseInt(a.Metadata[message.MetaRawSize], 10, 64); err == nil {
		o.RawSize = n
	}
	if c, err := strconv.ParseUint(a.Metadata[message.MetaRawCRC32C], 16, 32); err == nil {
		o.RawCRC32C = crc32c.Base64(uint32(c))
	}
	switch {
	case l.json && l.count == 0:
		l.printf("{\n  \"v\": %d,\n  \"objects\": [\n    ", message.Version)
	case l.json:
		l.printf(",\n    ")
	}
	l.count++
	l.bytes += a.Size
	if l.json {
		b, err := json.Marshal(o)
		if err != nil {
			return err
		}
		l.printf("%s", b)
		return l.err
	}
	who := o.TransferID
	if who == "" {
		who = "-"
	}
	l.printf("%12d  %s  %-26s  %s\n", o.Size, o.CRC32C, who, o.Name)
	return l.err
}

func (l *lister) end() error {
	switch {
	case l.json && l.count == 0:
		l.printf("{\n  \"v\": %d,\n  \"objects\": [],\n  \"count\": 0,\n  \"bytes\": 0\n}\n", message.Version)
	case l.json:
		l.printf("\n  ],\n  \"count\": %d,\n  \"bytes\": %d\n}\n", l.count, l.bytes)
	default:
		l.printf("%s, %s\n", benchrow.Count(int(l.count), "object"), benchrow.FormatBytes(float64(l.bytes)))
	}
	return l.err
}

func (l *lister) printf(format string, a ...any) {
	if l.err == nil {
		_, l.err = fmt.Fprintf(l.w, format, a...)
	}
}
