// Package metrics holds ferry's Prometheus metrics and the small HTTP server
// every service runs for operators: /metrics, /healthz (the process is alive:
// the instance group's autohealing) and /readyz (it is receiving, and the
// backends it needs answer). Metric names are stable: dashboards and alerts may rely on them.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/net/netutil"
)

// Registry holds ferry's metrics and the Go runtime's.
var Registry = prometheus.NewRegistry()

var (
	// BytesRead counts raw source bytes the producer read.
	BytesRead = counter("ferry_bytes_read_total", "Raw source bytes read by the producer.")
	// BytesCompressed counts compressed bytes the producer wrote out.
	BytesCompressed = counter("ferry_bytes_compressed_total", "Compressed (wire) bytes the producer spooled or inlined.")
	// ChunksPublished counts chunk messages published.
	ChunksPublished = counter("ferry_chunks_published_total", "Chunk messages published by the producer.")
	// BytesUploaded counts wire bytes workers stored in GCS.
	BytesUploaded = counter("ferry_bytes_uploaded_total", "Wire bytes uploaded to GCS by workers.")
	// Uploads counts chunk messages handled by workers, by result: ok,
	// duplicate (already present), failed (permanent), retry (nacked).
	Uploads = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ferry_uploads_total",
		Help: "Chunk messages handled by workers, by result (ok, duplicate, failed, retry)."}, []string{"result"})
	// Redeliveries counts chunk messages received more than once.
	Redeliveries = counter("ferry_redeliveries_total", "Chunk messages received on a second or later delivery attempt.")
	// UploadSeconds is the latency of chunk uploads.
	UploadSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ferry_upload_seconds",
		Help: "Time to upload and verify one chunk.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)})
	// InFlight is the work a service holds right now, by kind: uploads
	// (worker), transfers (producer), events (merger).
	InFlight = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ferry_in_flight",
		Help: "Work in progress, by kind (uploads, transfers, events)."}, []string{"kind"})
	// Composes counts compose calls, by result (ok, error).
	Composes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ferry_compose_operations_total",
		Help: "GCS compose calls made by the merger, by result (ok, error)."}, []string{"result"})
	// Transfers counts finished transfers, by status (ok, failed).
	Transfers = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ferry_transfers_total",
		Help: "Transfers finished by the merger, by status (ok, failed)."}, []string{"status"})
	// Dropped counts calls to GCS that got no answer (a connection reset,
	// refused or timed out) and were sent again, being safe to.
	Dropped = counter("ferry_gcs_dropped_total", "Calls to GCS that got no answer (reset, refused, timed out) and were sent again, being safe to repeat.")
	// RowErrors counts transfers that ended without their benchmark row:
	// the sink refused it every time it was tried.
	RowErrors = counter("ferry_row_errors_total", "Transfers that ended without their benchmark row: the results file or BigQuery's staging refused it.")
	// Throttled counts calls GCS answered 429 or 503 (slow down).
	Throttled = counter("ferry_gcs_throttled_total", "Calls to GCS answered 429 or 503: it asked for fewer writes.")
	// WriteRateLimit is the calls a second this process allows itself
	// since GCS last pushed back; 0 while unpaced.
	WriteRateLimit = prometheus.NewGauge(prometheus.GaugeOpts{Name: "ferry_gcs_write_rate_limit",
		Help: "Calls per second to GCS this process allows itself since GCS pushed back (additive increase, multiplicative decrease); 0 while unpaced."})
	// Unproven counts messages dropped because their transfer's key
	// object did not prove them, by type: end events on the control topic
	// (the merger) and chunk messages (the workers, type "chunk").
	Unproven = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ferry_unproven_events_total",
		Help: "Messages dropped unproven: end events (sealed, failed, cancel) no end key of the transfer proved, at the merger; chunk messages (chunk) without the transfer's chunk key, at the workers."}, []string{"type"})
)

func counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

func init() {
	Registry.MustRegister(BytesRead, BytesCompressed, ChunksPublished, BytesUploaded, Uploads, Redeliveries,
		UploadSeconds, InFlight, Composes, Transfers, Unproven, Throttled, WriteRateLimit, RowErrors, Dropped,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, r := range []string{"ok", "duplicate", "failed", "retry"} {
		Uploads.WithLabelValues(r)
	}
	for _, r := range []string{"ok", "error"} {
		Composes.WithLabelValues(r)
	}
	for _, s := range []string{"ok", "failed"} {
		Transfers.WithLabelValues(s)
	}
}

// Health is what /healthz and /readyz report. It is safe for concurrent use.
type Health struct {
	ready    atomic.Bool
	stopping atomic.Bool

	mu   sync.Mutex
	down map[string]string // backend or problem → why /readyz answers 503
}

// Backend records whether backend (say "pubsub", "gcs") answers: err is nil
// when its last call got an answer. While a backend does not, /readyz
// answers 503 naming it and err. It reports whether the backend's state
// changed, for a log line.
func (h *Health) Backend(backend string, err error) (changed bool) {
	return h.set(backend, " unreachable: ", err)
}

// Problem records a reason (err not nil) for /readyz to answer 503 under
// name, or its end (nil), as Backend does for a backend: say, requests
// that stopped making progress.
func (h *Health) Problem(name string, err error) (changed bool) { return h.set(name, ": ", err) }

func (h *Health) set(name, sep string, err error) (changed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, wasDown := h.down[name]
	if err == nil {
		delete(h.down, name)
		return wasDown
	}
	if h.down == nil {
		h.down = map[string]string{}
	}
	h.down[name] = sep + err.Error()
	return !wasDown
}

// unreachable lists the backends that do not answer, and why.
func (h *Health) unreachable() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	names := make([]string, 0, len(h.down))
	for n := range h.down {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%s%s\n", n, h.down[n])
	}
	return b.String()
}

// SetReady marks the service ready (connected and receiving) or not.
func (h *Health) SetReady(v bool) { h.ready.Store(v) }

// SetStopping marks the service as shutting down: not ready any more, still
// healthy (it is finishing work, not broken).
func (h *Health) SetStopping() { h.stopping.Store(true) }

// Handler serves /metrics, /healthz and /readyz.
func (h *Health) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		down := h.unreachable()
		switch {
		case h.stopping.Load():
			http.Error(w, "stopping", http.StatusServiceUnavailable)
		case down != "":
			http.Error(w, strings.TrimSuffix(down, "\n"), http.StatusServiceUnavailable)
		case !h.ready.Load():
			http.Error(w, "not ready", http.StatusServiceUnavailable)
		default:
			_, _ = w.Write([]byte("ready\n"))
		}
	})
	return mux
}

// maxConns bounds the connections the health and metrics server holds.
const maxConns = 32

// Serve listens on addr (empty: do nothing) and serves h until ctx ends. It
// returns the address it listens on, for logs and tests.
func Serve(ctx context.Context, addr string, h *Health, log *slog.Logger) (string, error) {
	if addr == "" {
		return "", nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	// A scraper or a health check needs a few connections: idle ones
	// are closed, slow ones time out, and at most maxConns are held, so
	// that no client can take the descriptors the transfers need.
	ln = netutil.LimitListener(ln, maxConns)
	srv := &http.Server{Handler: h.Handler(), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 30 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && log != nil {
			log.Error("metrics server", "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	return ln.Addr().String(), nil
}

// Start serves /metrics, /healthz and /readyz on addr for a service, logs
// where, and marks the service stopping when ctx ends. Call SetReady once
// the service receives.
func Start(ctx context.Context, addr string, log *slog.Logger) (*Health, error) {
	h := &Health{}
	a, err := Serve(ctx, addr, h, log)
	if err != nil {
		return nil, fmt.Errorf("FERRY_HTTP_ADDR=%s: %w", addr, err)
	}
	if a != "" && log != nil {
		log.Info("serving /metrics, /healthz and /readyz", "addr", a)
	}
	context.AfterFunc(ctx, h.SetStopping)
	return h, nil
}
