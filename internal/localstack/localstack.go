// Package localstack runs ferry's embedded default on one machine: the Pub/Sub
// emulator (the Java one from google-cloud-cli, or the in-process pstest
// server where it is missing), fake-gcs-server on loopback, and the topics,
// subscriptions, dead-letter topics and bucket ferry needs. The binaries find
// them through PUBSUB_EMULATOR_HOST and STORAGE_EMULATOR_HOST, the client
// libraries' own conventions, so they run against Google Cloud unchanged.
package localstack

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/queue"
)

// PubSub is a running Pub/Sub emulator.
type PubSub struct {
	// Host is the host:port to put in PUBSUB_EMULATOR_HOST.
	Host string
	// Kind is "java" or "pstest".
	Kind string
	stop func()
}

// Stop ends the emulator.
func (p *PubSub) Stop() { p.stop() }

// PubSubOptions choose the emulator.
type PubSubOptions struct {
	// Kind is "java", "pstest" or "" (java when gcloud has the component,
	// else pstest).
	Kind string
	// Dir holds the Java emulator's data and log.
	Dir string
	Log *slog.Logger
}

// StartPubSub starts an emulator on a free loopback port and waits until it
// answers.
func StartPubSub(ctx context.Context, o PubSubOptions) (*PubSub, error) {
	log := logging.OrDiscard(o.Log)
	switch o.Kind {
	case "java":
		return startJava(ctx, o.Dir)
	case "pstest":
		return startPstest(), nil
	case "":
		p, err := startJava(ctx, o.Dir)
		if err == nil {
			return p, nil
		}
		log.Warn("Java Pub/Sub emulator unavailable; using the slower in-process pstest server", "err", err)
		return startPstest(), nil
	}
	return nil, fmt.Errorf("pubsub emulator kind %q: want java, pstest or empty", o.Kind)
}

func startPstest() *PubSub {
	// Chunk messages stay far below pstest's 4 MiB gRPC limit: large
	// chunks travel through the spool, not inline.
	srv := pstest.NewServerWithAddress("127.0.0.1:0")
	return &PubSub{Host: srv.Addr, Kind: "pstest", stop: func() { _ = srv.Close() }}
}

func startJava(ctx context.Context, dir string) (*PubSub, error) {
	gcloud, err := exec.LookPath("gcloud")
	if err != nil {
		return nil, fmt.Errorf("gcloud not on PATH: %w", err)
	}
	if dir == "" {
		dir, err = os.MkdirTemp("", "ferry-pubsub-")
		if err != nil {
			return nil, err
		}
	}
	dataDir := filepath.Join(dir, "data")
	if err := os.MkdirAll(dataDir, 0o755); err != nil { // the emulator needs it to exist
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	host := fmt.Sprintf("127.0.0.1:%d", port)
	logPath := filepath.Join(dir, "pubsub-emulator.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	lineR, lineW, err := os.Pipe()
	if err != nil {
		logFile.Close()
		return nil, err
	}
	cmd := exec.Command("/bin/sh", "-c", lifeline, "sh", gcloud, "beta", "emulators", "pubsub", "start",
		"--host-port="+host, "--data-dir="+dataDir, "--project=ferry-local", "--quiet", "--verbosity=warning")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.ExtraFiles = []*os.File{lineR}
	// Its own process group: gcloud starts java as a child, and both must go.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	lineR.Close()
	if err != nil {
		lineW.Close()
		logFile.Close()
		return nil, fmt.Errorf("start %s under /bin/sh: %w", gcloud, err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); logFile.Close(); close(exited) }()
	stop := func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		lineW.Close()
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := probe(ctx, host); err == nil {
			return &PubSub{Host: host, Kind: "java", stop: stop}, nil
		}
		select {
		case <-exited:
			lineW.Close()
			b, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("pubsub emulator exited (%v): %s", waitErr, tail(string(b), 800))
		case <-ctx.Done():
			stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			b, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("pubsub emulator did not answer on %s within 60s: %s", host, tail(string(b), 800))
		}
	}
}

// lifeline is the shell the Java emulator starts under. It leaves a
// watcher in the background and becomes gcloud (exec: same process, so
// the process group and the exit status stay gcloud's). The watcher ends
// the group, java included, when the pipe on descriptor 3 reaches its end,
// which happens when the process that started it is gone in any way: kill
// -9 of localstack, of make run or of a test binary past its deadline
// would otherwise leave the emulator running, holding its port and a
// gigabyte. ($$ is the shell's pid, gcloud's after the exec.)
const lifeline = `{ read -r _; kill -TERM -$$; } <&3 &
exec "$@" 3<&- </dev/null`

// probe succeeds once the emulator serves HTTP on host (the Java emulator
// answers "Ok" on / once it is ready).
func probe(ctx context.Context, host string) error {
	d := net.Dialer{Timeout: 200 * time.Millisecond}
	c, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.0\r\n\r\n"); err != nil {
		return err
	}
	b, _ := io.ReadAll(c)
	if !strings.Contains(string(b), "200") {
		return errors.New("not ready")
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// GCS is a running fake-gcs-server.
type GCS struct {
	// Host is the host:port to put in STORAGE_EMULATOR_HOST.
	Host string
	// TLSHost is the host:port of the same server over HTTPS, with the
	// self-signed certificate CertPEM; empty unless GCSOptions.TLS.
	TLSHost string
	CertPEM []byte
	srv     *fakestorage.Server
	shim    *shim
	servers []*http.Server
}

// Stop ends the server.
func (g *GCS) Stop() {
	for _, s := range g.servers {
		_ = s.Close()
	}
	g.srv.Stop()
}

// Stats returns what the shim in front of the server has counted; zero
// for a server started with StartGCS.
func (g *GCS) Stats() Stats {
	if g.shim == nil {
		return Stats{}
	}
	return g.shim.Stats()
}

// StartGCS starts fake-gcs-server in this process, on loopback, keeping
// objects in memory, as it comes: no shim in front of it.
func StartGCS(port uint16) (*GCS, error) {
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		Scheme: "http", Host: "127.0.0.1", Port: port,
		Writer: io.Discard,
	})
	if err != nil {
		return nil, fmt.Errorf("fake-gcs-server: %w", err)
	}
	u := strings.TrimPrefix(srv.URL(), "http://")
	return &GCS{Host: u, srv: srv}, nil
}

// GCSOptions configure StartGCSWith.
type GCSOptions struct {
	// Port is the HTTP port on 127.0.0.1; 0 picks a free one.
	Port uint16
	// TLS also serves the server over HTTPS on a free port, with a
	// self-signed certificate (gsutil speaks nothing else).
	TLS bool
	// StockCompose leaves compose to fake-gcs-server instead of the shim's
	// fast path (for comparing the two).
	StockCompose bool
	// StockUploads leaves uploads to fake-gcs-server on the filesystem
	// backend too, instead of the shim's, which streams them to the file
	// (see upload).
	StockUploads bool
	// StorageRoot, when set, keeps objects in this directory with
	// fake-gcs-server's filesystem backend instead of in memory. The memory
	// backend scans the whole bucket on every write, under one lock, so it
	// slows with the bucket; the filesystem backend on a tmpfs does not,
	// which is what a benchmark of ferry, not of the fake, needs. Its
	// differences from Cloud Storage are the conformance suite's.
	StorageRoot string
}

// StartGCSWith starts fake-gcs-server in this process, on loopback, keeping
// objects in memory (or under StorageRoot), behind a shim that composes
// without the fake's waste (unless StockCompose), streams uploads to the
// filesystem backend (unless StockUploads), answers an object DELETE with
// 204 as GCS does, and counts compose time and uploads (Stats, also served
// as JSON on StatsPath).
func StartGCSWith(o GCSOptions) (*GCS, error) {
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", o.Port))
	if err != nil {
		return nil, fmt.Errorf("fake-gcs-server: %w", err)
	}
	host := ln.Addr().String()
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		Scheme: "http", Host: "127.0.0.1", NoListener: true,
		ExternalURL: "http://" + host, Writer: io.Discard, StorageRoot: o.StorageRoot,
	})
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("fake-gcs-server: %w", err)
	}
	g := &GCS{Host: host, srv: srv, shim: newShim(srv, !o.StockCompose, !o.StockUploads, o.StorageRoot)}
	g.serve(ln)
	if o.TLS {
		cert, certPEM, err := SelfSignedCert()
		if err != nil {
			g.Stop()
			return nil, err
		}
		tln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			g.Stop()
			return nil, fmt.Errorf("fake-gcs-server over TLS: %w", err)
		}
		g.TLSHost, g.CertPEM = tln.Addr().String(), certPEM
		g.serve(tls.NewListener(tln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}))
	}
	return g, nil
}

func (g *GCS) serve(ln net.Listener) {
	s := &http.Server{Handler: g.shim, ReadHeaderTimeout: 30 * time.Second}
	g.servers = append(g.servers, s)
	go func() { _ = s.Serve(ln) }()
}

// CreateBucket creates bucket on the fake server.
func (g *GCS) CreateBucket(name string) {
	g.srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: name})
}

// Topology is the set of topics and subscriptions ferry needs, with a
// dead-letter topic and subscription for every subscription, so that no
// message is silently dropped.
func Topology(ps config.PubSub) ([]string, []queue.Subscription) {
	topics := []string{ps.RequestsTopic, ps.ChunksTopic, ps.EventsTopic, ps.ControlTopic, ps.DoneTopic, ps.ShardsTopic,
		ps.RequestsDeadLetter, ps.ChunksDeadLetter, ps.EventsDeadLetter, ps.ControlDeadLetter, ps.ShardsDeadLetter}
	// A short ack deadline brings a crashed worker's message back soon;
	// the client extends it for as long as a handler runs.
	subs := []queue.Subscription{
		{ID: ps.RequestsSubscription, Topic: ps.RequestsTopic, AckDeadline: 60 * time.Second, DeadLetterTopic: ps.RequestsDeadLetter, MaxAttempts: 5},
		{ID: DeadLetterSubscription(ps.RequestsDeadLetter), Topic: ps.RequestsDeadLetter, AckDeadline: 60 * time.Second},
		{ID: ps.ChunksSubscription, Topic: ps.ChunksTopic, AckDeadline: 20 * time.Second, DeadLetterTopic: ps.ChunksDeadLetter, MaxAttempts: 5},
		{ID: ps.EventsSubscription, Topic: ps.EventsTopic, AckDeadline: 20 * time.Second, DeadLetterTopic: ps.EventsDeadLetter, MaxAttempts: 10},
		{ID: DeadLetterSubscription(ps.ChunksDeadLetter), Topic: ps.ChunksDeadLetter, AckDeadline: 60 * time.Second},
		{ID: DeadLetterSubscription(ps.EventsDeadLetter), Topic: ps.EventsDeadLetter, AckDeadline: 60 * time.Second},
		{ID: ps.ControlSubscription, Topic: ps.ControlTopic, AckDeadline: 20 * time.Second, DeadLetterTopic: ps.ControlDeadLetter, MaxAttempts: 10},
		{ID: DeadLetterSubscription(ps.ControlDeadLetter), Topic: ps.ControlDeadLetter, AckDeadline: 60 * time.Second},
		// An agent killed mid-shard: its shard is claimed again once
		// the deadline passes.
		{ID: ps.ShardsSubscription, Topic: ps.ShardsTopic, AckDeadline: 20 * time.Second, DeadLetterTopic: ps.ShardsDeadLetter, MaxAttempts: 5},
		{ID: DeadLetterSubscription(ps.ShardsDeadLetter), Topic: ps.ShardsDeadLetter, AckDeadline: 60 * time.Second},
	}
	return topics, subs
}

// DoneSubscription names the subscription on the done topic that a person
// pulls done events from on the local stack (services wait for their own
// transfers on temporary subscriptions).
func DoneSubscription(topic string) string { return topic + "-sub" }

// DeadLetterSubscription names the subscription that keeps a dead-letter
// topic's messages for operators to inspect.
func DeadLetterSubscription(topic string) string { return topic + "-sub" }

// Provision creates ferry's topology on the local stack, plus a
// subscription on the done topic for people to pull done events from
// (gcloud pubsub subscriptions pull ferry-done-sub): a deployment has none,
// as nobody would drain it. It is idempotent.
func Provision(ctx context.Context, c *queue.Client, ps config.PubSub) error {
	topics, subs := Topology(ps)
	subs = append(subs, queue.Subscription{ID: DoneSubscription(ps.DoneTopic), Topic: ps.DoneTopic, AckDeadline: 60 * time.Second})
	for _, t := range topics {
		if err := c.EnsureTopic(ctx, t); err != nil {
			return err
		}
	}
	for _, s := range subs {
		if err := c.EnsureSubscription(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// Env is the environment of the binaries and of gcloud on the local stack,
// as export lines: the emulators, the project, the buckets ferry may write
// to, a free loopback port for each service's health endpoints (so several
// run side by side), and the CLOUDSDK_* overrides that point gcloud storage
// and gcloud pubsub at the emulators. Without a Pub/Sub emulator
// (pubsubHost empty) its variables are left out.
func Env(project, pubsubHost, gcsHost string, buckets []string) string {
	var b strings.Builder
	set := func(k, v string) { fmt.Fprintf(&b, "export %s=%s\n", k, v) }
	if pubsubHost != "" {
		set("PUBSUB_EMULATOR_HOST", pubsubHost)
	}
	set("STORAGE_EMULATOR_HOST", gcsHost)
	set("FERRY_PROJECT", project)
	set("FERRY_BUCKETS", strings.Join(buckets, ","))
	set("FERRY_HTTP_ADDR", "127.0.0.1:0")
	if pubsubHost != "" {
		set("CLOUDSDK_API_ENDPOINT_OVERRIDES_PUBSUB", "http://"+pubsubHost+"/")
	}
	set("CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE", "http://"+gcsHost+"/")
	set("CLOUDSDK_AUTH_DISABLE_CREDENTIALS", "true")
	set("CLOUDSDK_CORE_PROJECT", project)
	return b.String()
}
