// Package submit is `producer submit`: it connects to Pub/Sub and GCS, runs
// one transfer request through the producer, prints the transfer id once the
// transfer has started, draws a progress bar on a terminal and, when asked,
// waits for the done event and reports it. cmd/producer only parses the
// command line into Options.
package submit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/ferry-dev/ferry/internal/benchrow"
	"github.com/ferry-dev/ferry/internal/cli"
	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/pool"
	"github.com/ferry-dev/ferry/internal/producer"
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
// It reads in the order a submit runs: connect, (a dry run ends there)
// subscribe to the done topic, make the producer, start the progress
// display, submit, wait, report.
func RunOn(ctx context.Context, cfg *config.Producer, o Options, clients *setup.Clients) error {
	// Timeout bounds everything from here on, network calls included.
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	r := newRun(cfg, o)
	if clients == nil {
		c, err := r.connect(ctx)
		if err != nil {
			return r.st.fail(ctx, err)
		}
		defer c.Close()
		clients = c
	}
	r.clients, r.queueAt = clients, clients.Queue.Endpoint()
	if o.DryRun {
		return r.dryRun(ctx)
	}
	w, err := r.subscribeDone(ctx)
	if err != nil {
		return r.st.fail(ctx, err)
	}
	if w != nil {
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = w.Close(cctx)
		}()
	}
	p, err := r.producer()
	if r.walk != nil {
		defer r.walk.stop()
	}
	if err != nil {
		return r.st.fail(ctx, err)
	}
	if err := r.startProgress(ctx, p); err != nil {
		return r.st.fail(ctx, err)
	}
	if r.bar != nil {
		defer r.bar.stop(false)
	}
	r.st.set("checking destination %s on %s", r.req.Destination, r.cfg.Emulators.GCSEndpoint())
	man, err := p.Submit(ctx, r.req)
	var already *producer.AlreadyDoneError
	if errors.As(err, &already) {
		// The same idempotency key: report the transfer that ran.
		if !o.JSON {
			fmt.Fprintln(r.stdout, r.req.TransferID)
		}
		r.log.Info("transfer already ended; not started again", "transfer_id", r.req.TransferID, "status", already.Done.Status)
		return Report(r.stdout, o.Stderr, already.Done, o.JSON)
	}
	if err != nil {
		return r.st.fail(ctx, err)
	}
	raw := man.Totals.Bytes
	r.log.Info("all chunks published", "transfer_id", man.TransferID, "files", man.Totals.Files, "skipped", man.Totals.Skipped, "bytes", raw,
		"compress_ms", man.CompressMS, "compress_mbps", fmt.Sprintf("%.1f", benchrow.MBps(raw, man.CompressMS)))
	if !o.Wait {
		if o.JSON {
			return cli.PrintJSON(r.stdout, submitted{V: message.Version, TransferID: man.TransferID, Status: StatusSubmitted})
		}
		return nil
	}
	done, err := r.wait(ctx, w, man)
	if err != nil {
		return r.st.fail(ctx, err)
	}
	if r.bar != nil {
		r.bar.stop(done.Status == message.StatusOK)
	}
	return Report(r.stdout, o.Stderr, done, o.JSON)
}

// run is one submit's state, shared by its steps.
type run struct {
	cfg     *config.Producer
	o       Options
	req     producer.Request
	st      *step
	log     *slog.Logger
	stdout  io.Writer
	out     sync.Mutex // the id line, the walk line and the bar share stdout
	showBar bool       // on a terminal: a progress bar replaces the info logs
	// byMarker: no subscriptions at all (FERRY_SUBMIT_WAIT=marker); the
	// wait polls the done marker and the bar shows the producer's side.
	byMarker bool
	clients  *setup.Clients
	queueAt  string
	walk     *walkLine
	bar      *progressBar
}

func newRun(cfg *config.Producer, o Options) *run {
	r := &run{cfg: cfg, o: o, req: o.Request, st: &step{timeout: o.Timeout}, stdout: o.Stdout, byMarker: cfg.SubmitWait == "marker"}
	// On a terminal a progress bar replaces the info logs; elsewhere the
	// command is silent but for its result.
	r.showBar = logging.IsTerminal(r.stdout) && !o.JSON
	level := cfg.Log.Level
	if r.showBar && level == "info" {
		level = "warn"
	}
	r.log = logging.New(o.Stderr, level, cfg.Log.Format)
	return r
}

// connect opens GCS and Pub/Sub as cfg names them.
func (r *run) connect(ctx context.Context) (*setup.Clients, error) {
	emu := r.cfg.Emulators
	r.st.set("connecting to %s and %s for %s", emu.GCSEndpoint(), emu.PubSubEndpoint(), r.req.Destination)
	return setup.Connect(ctx, r.cfg.PubSub.Project, emu, r.log)
}

// dryRun prints what the request would send and skip, sending nothing.
func (r *run) dryRun(ctx context.Context) error {
	po := producer.ConfigOptions(r.cfg)
	po.Store, po.ID, po.Log, po.Version = r.clients.Store, r.o.ID, r.log, r.o.Version
	r.st.set("checking destination %s on %s", r.req.Destination, r.cfg.Emulators.GCSEndpoint())
	d, err := producer.New(po).DryRun(ctx, r.req)
	if err != nil {
		return r.st.fail(ctx, err)
	}
	return PrintDryRun(r.stdout, d, r.o.JSON)
}

// subscribeDone subscribes to the done topic before the transfer starts,
// so that its done event cannot be missed; nil when the command does not
// wait for it there.
func (r *run) subscribeDone(ctx context.Context) (*waiter.Waiter, error) {
	if !r.o.Wait || r.byMarker {
		return nil, nil
	}
	r.st.set("subscribing to topic %s on %s", r.cfg.PubSub.DoneTopic, r.queueAt)
	return waiter.New(ctx, r.clients.Queue, r.cfg.PubSub.DoneTopic, r.req.TransferID)
}

// producer makes the producer of this submit: it prints the transfer id
// once the transfer has started, and keeps its end key for producer
// cancel. On a terminal the walk line counts the files found until then.
func (r *run) producer() (*producer.Producer, error) {
	cfg, q := r.cfg, r.clients.Queue
	po := producer.ConfigOptions(cfg)
	po.Store, po.Chunks, po.Events, po.ID, po.Log = r.clients.Store, q.Publisher(cfg.PubSub.ChunksTopic), q.Publisher(cfg.PubSub.ControlTopic), r.o.ID, r.log
	po.Version, po.MaxRate = r.o.Version, r.o.MaxRate
	po.Pool = pool.NewWalker(pool.WalkerOptions{Store: r.clients.Store, Shards: q.Publisher(cfg.PubSub.ShardsTopic), Files: cfg.ShardFiles,
		Bytes: int64(cfg.ShardBytes), Log: r.log})
	if r.showBar {
		r.walk = startWalkLine(r.stdout, &r.out)
		r.req.Selection.Found = r.walk.found
	}
	po.Started = func(id string) {
		if r.walk != nil {
			r.walk.stop()
		}
		if !r.o.JSON { // with --json, stdout holds one document, at the end
			r.out.Lock()
			fmt.Fprintln(r.stdout, id)
			r.out.Unlock()
		}
		r.st.set("sending the chunks of transfer %s to topic %s on %s", id, cfg.PubSub.ChunksTopic, r.queueAt)
		if r.bar != nil {
			r.bar.begin()
		}
	}
	keyDir, err := transfers.KeyDir(cfg.KeyDir)
	if err != nil {
		return nil, err
	}
	po.EndKey = func(id, key string) {
		// Kept for producer cancel; without it only an operator can
		// cancel this transfer.
		if err := transfers.SaveKey(keyDir, id, key); err != nil {
			r.log.Warn("could not keep the end key; producer cancel --operator can still end the transfer", "transfer_id", id, "err", err)
		}
	}
	return producer.New(po), nil
}

// startProgress starts the progress display: a bar on a terminal, else,
// while the command waits, a line every ProgressEvery on stderr.
func (r *run) startProgress(ctx context.Context, p *producer.Producer) error {
	if !r.showBar && (!r.o.Wait || r.o.ProgressEvery <= 0) {
		return nil
	}
	events := r.cfg.PubSub.EventsTopic
	if r.byMarker {
		events = ""
	}
	r.st.set("subscribing to topic %s on %s", r.cfg.PubSub.EventsTopic, r.queueAt)
	w, every := r.stdout, 200*time.Millisecond
	if !r.showBar { // a line every ProgressEvery on stderr, as a log
		w, every = r.o.Stderr, r.o.ProgressEvery
	}
	bar, err := startProgress(ctx, r.clients.Queue, events, r.req.TransferID, p, w, &r.out, every, !r.showBar)
	if err != nil {
		return err
	}
	r.bar = bar
	return nil
}

// wait waits for the transfer's end: its done event on w, or its done
// marker (FERRY_SUBMIT_WAIT=marker).
func (r *run) wait(ctx context.Context, w *waiter.Waiter, man *message.Manifest) (message.Done, error) {
	tid := r.req.TransferID
	if r.byMarker {
		r.st.set("waiting for the done marker of transfer %s in gs://%s/%s (FERRY_SUBMIT_WAIT=marker)", tid, man.Bucket, message.DoneMarker(tid))
		return waiter.NewMarker(r.clients.Store, man.Bucket, tid).Wait(ctx)
	}
	r.st.set("waiting for the done event of transfer %s on topic %s (%s)", tid, r.cfg.PubSub.DoneTopic, r.queueAt)
	return w.Wait(ctx)
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

// StatusSubmitted is the status --json gives a transfer submitted without
// --wait: it runs on.
const StatusSubmitted = "submitted"

// submitted is the document --json prints for a transfer not waited for.
type submitted struct {
	V          int    `json:"v"`
	TransferID string `json:"transfer_id"`
	Status     string `json:"status"`
}

// Report prints a done event (as JSON on stdout when asJSON, and a summary
// line on stderr) and turns a transfer that did not end ok into an error.
func Report(stdout, stderr io.Writer, done message.Done, asJSON bool) error {
	if asJSON {
		if err := cli.PrintJSON(stdout, done); err != nil {
			return err
		}
	}
	if done.RowError != "" {
		fmt.Fprintf(stderr, "warning: transfer %s has no benchmark row: %s\n", done.TransferID, Printable(done.RowError))
	}
	if done.Status != message.StatusOK {
		return &EndedError{Done: done}
	}
	skipped := ""
	if done.FilesSkipped > 0 {
		skipped = fmt.Sprintf(" (%s skipped)", benchrow.Count(done.FilesSkipped, "file"))
	}
	if done.Appended > 0 || done.FilesConverted > 0 {
		// The objects' bytes are not what moved: say what did.
		fmt.Fprintf(stderr, "transfer %s ok in %s: %s; %s, %s now stored%s\n", done.TransferID, benchrow.FormatMS(done.Timings.Total),
			transfers.MovedOf(done), benchrow.Count(done.Files, "object"), benchrow.FormatBytes(float64(done.Bytes)), skipped)
		return nil
	}
	size := ""
	if done.Files > 0 {
		size = ", " + benchrow.FormatBytes(float64(done.Bytes))
	}
	fmt.Fprintf(stderr, "transfer %s ok: %s%s in %s%s\n", done.TransferID, benchrow.Count(done.Files, "object"),
		size, benchrow.FormatMS(done.Timings.Total), skipped)
	return nil
}

// HostID names this process in manifests: host name and process id.
func HostID() string {
	h, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", h, os.Getpid())
}
