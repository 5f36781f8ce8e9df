// Package submit is `producer submit`: it connects to Pub/Sub and GCS, runs
// one transfer request through the producer, prints the transfer id once the
// transfer has started, draws a progress bar on a terminal and, when asked,
// waits for the done event and reports it. cmd/producer only parses the
// command line into Options.
package submit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/producer"
	"github.com/ferry-dev/ferry/internal/result"
	"github.com/ferry-dev/ferry/internal/setup"
	"github.com/ferry-dev/ferry/internal/transfers"
	"github.com/ferry-dev/ferry/internal/waiter"
)

// Options are one submit.
type Options struct {
	// Request is the transfer, checked (producer.Validate) and with its
	// TransferID set.
	Request producer.Request
	// Wait blocks until the done event; JSON then prints it on Stdout.
	Wait, JSON bool
	// DryRun prints what would be sent and skipped (as JSON lines with
	// JSON) and sends nothing.
	DryRun bool
	// Timeout bounds everything Run does, network calls included; 0: no
	// limit.
	Timeout time.Duration
	// MaxRate bounds the bytes per second of the chunk messages published
	// (--max-rate, FERRY_MAX_RATE).
	MaxRate int64
	// Version is ferry's, recorded in the manifest; ID names this producer.
	Version, ID string
	// Stdout gets the transfer id, the progress bar and the done event;
	// Stderr the logs and the summary line.
	Stdout, Stderr io.Writer
	// ProgressEvery, when set, writes a progress line to Stderr this often
	// while Wait waits, where Stdout is no terminal (ferry cp: a minute).
	ProgressEvery time.Duration
}

// Run submits o.Request with the configuration cfg. It returns an error when
// the transfer could not start or, with Wait, did not end ok; the error
// says what Run was doing and which endpoint it talked to.
func Run(ctx context.Context, cfg *config.Producer, o Options) error {
	return RunOn(ctx, cfg, o, nil)
}

// RunOn is Run over clients that the caller opened and closes: ferry cp's
// GCS and in-process transport, on which its own workers and merger
// receive. With clients nil it connects to what cfg names, as Run does.
func RunOn(ctx context.Context, cfg *config.Producer, o Options, clients *setup.Clients) error {
	req := o.Request
	// Timeout bounds everything from here on, network calls included.
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	stdout := o.Stdout
	// On a terminal a progress bar replaces the info logs; elsewhere the
	// command is silent but for its result.
	showBar := logging.IsTerminal(stdout) && !o.JSON
	logLevel := cfg.Log.Level
	if showBar && logLevel == "info" {
		logLevel = "warn"
	}
	log := logging.New(o.Stderr, logLevel, cfg.Log.Format)
	emu := cfg.Emulators
	st := &step{timeout: o.Timeout}
	queueAt := emu.PubSubEndpoint()
	if clients != nil {
		queueAt = clients.Queue.Endpoint()
	} else {
		st.set("connecting to %s and %s for %s", emu.GCSEndpoint(), queueAt, req.Destination)
		c, err := setup.Connect(ctx, cfg.PubSub.Project, emu, log)
		if err != nil {
			return st.fail(ctx, err)
		}
		defer c.Close()
		clients = c
	}
	store, q := clients.Store, clients.Queue
	var err error
	cleanup := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	}

	if o.DryRun {
		po := producer.ConfigOptions(cfg)
		po.Store, po.ID, po.Log, po.Version = store, o.ID, log, o.Version
		st.set("checking destination %s on %s", req.Destination, emu.GCSEndpoint())
		d, err := producer.New(po).DryRun(ctx, req)
		if err != nil {
			return st.fail(ctx, err)
		}
		return PrintDryRun(stdout, d, o.JSON)
	}
	// byMarker: no subscriptions at all (FERRY_SUBMIT_WAIT=marker); the
	// wait polls the done marker and the bar shows the producer's side.
	byMarker := cfg.SubmitWait == "marker"
	var w *waiter.Waiter
	if o.Wait && !byMarker {
		// Subscribe before the transfer starts, so its done event cannot
		// be missed.
		st.set("subscribing to topic %s on %s", cfg.PubSub.DoneTopic, queueAt)
		if w, err = waiter.New(ctx, q, cfg.PubSub.DoneTopic, req.TransferID); err != nil {
			return st.fail(ctx, err)
		}
		defer func() {
			cctx, cancel := cleanup()
			defer cancel()
			_ = w.Close(cctx)
		}()
	}
	var bar *progressBar
	var out sync.Mutex // the id line and the bar share stdout
	po := producer.ConfigOptions(cfg)
	po.Store, po.Chunks, po.Events, po.ID, po.Log = store, q.Publisher(cfg.PubSub.ChunksTopic), q.Publisher(cfg.PubSub.ControlTopic), o.ID, log
	po.Version, po.MaxRate = o.Version, o.MaxRate
	var walk *walkLine
	if showBar {
		walk = startWalkLine(stdout, &out)
		defer walk.stop()
		req.Selection.Found = walk.found
	}
	po.Started = func(id string) {
		if walk != nil {
			walk.stop()
		}
		out.Lock()
		fmt.Fprintln(stdout, id)
		out.Unlock()
		st.set("sending the chunks of transfer %s to topic %s on %s", id, cfg.PubSub.ChunksTopic, queueAt)
		if bar != nil {
			bar.begin()
		}
	}
	keyDir, err := transfers.KeyDir(cfg.KeyDir)
	if err != nil {
		return st.fail(ctx, err)
	}
	po.EndKey = func(id, key string) {
		// Kept for producer cancel; without it only an operator can
		// cancel this transfer.
		if err := transfers.SaveKey(keyDir, id, key); err != nil {
			log.Warn("could not keep the end key; producer cancel --operator can still end the transfer", "transfer_id", id, "err", err)
		}
	}
	p := producer.New(po)
	if showBar || (o.Wait && o.ProgressEvery > 0) {
		events := cfg.PubSub.EventsTopic
		if byMarker {
			events = ""
		}
		st.set("subscribing to topic %s on %s", cfg.PubSub.EventsTopic, queueAt)
		w, every := stdout, 200*time.Millisecond
		if !showBar { // a line every ProgressEvery on stderr, as a log
			w, every = o.Stderr, o.ProgressEvery
		}
		if bar, err = startProgress(ctx, q, events, req.TransferID, p, w, &out); err != nil {
			return st.fail(ctx, err)
		}
		bar.every, bar.lines = every, !showBar
		defer bar.stop(false)
	}
	st.set("checking destination %s on %s", req.Destination, emu.GCSEndpoint())
	man, err := p.Submit(ctx, req)
	var already *producer.AlreadyDoneError
	if errors.As(err, &already) {
		// The same idempotency key: report the transfer that ran.
		fmt.Fprintln(stdout, req.TransferID)
		log.Info("transfer already ended; not started again", "transfer_id", req.TransferID, "status", already.Done.Status)
		return Report(stdout, o.Stderr, already.Done, o.JSON)
	}
	if err != nil {
		return st.fail(ctx, err)
	}
	raw := man.Totals.Bytes
	log.Info("all chunks published", "transfer_id", man.TransferID, "files", man.Totals.Files, "skipped", man.Totals.Skipped, "bytes", raw,
		"compress_ms", man.CompressMS, "compress_mbps", fmt.Sprintf("%.1f", result.MBps(raw, man.CompressMS)))
	if !o.Wait {
		return nil
	}
	var done message.Done
	if byMarker {
		st.set("waiting for the done marker of transfer %s in gs://%s/%s (FERRY_SUBMIT_WAIT=marker)", req.TransferID, man.Bucket, message.DoneMarker(req.TransferID))
		done, err = waiter.NewMarker(store, man.Bucket, req.TransferID).Wait(ctx)
	} else {
		st.set("waiting for the done event of transfer %s on topic %s (%s)", req.TransferID, cfg.PubSub.DoneTopic, queueAt)
		done, err = w.Wait(ctx)
	}
	if err != nil {
		return st.fail(ctx, err)
	}
	if bar != nil {
		bar.stop(done.Status == message.StatusOK)
	}
	return Report(stdout, o.Stderr, done, o.JSON)
}

// step is what the command is doing, so an error says where it was and which
// endpoint it was talking to.
type step struct {
	mu      sync.Mutex
	what    string
	timeout time.Duration
}

func (s *step) set(format string, a ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.what = fmt.Sprintf(format, a...)
}

// fail wraps err with the step; an input error is already clear alone.
func (s *step) fail(ctx context.Context, err error) error {
	var input *producer.InputError
	if errors.As(err, &input) {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timeout > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("gave up after --timeout %s while %s: %w", s.timeout, s.what, err)
	}
	var source *producer.SourceError
	if errors.As(err, &source) {
		return fmt.Errorf("reading the sources: %w", err) // the file's error, not the transport's
	}
	return fmt.Errorf("%s: %w", s.what, err)
}

// EndedError is a transfer the fleet ended, but not ok: its done event
// says why.
type EndedError struct{ Done message.Done }

func (e *EndedError) Error() string {
	return fmt.Sprintf("transfer %s %s: %s", e.Done.TransferID, e.Done.Status, Printable(e.Done.Error))
}

// Printable is s, text that arrived in a message, fit for a terminal:
// control characters (escape sequences, a carriage return that would
// overwrite the line) shown escaped, as %q shows them, and at most
// message.MaxErrorBytes of it.
func Printable(s string) string {
	s = message.Truncate(s, message.MaxErrorBytes)
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Report prints a done event (as JSON on stdout when asJSON, and a summary
// line on stderr) and turns a transfer that did not end ok into an error.
func Report(stdout, stderr io.Writer, done message.Done, asJSON bool) error {
	if asJSON {
		b, _ := json.MarshalIndent(done, "", "  ")
		fmt.Fprintln(stdout, string(b))
	}
	if done.RowError != "" {
		fmt.Fprintf(stderr, "warning: transfer %s has no benchmark row: %s\n", done.TransferID, Printable(done.RowError))
	}
	if done.Status != message.StatusOK {
		return &EndedError{Done: done}
	}
	skipped := ""
	if done.FilesSkipped > 0 {
		skipped = fmt.Sprintf(" (%s skipped)", result.Count(done.FilesSkipped, "file"))
	}
	if done.Appended > 0 || done.FilesConverted > 0 {
		// The objects' bytes are not what moved: say what did.
		fmt.Fprintf(stderr, "transfer %s ok in %s: %s; %s, %s now stored%s\n", done.TransferID, result.FormatMS(done.Timings.Total),
			transfers.MovedOf(done), result.Count(done.Files, "object"), result.FormatBytes(float64(done.Bytes)), skipped)
		return nil
	}
	size := ""
	if done.Files > 0 {
		size = ", " + result.FormatBytes(float64(done.Bytes))
	}
	fmt.Fprintf(stderr, "transfer %s ok: %s%s in %s%s\n", done.TransferID, result.Count(done.Files, "object"),
		size, result.FormatMS(done.Timings.Total), skipped)
	return nil
}

// HostID names this process in manifests: host name and process id.
func HostID() string {
	h, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", h, os.Getpid())
}
