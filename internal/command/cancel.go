package command

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/setup"
	"github.com/ferry-dev/ferry/internal/transfers"
)

func cancelCommand() *cobra.Command {
	var bucket, keyFile string
	var operator bool
	cmd := &cobra.Command{
		Use:   "cancel [flags] TRANSFER_ID",
		Short: "end a running transfer as cancelled",
		Long: `Publishes a cancel event for the transfer on FERRY_CONTROL_TOPIC. The merger
ends it cancelled: one done event, one benchmark row, staging removed; workers
drop its chunks that are still queued. Follow it with "producer status ID".
A transfer that has already ended is not cancelled (exit 1).

Only those allowed may end a transfer: the event carries an end key, and the
merger acts on it only when the transfer's key object (gs://BUCKET/.ferry-keys/ID)
lists the key's SHA-256. The key is, in this order:
  --key-file F   a file holding the key (a batch system that published the
                 request with "end_key_sha256" keeps the key itself);
  FERRY_KEY_DIR/ID  the key producer submit saved when it started the transfer
                 (default $XDG_STATE_HOME/ferry/keys, else ~/.local/state/ferry/keys);
  --operator     a fresh key added to the key object, which needs
                 storage.objects.delete on .ferry-keys/ (an operator's grant;
                 a submitter has none).`,
		Args: ExactlyOneID,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			var cfg config.Producer
			if err := config.FromEnvironment(ctx, &cfg); err != nil {
				return err
			}
			b, err := BucketOf(bucket, cfg)
			if err != nil {
				return err
			}
			log := logging.New(cmd.ErrOrStderr(), cfg.Log.Level, cfg.Log.Format)
			c, err := setup.Connect(ctx, cfg.PubSub.Project, cfg.Emulators, log)
			if err != nil {
				return err
			}
			defer c.Close()
			key, err := cancelKey(ctx, c.Store, cfg, b, args[0], keyFile, operator)
			if err != nil {
				return err
			}
			t, err := transfers.Cancel(ctx, c.Store, c.Queue.Publisher(cfg.PubSub.ControlTopic), b, args[0], key)
			if errors.Is(err, transfers.ErrEnded) {
				return err
			}
			if err != nil {
				return fmt.Errorf("%w (on %s and %s)", err, cfg.Emulators.GCSEndpoint(), cfg.Emulators.PubSubEndpoint())
			}
			fmt.Fprintf(cmd.OutOrStdout(), "cancel requested for transfer %s (%s); the merger ends it cancelled: producer status %s\n", t.ID, t.State, t.ID)
			return nil
		},
	}
	cmd.Flags().StringVar(&bucket, "bucket", "", BucketHelp)
	cmd.Flags().StringVar(&keyFile, "key-file", "", "file holding the transfer's end key (64 hex digits)")
	cmd.Flags().BoolVar(&operator, "operator", false, "add a fresh end key to the transfer's key object (needs an operator's storage.objects.delete on .ferry-keys/)")
	return cmd
}

// cancelKey finds the end key a cancel carries (see cancelCommand).
func cancelKey(ctx context.Context, s *gcs.Store, cfg config.Producer, bucket, id, keyFile string, operator bool) (string, error) {
	switch {
	case keyFile != "":
		return transfers.LoadKey(keyFile)
	case operator:
		return transfers.OperatorKey(ctx, s, bucket, id)
	}
	dir, err := transfers.KeyDir(cfg.KeyDir)
	if err != nil {
		return "", err
	}
	key, err := transfers.LoadKey(filepath.Join(dir, filepath.Base(id)))
	if errors.Is(err, transfers.ErrNoKey) {
		return "", fmt.Errorf("transfer %s: %w in %s: only its submitter (producer submit saved the key there, FERRY_KEY_DIR) "+
			"or an operator (--operator) can cancel it; a requester that sent end_key_sha256 passes its key with --key-file", id, transfers.ErrNoKey, dir)
	}
	return key, err
}
