package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The kernel-shaped link: the submitting side (ferry's producer, and the
// peers) runs in a network namespace of its own, joined to the host by a
// veth pair whose namespace end sends through a tbf qdisc at the link's
// rate, so every byte it sends — Pub/Sub's and GCS's alike — is shaped by
// the kernel. The stack stays on the host's loopback; relays on the host
// end of the pair forward the namespace's connections to it. It needs
// root (CAP_NET_ADMIN); without it, workload 3's proxy rows stand in.

// shapedNet is one namespace with its link and relays.
type shapedNet struct {
	ns, hostDev, nsDev string
	hostIP, nsIP       string
	lns                []net.Listener
	wg                 sync.WaitGroup
}

// netSeq numbers the namespaces of one bench process.
var netSeq int

// startNet makes a namespace whose traffic to the host leaves at rate
// bytes per second, and relays hostIP:port to 127.0.0.1:port for each of
// ports. Close removes it all.
func startNet(ctx context.Context, rate int64, ports []string) (*shapedNet, error) {
	netSeq++
	id := fmt.Sprintf("%d%02d", os.Getpid()%100000, netSeq%100)
	sub := (os.Getpid()*7 + netSeq) % 250
	n := &shapedNet{ns: "ferry-bench-" + id, hostDev: "fbh" + id, nsDev: "fbn" + id,
		hostIP: fmt.Sprintf("10.213.%d.1", sub), nsIP: fmt.Sprintf("10.213.%d.2", sub)}
	// A burst of 128 KiB at least: veth hands tbf whole GSO packets of up
	// to 64 KiB, which a smaller bucket would hold back for ever.
	burst := max(rate/100, 128<<10)
	steps := [][]string{
		{"ip", "netns", "add", n.ns},
		{"ip", "link", "add", n.hostDev, "type", "veth", "peer", "name", n.nsDev},
		{"ip", "link", "set", n.nsDev, "netns", n.ns},
		{"ip", "addr", "add", n.hostIP + "/30", "dev", n.hostDev},
		{"ip", "link", "set", n.hostDev, "up"},
		{"ip", "-n", n.ns, "addr", "add", n.nsIP + "/30", "dev", n.nsDev},
		{"ip", "-n", n.ns, "link", "set", n.nsDev, "up"},
		{"ip", "-n", n.ns, "link", "set", "lo", "up"},
		{"tc", "-n", n.ns, "qdisc", "add", "dev", n.nsDev, "root", "tbf", "rate", strconv.FormatInt(rate*8, 10) + "bit",
			"burst", strconv.FormatInt(burst, 10), "latency", "200ms"},
	}
	for _, s := range steps {
		if err := runCmd(ctx, s...); err != nil {
			n.Close()
			return nil, err
		}
	}
	for _, port := range ports {
		ln, err := net.Listen("tcp", net.JoinHostPort(n.hostIP, port))
		if err != nil {
			n.Close()
			return nil, fmt.Errorf("relay for port %s: %w", port, err)
		}
		n.lns = append(n.lns, ln)
		n.wg.Add(1)
		go n.relay(ln, "127.0.0.1:"+port)
	}
	return n, nil
}

func runCmd(ctx context.Context, argv ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// relay forwards every connection ln accepts to target.
func (n *shapedNet) relay(ln net.Listener, target string) {
	defer n.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer func() { _ = c.Close() }()
			up, err := net.DialTimeout("tcp", target, 10*time.Second)
			if err != nil {
				return
			}
			defer func() { _ = up.Close() }()
			done := make(chan struct{}, 2)
			pipe := func(dst, src net.Conn) {
				_, _ = io.Copy(dst, src)
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
				done <- struct{}{}
			}
			go pipe(up, c)
			go pipe(c, up)
			<-done
			<-done
		}()
	}
}

// wrap runs argv inside the namespace.
func (n *shapedNet) wrap(argv []string) []string {
	return append([]string{"ip", "netns", "exec", n.ns}, argv...)
}

// rewrite points KEY=VALUE variables that name the host's loopback at the
// host end of the link instead.
func (n *shapedNet) rewrite(vars []string) []string {
	out := make([]string, len(vars))
	for i, v := range vars {
		k, val, _ := strings.Cut(v, "=")
		if strings.HasPrefix(k, "FERRY_HTTP_ADDR") {
			out[i] = v
			continue
		}
		out[i] = k + "=" + strings.ReplaceAll(val, "127.0.0.1:", n.hostIP+":")
	}
	return out
}

// sent is how many bytes the namespace has sent over its link.
func (n *shapedNet) sent(ctx context.Context) (int64, error) {
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", n.ns, "cat", "/sys/class/net/"+n.nsDev+"/statistics/tx_bytes").Output()
	if err != nil {
		return 0, fmt.Errorf("bytes sent over %s: %w", n.nsDev, err)
	}
	return strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
}

// Close stops the relays and removes the namespace (and with it the link).
func (n *shapedNet) Close() {
	for _, ln := range n.lns {
		_ = ln.Close()
	}
	n.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = runCmd(ctx, "ip", "netns", "del", n.ns)
	_ = runCmd(ctx, "ip", "link", "del", n.hostDev) // gone with the namespace, unless it never moved
}

// errNoNetns: the kernel-shaped link cannot be made here.
var errNoNetns = errors.New("no network namespace")

// probeNet says whether a kernel-shaped link can be made, and why not.
func probeNet(ctx context.Context) error {
	n, err := startNet(ctx, 1e6, nil)
	if err != nil {
		return fmt.Errorf("%w: %v", errNoNetns, err)
	}
	n.Close()
	return nil
}
