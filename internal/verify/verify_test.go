package verify_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/verify"
)

func TestMain(m *testing.M) { os.Exit(teststack.MainWithGCS(m)) }

// Transfer checks every source's final object, whatever its codec, and
// counts what it checked; a missing object names its source, and an
// object whose bytes differ from its source is ErrMismatch.
func TestTransferChecksEverySourceAndStopsAtTheFirstDifference(t *testing.T) {
	const bucket = "v-transfer"
	s := teststack.Bucket(t, bucket)
	dir := t.TempDir()
	var sources []verify.Source
	var raw int64
	for i, c := range []codec.Codec{codec.Zstd, codec.Gzip, codec.None} {
		body := bytes.Repeat([]byte(strings.Repeat("row,"+string(c)+"\n", 10)), 100*(i+1))
		path := filepath.Join(dir, string(c)+".csv")
		if err := os.WriteFile(path, body, 0o644); err != nil {
			t.Fatal(err)
		}
		base := "out/" + string(c) + ".csv"
		teststack.FerryObject(t, s, bucket, base+c.Ext(), body, teststack.FerryOptions{Codec: c})
		sources = append(sources, verify.Source{Path: path, Base: base})
		raw += int64(len(body))
	}
	var seen []string
	tot, err := verify.Transfer(context.Background(), s, bucket, sources, func(_ verify.Source, r verify.Report) { seen = append(seen, r.Object) })
	if err != nil {
		t.Fatal(err)
	}
	if tot.Objects != 3 || tot.Raw != raw || len(seen) != 3 || seen[0] != "gs://v-transfer/out/zstd.csv.zst" || seen[1] != "gs://v-transfer/out/gzip.csv.gz" || seen[2] != "gs://v-transfer/out/none.csv" {
		t.Fatalf("totals %+v, objects %q", tot, seen)
	}

	missing := append(sources[:1:1], verify.Source{Path: filepath.Join(dir, "gone.csv"), Base: "out/gone.csv"})
	if _, err := verify.Transfer(context.Background(), s, bucket, missing, nil); !errors.Is(err, gcs.ErrNotFound) || !strings.Contains(err.Error(), "gone.csv") {
		t.Fatalf("missing object: %v, want ErrNotFound naming gone.csv", err)
	}
	if err := os.WriteFile(sources[2].Path, []byte("other bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	tot, err = verify.Transfer(context.Background(), s, bucket, sources, nil)
	if !errors.Is(err, verify.ErrMismatch) || tot.Objects != 2 {
		t.Fatalf("changed source: %v after %d objects, want ErrMismatch after 2", err, tot.Objects)
	}
}
