package command

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/ferry-dev/ferry/internal/benchrow"
	"github.com/ferry-dev/ferry/internal/cli"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/logging"
)

// rmDeletes is how many deletes rm keeps in flight.
const rmDeletes = 16

// rmCommand is ferry rm: every object under a prefix, after asking.
func rmCommand() *cobra.Command {
	var yes, dryRun bool
	cmd := &cobra.Command{
		Use:   "rm [flags] gs://BUCKET/PREFIX",
		Short: "delete the objects under a prefix, after asking",
		Long: `Deletes every object under gs://BUCKET/PREFIX (all the way down). On a
terminal it counts them and asks first; elsewhere it needs --yes. --dry-run
lists what it would delete and deletes nothing. Each object is deleted only
as the listing showed it (its generation and metageneration): one written
again since stays. ferry's own objects (.ferry/, .ferry-done/) are never
deleted, nor a prefix inside them: a transfer's staging goes with
ferry status / cancel, not rm.`,
		Args: oneURL("gs://BUCKET/PREFIX"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			d, err := parseURL(args[0]) // refuses ferry's own prefixes too
			if err != nil {
				return err
			}
			if d.Prefix == "" {
				return cli.Usagef("%s: rm takes a prefix, not a whole bucket", d)
			}
			store, _, err := openGCS(ctx)
			if err != nil {
				return err
			}
			defer store.Close()
			out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
			// An object of that name, or the objects of that directory:
			// not others whose names start alike (logs2 for logs).
			prefix, dir := d.Prefix, strings.TrimSuffix(d.Prefix, "/")+"/"
			under := func(name string) bool { return name == prefix || strings.HasPrefix(name, dir) }
			if dryRun || !yes {
				n, bytes, err := countUnder(ctx, store, d.Bucket, prefix, under, func(a gcs.Attrs) {
					if dryRun {
						fmt.Fprintf(out, "would delete gs://%s/%s\n", d.Bucket, a.Name)
					}
				})
				if err != nil {
					return err
				}
				what := fmt.Sprintf("%s, %s, at %s", benchrow.Count(int(n), "object"), benchrow.FormatBytes(float64(bytes)), d)
				switch {
				case dryRun:
					fmt.Fprintf(errw, "rm --dry-run: would delete %s\n", what)
					return nil
				case n == 0:
					fmt.Fprintf(errw, "rm: nothing at %s\n", d)
					return nil
				case !onTerminal(cmd.InOrStdin()):
					return cli.Usagef("rm would delete %s: give --yes to delete without a terminal to ask on", what)
				}
				if !ask(cmd.InOrStdin(), errw, "delete "+what+"? [y/N] ") {
					return errors.New("rm: not confirmed; nothing deleted")
				}
			}
			n, err := deleteUnder(ctx, store, d.Bucket, prefix, under)
			fmt.Fprintf(errw, "rm: deleted %s at %s\n", benchrow.Count(int(n), "object"), d)
			return err
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "delete without asking")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list what would be deleted; delete nothing")
	return cmd
}

// onTerminal reports whether r, where the answer is read, is a terminal.
func onTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && logging.IsTerminal(f)
}

// ask asks question on w and reports whether the answer read from r is yes.
func ask(r io.Reader, w io.Writer, question string) bool {
	fmt.Fprint(w, question)
	line, _ := bufio.NewReader(r).ReadString('\n')
	a := strings.ToLower(strings.TrimSpace(line))
	return a == "y" || a == "yes"
}

// rmStore is what rm needs of GCS.
type rmStore interface {
	List(ctx context.Context, bucket, prefix string, fn func(gcs.Attrs) error) error
	DeleteAsSeen(ctx context.Context, bucket string, a gcs.Attrs) error
}

// countUnder counts the objects under prefix that under admits and their
// bytes, each shown to each.
func countUnder(ctx context.Context, s rmStore, bucket, prefix string, under func(string) bool, each func(gcs.Attrs)) (n, bytes int64, err error) {
	err = s.List(ctx, bucket, prefix, func(a gcs.Attrs) error {
		if !under(a.Name) {
			return nil
		}
		n++
		bytes += a.Size
		each(a)
		return nil
	})
	return n, bytes, err
}

// deleteUnder deletes the objects under prefix that under admits as this
// listing shows them, rmDeletes at once, and returns how many went. An
// object changed since it was listed stays (its precondition fails), and
// is named.
func deleteUnder(ctx context.Context, s rmStore, bucket, prefix string, under func(string) bool) (int64, error) {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(rmDeletes)
	var n atomic.Int64
	err := s.List(gctx, bucket, prefix, func(a gcs.Attrs) error {
		if !under(a.Name) {
			return nil
		}
		g.Go(func() error {
			err := s.DeleteAsSeen(gctx, bucket, a)
			if errors.Is(err, gcs.ErrPrecondition) {
				return fmt.Errorf("gs://%s/%s changed after it was listed; it stays: %w", bucket, a.Name, err)
			}
			if err == nil {
				n.Add(1)
			}
			return err
		})
		return gctx.Err()
	})
	if werr := g.Wait(); err == nil {
		err = werr
	}
	return n.Load(), err
}
