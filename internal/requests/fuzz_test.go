package requests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/producer"
	"github.com/ferry-dev/ferry/internal/queue"
	"github.com/ferry-dev/ferry/internal/teststack"
)

// FuzzRequestsHandle feeds arbitrary request messages to producer serve's
// handler, over a real producer with a spool directory and a store that
// keeps nothing. The source root holds a file and a link to a secret beside
// the root. Whatever arrives:
//   - Handle returns (the message is acked or nacked), without panicking;
//   - the secret's bytes appear in no chunk the producer sent, inline or
//     spooled, whatever codec the request chose: nothing outside
//     FERRY_SOURCE_ROOTS is read into a transfer;
//   - the secret and its directory are untouched;
//   - a request that names a bucket FERRY_BUCKETS does not list fails
//     permanently and sends no chunk.
func FuzzRequestsHandle(f *testing.F) {
	base := f.TempDir()
	root := filepath.Join(base, "exports")
	spool := filepath.Join(base, "spool")
	for _, d := range []string{root, spool} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			f.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "ok.csv"), []byte("a,b\n1,2\n"), 0o644); err != nil {
		f.Fatal(err)
	}
	keep := teststack.NewSentinel(f, base)
	secret, err := os.ReadFile(keep.Path)
	if err != nil {
		f.Fatal(err)
	}
	if err := os.Symlink(keep.Path, filepath.Join(root, "link.txt")); err != nil {
		f.Fatal(err)
	}

	req := func(src, bucket, extra string) []byte {
		return fmt.Appendf(nil, `{"v":1,"sources":[%q],"destination":"gs://%s/p"%s}`, src, bucket, extra)
	}
	f.Add(req(filepath.Join(root, "ok.csv"), "landing", ""))
	f.Add(req(root, "landing", `,"codec":"none"`))
	f.Add(req(root+"/../sentinel.txt", "landing", `,"codec":"none"`))
	f.Add(req(keep.Path, "landing", `,"codec":"gzip"`))
	f.Add(req(filepath.Join(root, "link.txt"), "landing", ""))
	f.Add(req(filepath.Join(root, "ok.csv"), "other", ""))
	f.Add(req(base, "landing", `,"codec":"none","chunk_size":65536`))
	f.Add([]byte(`{"v":1,"sources":"x"}`))

	f.Fuzz(func(t *testing.T, data []byte) {
		chunks, done := &teststack.Recorder{}, &teststack.Recorder{}
		p := producer.New(producer.Options{Store: memStore{}, Chunks: chunks, Events: &teststack.Recorder{}, SpoolDir: spool,
			Buckets: []string{"landing"}, FailGrace: time.Millisecond})
		s := New(p, done, Options{Defaults: Defaults{Codec: codec.Zstd, ChunkSize: 1 << 20}, SourceRoots: []string{root}, Buckets: []string{"landing"}})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		returned := make(chan error, 1)
		go func() { returned <- s.Handle(ctx, queue.Message{ID: "fuzz", Data: data}) }()
		var herr error
		select {
		case herr = <-returned:
		case <-time.After(time.Minute): // its context ends after 20s
			t.Fatalf("Handle did not return a minute after its 20s deadline: the request would be neither acked nor nacked: %q", data)
		}

		for _, m := range chunks.Messages() {
			c, inline, err := message.DecodeChunk(m.Data)
			if err != nil {
				t.Fatalf("the producer sent a chunk that does not decode: %v", err)
			}
			if c.Bucket != "landing" {
				t.Fatalf("a chunk for bucket %q, which FERRY_BUCKETS does not list", c.Bucket)
			}
			payload := inline
			if c.Spool != "" {
				if payload, err = os.ReadFile(filepath.Join(spool, c.Spool)); err != nil {
					t.Fatalf("spool file %s of a sent chunk: %v", c.Spool, err)
				}
			}
			if raw := decoded(t, codec.Codec(c.Codec), payload); bytes.Contains(raw, secret) {
				t.Fatalf("the secret outside FERRY_SOURCE_ROOTS was read into a chunk of %q", data)
			}
		}
		var r message.Request
		if message.Decode(data, &r) == nil && !strings.HasPrefix(r.Destination, "gs://landing/") {
			if herr == nil || !errors.Is(herr, queue.ErrPermanent) || len(chunks.Messages()) > 0 {
				t.Fatalf("request for %q: Handle = %v, %d chunks; want a permanent error and none", r.Destination, herr, len(chunks.Messages()))
			}
		}
		keep.Check(t)
		entries, _ := os.ReadDir(spool)
		for _, e := range entries {
			_ = os.Remove(filepath.Join(spool, e.Name())) // no worker takes them
		}
	})
}

// decoded is payload decompressed as c, or payload itself when it does not
// decode so.
func decoded(t *testing.T, c codec.Codec, payload []byte) []byte {
	t.Helper()
	r, err := codec.NewReader(c, bytes.NewReader(payload))
	if err != nil {
		return payload
	}
	defer r.Close()
	raw, err := io.ReadAll(r)
	if err != nil {
		return payload
	}
	return raw
}
