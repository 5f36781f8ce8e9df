package bqtest

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Intercept lets a child process that talks to Google APIs the way a
// deployed binary does (HTTPS to *.googleapis.com, Application Default
// Credentials) talk to h instead, with no change to the binary. It starts an
// HTTPS proxy on loopback that accepts CONNECT only to *.googleapis.com:443,
// terminates TLS there with a certificate from a CA made for this test, and
// serves the requests with h. It returns the environment for the child:
//
//	HTTPS_PROXY                     the proxy
//	NO_PROXY                        loopback stays direct (the emulators)
//	SSL_CERT_FILE                   the test CA, the only root the child trusts
//	GOOGLE_APPLICATION_CREDENTIALS  a user credential whose token h issues (POST /token)
//
// Nothing leaves the machine: any other CONNECT is refused.
func Intercept(t testing.TB, h http.Handler) []string {
	t.Helper()
	dir := t.TempDir()
	cert, caPEM, err := mintCertificate()
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.pem")
	creds := filepath.Join(dir, "credentials.json")
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(creds, []byte(`{"type":"authorized_user","client_id":"bqtest","client_secret":"bqtest","refresh_token":"bqtest"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tunnels := &connListener{conns: make(chan net.Conn), done: make(chan struct{}), addr: ln.Addr()}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(tunnels) }()
	tlsCfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go tunnel(c, tlsCfg, tunnels)
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		_ = srv.Close()
		tunnels.close()
	})
	return []string{
		"HTTPS_PROXY=http://" + ln.Addr().String(), "https_proxy=http://" + ln.Addr().String(),
		"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost",
		"SSL_CERT_FILE=" + caFile, "GOOGLE_APPLICATION_CREDENTIALS=" + creds,
	}
}

// tunnel answers one CONNECT and hands the TLS connection inside it to the
// HTTP server.
func tunnel(c net.Conn, cfg *tls.Config, to *connListener) {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	req, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil || req.Method != http.MethodConnect || !strings.HasSuffix(req.Host, ".googleapis.com:443") {
		_, _ = c.Write([]byte("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n"))
		_ = c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	if _, err := c.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		_ = c.Close()
		return
	}
	if !to.push(tls.Server(c, cfg)) {
		_ = c.Close()
	}
}

// connListener is a net.Listener fed by tunnel.
type connListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	addr  net.Addr
}

func (l *connListener) push(c net.Conn) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, errors.New("bqtest: proxy closed")
	}
}

func (l *connListener) close()         { l.once.Do(func() { close(l.done) }) }
func (l *connListener) Close() error   { l.close(); return nil }
func (l *connListener) Addr() net.Addr { return l.addr }

// mintCertificate makes a CA and a certificate for *.googleapis.com it
// signed; it returns the certificate and the CA in PEM.
func mintCertificate() (tls.Certificate, []byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bqtest CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "googleapis.com"},
		DNSNames:  []string{"*.googleapis.com", "googleapis.com"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	return tls.Certificate{Certificate: [][]byte{leafDER, caDER}, PrivateKey: key},
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), nil
}
