package merger

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// A CSV sent again with fewer parts: the ok transfer removes the parts an
// earlier transfer of the same source left above its own, and that
// transfer's rejects object, so part-*.parquet is the file again; objects
// of another source, of no ferry transfer, or outside the directory stay.
func TestAnEndRemovesTheStalePartsOfItsSources(t *testing.T) {
	s := tableTransfer(t, "m-stale")
	for i := range 3 {
		obj := "out/dir/prices.csv/" + message.PartName(i)
		s.man.Files[i].Object, s.man.Files[i].Chunks[0].Object = obj, obj
	}
	put := func(name string, meta map[string]string) {
		b := []byte("old " + name)
		_, err := s.store.Upload(context.Background(), s.bucket, name, bytes.NewReader(b), gcs.UploadOptions{
			Size: int64(len(b)), CRC32C: crc32c.Checksum(b), Metadata: meta})
		testutil.OK(t, err)
	}
	old := func(source string) map[string]string {
		m := message.FinalMetadata("tid-earlier", 1, 1, "none")
		if source != "" {
			m[message.MetaTableSource] = source
		}
		return m
	}
	put("out/dir/prices.csv/part-00003.parquet", old("dir/prices.csv"))
	put("out/dir/prices.csv/part-00004.parquet", old("dir/prices.csv"))
	put("out/dir/prices.csv/part-00005.parquet", old("dir/other.csv"))
	put("out/dir/prices.csv/part-00006.parquet", nil)
	put("out/dir/prices.csv/"+message.RejectsName, old(""))
	put("out/dir/zz.txt", old(""))
	done := &teststack.Recorder{}
	m := New(Options{Store: s.store, Done: done, Sink: sinkAt(t, rowsPath(t)), Version: "test", Tables: &fakeTables{rows: 60},
		Loads: config.Loads{Datasets: []string{"proj-1.landing"}}})
	for _, ev := range s.uploadAll() {
		testutil.OK(t, handle(t, m, ev))
	}
	s.seal()
	testutil.OK(t, handle(t, m, s.event(message.EventSealed)))
	if d := dones(t, done); len(d) != 1 || d[0].Status != message.StatusOK {
		t.Fatalf("done events %+v", d)
	}
	for name, want := range map[string]bool{
		"out/dir/prices.csv/part-00002.parquet": true, "out/dir/prices.csv/part-00003.parquet": false, "out/dir/prices.csv/part-00004.parquet": false,
		"out/dir/prices.csv/part-00005.parquet": true, "out/dir/prices.csv/part-00006.parquet": true,
		"out/dir/prices.csv/" + message.RejectsName: false, "out/dir/zz.txt": true,
	} {
		_, err := s.store.Attrs(context.Background(), s.bucket, name)
		if got := !errors.Is(err, gcs.ErrNotFound); got != want {
			t.Errorf("%s: there %v, want %v (%v)", name, got, want, err)
		}
	}
}
