package producer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/plan"
	"github.com/ferry-dev/ferry/internal/table"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// A converter's column writers grow with the table's width, not with the
// part: a table whose one converter does not fit in the producer's budget
// is refused before anything is written, naming the source, its columns
// and the budget it needs; the same table converts under that budget.
func TestATableTooWideForTheBudgetIsRefusedUpFrontNamingItsWidth(t *testing.T) {
	const bucket = "p-wide"
	gs := teststack.Bucket(t, bucket)
	const columns = 10_000
	src := filepath.Join(t.TempDir(), "wide.csv")
	var b strings.Builder
	for i := range columns {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "c%d", i)
	}
	for r := range 3 {
		b.WriteByte('\n')
		for i := range columns {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%d", r+i)
		}
	}
	b.WriteByte('\n')
	testutil.OK(t, os.WriteFile(src, []byte(b.String()), 0o644))
	need := table.ConverterMemory(columns) + 1<<20 // and two parts of a few records
	if need < 256<<20 {
		t.Fatalf("a converter of %d columns is counted as %d bytes: less than the default budget", columns, need)
	}
	for _, tc := range []struct {
		memory  int64
		refused bool
	}{{256 << 20, true}, {need, false}} {
		p := New(Options{Store: gs, Chunks: &teststack.Recorder{}, Events: &teststack.Recorder{}, SpoolDir: t.TempDir(), Concurrency: 1, MemoryLimit: tc.memory})
		dest := fmt.Sprintf("gs://%s/w%d/", bucket, tc.memory)
		m, err := p.Submit(context.Background(), Request{Sources: []string{src}, Destination: dest, Codec: codec.Zstd, ChunkSize: 64 << 10, Convert: &plan.Convert{}})
		if !tc.refused {
			testutil.OK(t, err)
			if len(m.Files) == 0 {
				t.Errorf("at %d bytes of budget: no part sent", tc.memory)
			}
			continue
		}
		var in *InputError
		if !errors.As(err, &in) {
			t.Fatalf("at %d bytes of budget: Submit = %v, want an input error", tc.memory, err)
		}
		for _, want := range []string{"source " + src, "its 10000 columns", "FERRY_PRODUCER_MEMORY to at least", "FERRY_CP_MEMORY"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		// Refused before its lease: nothing in the bucket.
		testutil.OK(t, gs.List(context.Background(), bucket, "", func(a gcs.Attrs) error {
			t.Errorf("a refused transfer left %s", a.Name)
			return nil
		}))
	}
}
