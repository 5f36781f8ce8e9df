// Package copier is `ferry cp`: one transfer run by one process against the
// user's own bucket, with no fleet to deploy first. It wires ferry's one
// engine in memory: the producer's pipeline (internal/submit, as `producer
// submit --wait` runs it), the workers' uploads and the merger's end of a
// transfer (internal/engine, as cmd/worker and cmd/merger run them), talking
// through the in-process transport (queue.Memory) instead of Pub/Sub, as
// engine.Local wires them. The
// objects, manifest, listing and benchmark row are the fleet's, so
// `producer status`, `restore` and the analysts' queries cannot tell which
// wiring moved the data.
//
// What a process of its own adds to the fleet's promises:
//   - Ctrl-C stops reading, cancels the transfer (the merger removes what
//     was staged), says what was done and fails;
//   - a journal in the state directory names the transfer a command
//     started until it ends, so the same command run again after a crash
//     (kill -9) takes the same transfer up again: a new run of it, whose
//     merger finishes over what the first left or removes it.
package copier

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/engine"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/plan"
	"github.com/ferry-dev/ferry/internal/producer"
	"github.com/ferry-dev/ferry/internal/queue"
	"github.com/ferry-dev/ferry/internal/submit"
	"github.com/ferry-dev/ferry/internal/transfers"
	"github.com/ferry-dev/ferry/internal/waiter"
)

// interruptGrace bounds how long an interrupted cp waits for its transfer
// to end cancelled (staging removed) before it gives up and says what it
// left.
const interruptGrace = time.Minute

// Run copies o.Request with the configuration cfg: the producer, the
// workers and the merger in this process. It returns nil only when the
// transfer ended ok. o.Wait is implied.
func Run(ctx context.Context, cfg *config.Copy, o submit.Options) error {
	o.Wait = true
	o.ProgressEvery = time.Minute
	state, err := config.StateDir()
	if err != nil {
		return err
	}
	pcfg, wcfg, mcfg := cfg.Producer(), cfg.Worker(), cfg.Merger(state)
	pcfg.LeaseHolder = producer.LeaseHolder()
	pcfg.Log.Level = quietOnTerminal(cfg.Log.Level, o)
	log := logging.New(o.Stderr, pcfg.Log.Level, cfg.Log.Format)

	eng, err := engine.OpenLocal(ctx, engine.LocalConfig{Copy: cfg, Producer: pcfg, Worker: wcfg, Merger: mcfg, Log: log, Version: o.Version})
	if err != nil {
		return err
	}
	defer eng.Close()
	clients := eng.Clients
	store, q := clients.Store, clients.Queue
	if o.DryRun {
		return submit.RunOn(ctx, &pcfg, o, clients)
	}

	dest, err := plan.ParseDestination(o.Request.Destination)
	if err != nil {
		return err // Request checked it
	}
	j, err := openJournal(state, o.Request)
	if err != nil {
		return err
	}
	defer j.unlock()
	prev := j.resume(ctx, store, dest.Bucket, o.Request)
	switch {
	case prev.done != nil:
		// It ended after the earlier run last heard of it: its end is
		// this command's answer, once its clean-up is finished.
		if err := finishEnded(ctx, store, dest.Bucket, prev.tid); err != nil {
			return err
		}
		j.remove()
		fmt.Fprintf(o.Stderr, "transfer %s, which an earlier run of this command started, had ended %s; its staging objects are removed\n", prev.tid, prev.done.Status)
		return submit.Report(o.Stdout, o.Stderr, *prev.done, o.JSON)
	case prev.tid != "" && !prev.other:
		log.Warn("taking up the transfer an earlier ferry cp of the same sources and destination started and did not finish", "transfer_id", prev.tid, "journal", j.path)
		o.Request.TransferID = prev.tid
	}
	tid := o.Request.TransferID
	if err := j.write(tid); err != nil {
		return err
	}

	// The in-process fleet: the workers and the merger, until the
	// transfer has ended (or been given up on after an interrupt; the
	// deferred Close stops them). Should either stop on its own (it cannot
	// receive), or a message run out of its deliveries, the transfer
	// cannot end: the submit is cancelled with the cause, so that nothing
	// waits for it forever.
	sctx, stopSubmit := context.WithCancelCause(ctx)
	defer stopSubmit(nil)
	eng.Start(ctx, submit.HostID(), stopSubmit)
	defer eng.Stop()
	if prev.tid != "" && prev.other {
		// The same sources and destination, sent with other options
		// after the earlier run died: its transfer is cancelled (what it
		// created removed, its lease freed) before this one starts,
		// rather than left to hold the destination.
		if err := cancelEarlier(ctx, store, q, pcfg, dest.Bucket, prev.tid, o.Stderr); err != nil {
			return err
		}
	}
	// cp's own watch on the done topic, so that an interrupted transfer's
	// end is seen too.
	w, err := waiter.New(ctx, q, pcfg.PubSub.DoneTopic, tid)
	if err != nil {
		return err
	}
	err = submit.RunOn(sctx, &pcfg, o, clients)
	if cause := context.Cause(sctx); err != nil && ctx.Err() == nil && cause != nil && !errors.Is(cause, context.Canceled) {
		err = fmt.Errorf("%w (%v)", err, cause)
	}
	var ended *submit.EndedError
	var input *producer.InputError
	if err == nil || errors.As(err, &ended) || errors.As(err, &input) {
		j.remove() // ended (its done event seen), or never started
		return err
	}
	// Interrupted, or the producer failed (it told the merger so): the
	// transfer is cancelled if it still runs, and its end awaited, so
	// that nothing it staged is left.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), interruptGrace)
	defer cancel()
	var rep *producer.ReportedError
	reported := errors.As(err, &rep) // its end comes even if nothing is left to find
	if ctx.Err() != nil {
		err = errInterrupted
	}
	return settle(cctx, err, o.Stderr, store, q.Publisher(pcfg.PubSub.ControlTopic), w, dest.Bucket, tid, pcfg.KeyDir, j, reported)
}

// errInterrupted is what an interrupted cp says (Ctrl-C, SIGTERM).
var errInterrupted = errors.New("interrupted")

// quietOnTerminal is the log level: a command's user wants its progress
// and its result, not the services' info logs, unless FERRY_LOG_LEVEL asks
// for them.
func quietOnTerminal(level string, _ submit.Options) string {
	if _, set := os.LookupEnv("FERRY_LOG_LEVEL"); !set && level == "info" {
		return "warn"
	}
	return level
}

// publisher sends one message and returns once it is stored.
type publisher interface {
	Publish(ctx context.Context, data []byte, attrs map[string]string) error
}

// settle cancels transfer tid, which stopped short of its end because of
// cause, with the end key this process saved when it started it, and waits
// for the merger to end it; then it says what was done. It always returns
// an error: the copy did not complete.
//
// reported says the producer told the merger of its own failure: then the
// transfer's end is awaited even where nothing of it is found any more
// (the merger may have removed its staging before its done marker).
func settle(ctx context.Context, cause error, stderr io.Writer, store *gcs.Store, control publisher, w *waiter.Waiter, bucket, tid, keyDir string, j *journal,
	reported bool) error {
	stopped := fmt.Errorf("transfer %s did not complete: %w", tid, cause)
	t, err := transfers.Status(ctx, store, bucket, tid)
	if errors.Is(err, transfers.ErrNotFound) && !reported {
		j.remove()
		return fmt.Errorf("%w; nothing was sent", stopped)
	}
	if err == nil && !t.Ended() {
		if key, kerr := endKey(keyDir, tid); kerr == nil {
			_, err = transfers.Cancel(ctx, store, control, bucket, tid, key)
		} else {
			err = kerr
		}
	}
	// Ended meanwhile, or gone between the two looks (its own failure,
	// under way at the interrupt, removed its staging): either way its
	// done event is coming, and waiting for it says how it ended.
	if err != nil && !errors.Is(err, transfers.ErrEnded) && !errors.Is(err, transfers.ErrNotFound) {
		return fmt.Errorf("%w; cancelling it: %v; run the same command again to finish it", stopped, err)
	}
	done, err := w.Wait(ctx)
	if err != nil {
		return fmt.Errorf("%w, and it did not end within %s (%v); run the same command again to finish it: its staging objects stay under gs://%s/%s until then",
			stopped, interruptGrace, err, bucket, message.StagingPrefix(tid))
	}
	j.remove()
	kept := ""
	if done.Kept > 0 {
		kept = fmt.Sprintf("; %d objects it had replaced, appended to or taken over stay, whole (--json names them)", done.Kept)
	}
	fmt.Fprintf(stderr, "transfer %s ended %s: its staging objects are removed and nothing partial is left under the destination%s\n", tid, done.Status, kept)
	if errors.Is(cause, errInterrupted) {
		return stopped
	}
	return fmt.Errorf("%w (ended %s: %s)", stopped, done.Status, done.Error)
}

// cancelEarlier cancels transfer tid, which an earlier run of the same
// sources and destination with other options started and did not finish,
// with the end key that run saved, and waits for the in-process merger to
// end it.
func cancelEarlier(ctx context.Context, store *gcs.Store, q *queue.Client, pcfg config.Producer, bucket, tid string, stderr io.Writer) error {
	key, err := endKey(pcfg.KeyDir, tid)
	if err != nil {
		return fmt.Errorf("transfer %s, which an earlier run of these sources and destination started, did not end, and its end key is gone (%v): cancel it with producer cancel, or wait for FERRY_TRANSFER_TIMEOUT", tid, err)
	}
	w, err := waiter.New(ctx, q, pcfg.PubSub.DoneTopic, tid)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, interruptGrace)
	defer cancel()
	_, err = transfers.Cancel(cctx, store, q.Publisher(pcfg.PubSub.ControlTopic), bucket, tid, key)
	if errors.Is(err, transfers.ErrNotFound) || errors.Is(err, transfers.ErrEnded) {
		return nil // nothing of it is in the bucket, or it ended meanwhile
	}
	if err != nil && !errors.Is(err, transfers.ErrEnded) {
		return fmt.Errorf("cancelling transfer %s, which an earlier run of these sources and destination started with other options: %w", tid, err)
	}
	done, err := w.Wait(cctx)
	if err != nil {
		return fmt.Errorf("transfer %s, which an earlier run of these sources and destination started with other options, did not end within %s of its cancel: %w", tid, interruptGrace, err)
	}
	kept := ""
	if done.Kept > 0 {
		kept = fmt.Sprintf("; %d objects it had replaced, appended to or taken over stay", done.Kept)
	}
	fmt.Fprintf(stderr, "transfer %s, which an earlier run of these sources and destination started with other options and did not finish, is cancelled: what it had staged and created is removed%s\n", tid, kept)
	return nil
}

// endKey is the end key submit saved for transfer tid.
func endKey(keyDir, tid string) (string, error) {
	dir, err := transfers.KeyDir(keyDir)
	if err != nil {
		return "", err
	}
	return transfers.LoadKey(dir + string(os.PathSeparator) + tid)
}
