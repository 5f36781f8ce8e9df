package producer

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/plan"
)

// An append that would give the object more components than a composite
// may have sends the file whole, and says so; one component fewer and the
// append goes ahead. (GCS reports a composite's componentCount;
// fake-gcs-server does not, so the bound is tested here.)
func TestAnAppendPastTheComponentBoundGoesWhole(t *testing.T) {
	p := filepath.Join(t.TempDir(), "grown.log")
	data := []byte(strings.Repeat("a line of a log that grows\n", 40))
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	const prefix, chunk = 1000, 16
	f := &plan.File{SourceFile: plan.SourceFile{Path: p, Rel: "grown.log", Size: st.Size(), Mod: st.ModTime().UnixNano()},
		Object: "out/grown.log", ChunkSize: chunk}
	adds := int64((len(data)-prefix+chunk-1)/chunk + 1) // the tail's chunks and a seek table
	for _, tc := range []struct {
		components int64
		want       bool
	}{{MaxComponents - adds, true}, {MaxComponents - adds + 1, false}} {
		var log bytes.Buffer
		pr := New(Options{Store: nopStore{}, Chunks: nopPublisher{}, Events: nopPublisher{}, SpoolDir: t.TempDir(),
			Log: slog.New(slog.NewTextHandler(&log, nil))})
		a := gcs.Attrs{Name: f.Object, Size: prefix, Generation: 7, ComponentCount: tc.components, Metadata: map[string]string{
			message.MetaCodec: string(codec.None), message.MetaRawSize: strconv.Itoa(prefix),
			message.MetaRawCRC32C: fmt.Sprintf("%08x", crc32c.Checksum(data[:prefix]))}}
		first, ok, err := pr.appendable(context.Background(), "b", f, a, codec.None)
		if err != nil || ok != tc.want {
			t.Fatalf("%d components: append %v, %v; want %v", tc.components, ok, err, tc.want)
		}
		said := strings.Contains(log.String(), "an append would pass the components a composite may have")
		if said == tc.want {
			t.Errorf("%d components: the log says %q", tc.components, log.String())
		}
		if ok && (first.Generation != 7 || first.RawSize != prefix) {
			t.Errorf("%d components: the object stands as chunk %+v", tc.components, first)
		}
	}
}
