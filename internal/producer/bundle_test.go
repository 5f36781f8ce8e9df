package producer

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/plan"
	"github.com/ferry-dev/ferry/internal/spool"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// smallTree writes n small files of varied sizes (one empty) and one file
// of several chunks, and returns the directory and the files' contents.
func smallTree(t *testing.T, n int) (string, map[string][]byte) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tree")
	testutil.OK(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	files := map[string][]byte{}
	for i := range n {
		rel := fmt.Sprintf("f%03d.csv", i)
		if i%3 == 0 {
			rel = "sub/" + rel
		}
		var b []byte
		if i > 0 {
			b = []byte(strings.Repeat("2026-11-30,IDX"+strconv.Itoa(i)+",1.5\n", 1+i*37%500))
		}
		testutil.OK(t, os.WriteFile(filepath.Join(dir, rel), b, 0o644))
		files["tree/"+rel] = b
	}
	big := filepath.Join(dir, "big.csv")
	testutil.WriteCSV(t, big, 300_000, 1)
	files["tree/big.csv"], _ = os.ReadFile(big)
	return dir, files
}

// TestSmallFilesTravelInBundles: small files share chunk messages, up to
// FERRY_BUNDLE_MAX raw bytes each; every part is its own final object with
// its own CRC32C and metadata and bytes that decompress to its file; the
// file of several chunks travels on its own. With the spool transport a
// bundle too large to inline is one spool file.
func TestSmallFilesTravelInBundles(t *testing.T) {
	dir, files := smallTree(t, 60)
	for _, tc := range []struct {
		name      string
		transport string
		inlineMax int64
	}{
		{"spool, inline", config.TransportSpool, 256 << 10},
		{"spool, spooled", config.TransportSpool, 1 << 10},
		{"pubsub", config.TransportPubSub, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chunks, spoolDir := &teststack.Recorder{}, t.TempDir()
			const bundleMax = 64 << 10
			p := New(Options{Store: nopStore{}, Chunks: chunks, Events: &teststack.Recorder{}, SpoolDir: spoolDir,
				Transport: tc.transport, InlineMax: tc.inlineMax, BundleMax: bundleMax, MessageMax: 1 << 20, Concurrency: 2})
			man, err := p.Submit(context.Background(), Request{Sources: []string{dir}, Destination: "gs://bkt/p", ChunkSize: 64 << 10})
			if err != nil {
				t.Fatal(err)
			}
			msgs := decodeAll(t, chunks, spoolDir)
			seen, bundles, spooled := map[string]int{}, 0, 0
			for _, m := range msgs {
				var raw int64
				if len(m.c.Parts) > 1 {
					bundles++
				}
				if m.c.Spool != "" {
					spooled++
				}
				for i, wire := range m.partBytes() {
					pt := m.c.Parts[i]
					raw += pt.RawSize
					src := files[pt.Path]
					if len(m.c.Parts) > 1 && (!pt.Final || pt.Object != "p/"+pt.Path+".zst") {
						t.Fatalf("bundled part %+v is not its own final object", pt)
					}
					if crc32c.Checksum(wire) != pt.WireCRC32C || pt.RawCRC32C != crc32c.Checksum(src[pt.RawOffset:pt.RawOffset+pt.RawSize]) {
						t.Fatalf("%s: CRC32Cs in the header do not match its bytes", pt.Path)
					}
					if pt.Final && (pt.Metadata[message.MetaRawCRC32C] != fmt.Sprintf("%08x", crc32c.Checksum(src)) || pt.Metadata[message.MetaMtime] == "") {
						t.Fatalf("%s: metadata %v", pt.Path, pt.Metadata)
					}
					if pt.Chunks == 1 && !bytes.Equal(decompress(t, codec.Zstd, wire), src) {
						t.Fatalf("%s: bytes do not decompress to the file", pt.Path)
					}
					seen[pt.Path]++
				}
				if len(m.c.Parts) > 1 && raw > bundleMax {
					t.Fatalf("bundle of %d raw bytes, FERRY_BUNDLE_MAX is %d", raw, bundleMax)
				}
				if (tc.transport == config.TransportPubSub || tc.inlineMax > 1<<10) && m.c.Spool != "" {
					t.Fatalf("payload spooled with %s", tc.name)
				}
			}
			if len(seen) != len(files) || seen["tree/big.csv"] != 5 {
				t.Fatalf("%d of %d files sent (big.csv in %d chunks)", len(seen), len(files), seen["tree/big.csv"])
			}
			if bundles == 0 || len(msgs) >= len(files) {
				t.Fatalf("%d messages (%d bundles) for %d files: small files were not bundled", len(msgs), bundles, len(files))
			}
			if tc.inlineMax == 1<<10 && spooled < bundles {
				t.Fatalf("%d spool files for %d bundles", spooled, bundles)
			}
			if len(man.Files) != len(files) {
				t.Fatalf("manifest lists %d files", len(man.Files))
			}
			t.Logf("%d files in %d messages (%d bundles, %d spool files)", len(files), len(msgs), bundles, spooled)
		})
	}
}

// TestBundlerKeepsEveryLimit: a bundle closes at FERRY_BUNDLE_MAX raw
// bytes, at message.MaxParts parts, when its header would pass
// message.MaxHeader, and (pubsub) when its worst-case payload and header
// would pass FERRY_MESSAGE_MAX.
func TestBundlerKeepsEveryLimit(t *testing.T) {
	longName := strings.Repeat("<&>", 330) // JSON escapes each to six bytes
	file := func(size int64, name string) *plan.File {
		return &plan.File{SourceFile: plan.SourceFile{Rel: name, Size: size}, Object: "p/" + name, ChunkSize: 1 << 20, Chunks: 1}
	}
	pl := &plan.Plan{Dest: plan.Destination{Bucket: "bkt"}, Codec: codec.Zstd}
	count := func(p *Producer, f *plan.File) int {
		b := newBundler(p, pl, "t1", false)
		if !b.takes(0, f) {
			return 0
		}
		n := 0
		for b.fits(n, f) {
			b.add(n, f)
			n++
		}
		return n
	}
	// size is the chunk message of n such parts as the compress stage
	// writes them, with worst-case payloads when inline.
	size := func(p *Producer, f *plan.File, n int) (header, msg int) {
		c := message.Chunk{V: message.Version, TransferID: "t1", Bucket: "bkt", Codec: "zstd", Spool: spool.Name("t1", n, 0)}
		var payload int64
		for i := range n {
			pt := newPart("t1", codec.Zstd, i, f, 0, 1, 0, f.Size, 0xfedcba98)
			pt.WireSize, pt.WireCRC32C = plan.WireBound(codec.Zstd, f.Size), 0x89abcdef
			c.Parts = append(c.Parts, pt)
			payload += pt.WireSize
		}
		header = len(message.Encode(c))
		if p.pubsub() {
			return header, message.HeaderOverhead + header + int(payload)
		}
		return header, message.HeaderOverhead + header + int(min(payload, p.o.InlineMax))
	}
	base := Options{BundleMax: 4 << 20, MessageMax: 9 << 20, InlineMax: 256 << 10}
	for _, tc := range []struct {
		name  string
		o     func(*Options)
		f     *plan.File
		limit string
		want  int
	}{
		{"raw bytes", func(*Options) {}, file(100<<10, "a.csv"), "raw", 40},
		{"parts", func(*Options) {}, file(10, "a.csv"), "parts", message.MaxParts},
		{"header", func(*Options) {}, file(10, longName), "header", 0},
		{"pubsub message", func(o *Options) { o.Transport, o.MessageMax, o.BundleMax = config.TransportPubSub, 1<<20, 512<<10 }, file(10, longName), "message", 0},
		{"too large to bundle", func(*Options) {}, file(5<<20, "a.csv"), "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			tc.o(&o)
			o.applyDefaults()
			p := &Producer{o: o}
			n := count(p, tc.f)
			header, msg := size(p, tc.f, n)
			if header > message.MaxHeader || int64(msg) > o.MessageMax {
				t.Fatalf("%d parts: header of %d bytes, message of %d: over the limits", n, header, msg)
			}
			next, nextMsg := size(p, tc.f, n+1)
			switch tc.limit {
			case "raw", "parts", "":
				if n != tc.want {
					t.Fatalf("%d files in a bundle, want %d", n, tc.want)
				}
			case "header": // not far below what fits
				if next <= message.MaxHeader*97/100 {
					t.Fatalf("%d parts: one more would take %d header bytes, well within %d", n, next, message.MaxHeader)
				}
			case "message":
				if int64(nextMsg) <= o.MessageMax*97/100 {
					t.Fatalf("%d parts: one more would make %d bytes, well within %d", n, nextMsg, o.MessageMax)
				}
			}
			t.Logf("%d parts: header %d bytes, message %d bytes", n, header, msg)
		})
	}
}

// TestOneBadFileFailsTheBundleClearly: a file of a bundle that vanishes
// after planning fails the whole transfer with an error naming it, and its
// bundle's spool files are gone.
func TestOneBadFileFailsTheBundleClearly(t *testing.T) {
	dir, _ := smallTree(t, 20)
	victim := filepath.Join(dir, "f007.csv")
	spoolDir, events := t.TempDir(), &teststack.Recorder{}
	p := New(Options{Store: nopStore{}, Chunks: &teststack.Recorder{}, Events: events, SpoolDir: spoolDir, InlineMax: 1 << 10,
		BundleMax: 64 << 10, FailGrace: time.Millisecond, planned: func(f *plan.File) {
			if f.Path == victim {
				testutil.OK(t, os.Remove(victim))
			}
		}})
	_, err := p.Submit(context.Background(), Request{Sources: []string{dir}, Destination: "gs://bkt/p", ChunkSize: 64 << 10})
	if err == nil || !strings.Contains(err.Error(), victim) || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("Submit = %v, want an error naming %s", err, victim)
	}
	var ev message.Event
	if msgs := events.Messages(); len(msgs) != 1 || message.Decode(msgs[0].Data, &ev) != nil || !strings.Contains(ev.Error, victim) {
		t.Fatalf("events %v: want one failed event naming the file", msgs)
	}
	if left, _ := os.ReadDir(spoolDir); len(left) != 0 {
		t.Fatalf("%d spool files left after a failed transfer", len(left))
	}
}

// A file's part is encoded once to measure it, however often the bundler
// is asked about it (takes, fits, add).
func TestBundlerMeasuresAPartOnce(t *testing.T) {
	pl := &plan.Plan{Dest: plan.Destination{Bucket: "bkt"}, Codec: codec.Zstd}
	p := New(Options{BundleMax: 4 << 20, MessageMax: 9 << 20, InlineMax: 256 << 10})
	b := newBundler(p, pl, "t1", false)
	f := &plan.File{SourceFile: plan.SourceFile{Rel: "a.csv", Size: 1000}, Object: "p/a.csv", ChunkSize: 1 << 20, Chunks: 1}
	once := testing.AllocsPerRun(20, func() { b.lastFile = nil; b.partHeader(7, f) })
	all := testing.AllocsPerRun(20, func() {
		b.lastFile = nil
		b.reset()
		if b.takes(7, f) && b.fits(7, f) {
			b.add(7, f)
		}
	})
	if all > once+1 {
		t.Fatalf("takes, fits and add allocated %.0f times; measuring the part once allocates %.0f", all, once)
	}
}
