package producer

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/teststack"
)

// nopStore accepts the manifest and knows every bucket: for tests and
// benchmarks of the pipeline, not of GCS.
type nopStore struct{}

func (nopStore) BucketExists(context.Context, string) error                        { return nil }
func (nopStore) List(context.Context, string, string, func(gcs.Attrs) error) error { return nil }
func (nopStore) ReadAll(context.Context, string, string) ([]byte, error)           { return nil, gcs.ErrNotFound }
func (nopStore) Attrs(context.Context, string, string) (gcs.Attrs, error) {
	return gcs.Attrs{}, gcs.ErrNotFound
}
func (nopStore) PutSmall(context.Context, string, string, []byte, bool, string) (gcs.Attrs, error) {
	return gcs.Attrs{}, nil
}
func (nopStore) Touch(context.Context, string, string, string, string) error { return nil }
func (nopStore) NewRangeReader(context.Context, string, string, int64, int64) (io.ReadCloser, error) {
	return nil, gcs.ErrNotFound
}

type nopPublisher struct{}

func (nopPublisher) Publish(context.Context, []byte, map[string]string) error { return nil }

// sent is one published chunk message, decoded, with its payload read from
// the spool when it is there.
type sent struct {
	c       message.Chunk
	payload []byte
	size    int // bytes of the message itself
}

func decodeAll(t *testing.T, rec *teststack.Recorder, spoolDir string) []sent {
	t.Helper()
	var out []sent
	for _, m := range rec.Messages() {
		c, payload, err := message.DecodeChunk(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		if c.Spool != "" {
			if payload, err = os.ReadFile(filepath.Join(spoolDir, c.Spool)); err != nil {
				t.Fatal(err)
			}
		}
		out = append(out, sent{c: c, payload: payload, size: len(m.Data)})
	}
	return out
}

// partBytes returns each part's wire bytes of a message.
func (s sent) partBytes() [][]byte {
	offs, _ := s.c.Offsets()
	out := make([][]byte, len(s.c.Parts))
	for i, p := range s.c.Parts {
		out[i] = s.payload[offs[i] : offs[i]+p.WireSize]
	}
	return out
}

func decompress(t *testing.T, c codec.Codec, wire []byte) []byte {
	t.Helper()
	r, err := codec.NewReader(c, bytes.NewReader(wire))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pipelineGoroutines lists goroutines running a pipeline stage.
func pipelineGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var left []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		for _, fn := range []string{"runFrameEncoder", "compressStage", "publishStage", "(*reader).run", "(*Producer).run", "(*Producer).pipeline"} {
			if strings.Contains(g, "internal/producer."+fn) {
				left = append(left, g)
				break
			}
		}
	}
	return left
}

// heapGrowth runs submit while it samples the heap every 5 ms, and returns
// submit's manifest and how far the heap grew above where it started.
func heapGrowth(t *testing.T, submit func() (*message.Manifest, error)) (*message.Manifest, int64) {
	t.Helper()
	var man *message.Manifest
	var err error
	grew := teststack.HeapGrowth(func() { man, err = submit() })
	if err != nil {
		t.Fatal(err)
	}
	return man, grew
}
func (nopStore) Delete(context.Context, string, string) error { return nil }

func (nopStore) Patch(context.Context, string, gcs.Attrs, map[string]string) error { return nil }
