package plan

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/seektable"
	"github.com/ferry-dev/ferry/internal/testutil"
)

func TestChunkSizeGrowsToKeepMaxChunks(t *testing.T) {
	tests := []struct {
		size, chunk int64
		max         int
		want        int64
	}{
		{0, 32 << 20, 0, 32 << 20},
		{32 << 30, 32 << 20, 0, 33 << 20}, // 32 GiB needs 32.8 MiB chunks
		{10 << 30, 32 << 20, 0, 32 << 20},
		{100 << 30, 32 << 20, 0, 103 << 20},
		{100 << 30, 32 << 20, 10_000, 32 << 20},
		{1 << 30, 1 << 20, 10, 103 << 20},
	}
	for _, tc := range tests {
		l := Limits{MaxChunks: tc.max}
		got, err := ChunkSize(tc.size, tc.chunk, codec.Zstd, l)
		if err != nil || got != tc.want || ChunkCount(tc.size, got) > l.maxChunks() {
			t.Errorf("ChunkSize(%d, %d, max %d) = %d, %v (%d chunks), want %d", tc.size, tc.chunk, tc.max, got, err, ChunkCount(tc.size, got), tc.want)
		}
	}
}

// TestFileTooLargeForTheCapNamesItAll: with the pubsub cap, a file needing
// more chunks than FERRY_MAX_CHUNKS fails, naming the file, its size, the
// cap and the variable to raise; raising it lets the file through.
func TestFileTooLargeForTheCapNamesItAll(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "big.bin")
	f, err := os.Create(src)
	testutil.OK(t, err)
	testutil.OK(t, f.Truncate(10<<20)) // sparse: 10 MiB
	f.Close()
	capSize := MessageChunkCap(codec.Zstd, 1<<20)
	l := Limits{MaxChunks: 5, MessageMax: 1 << 20}
	_, err = New(Spec{Sources: []string{src}, Destination: "gs://bkt/p", ChunkSize: 32 << 20}, l)
	for _, want := range []string{src, "10485760 bytes", "FERRY_MESSAGE_MAX=1048576", "FERRY_MAX_CHUNKS=5", "raise FERRY_MAX_CHUNKS", "983040"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("error %v, want it to contain %q", err, want)
		}
	}
	t.Log(err)
	l.MaxChunks = 11
	p, err := New(Spec{Sources: []string{src}, Destination: "gs://bkt/p", ChunkSize: 32 << 20}, l)
	if err != nil {
		t.Fatal(err)
	}
	if f := p.Files[0]; f.ChunkSize != capSize || f.Chunks != 11 {
		t.Fatalf("chunk size %d (%d chunks), want the cap %d (11 chunks)", f.ChunkSize, f.Chunks, capSize)
	}
}

// TestMessageChunkCapFitsIncompressibleData: a chunk of the capped size of
// random bytes, compressed as the producer does (frames, seek table), fits
// the message with the header reserve, for every codec; the next size up
// would not be guaranteed to.
func TestMessageChunkCapFitsIncompressibleData(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range []codec.Codec{codec.Zstd, codec.Gzip, codec.None} {
		for _, max := range []int64{1 << 20, 4 << 20, 9 << 20, 10_000_000} {
			capSize := MessageChunkCap(c, max)
			if capSize%chunkQuantum != 0 || capSize < chunkQuantum {
				t.Fatalf("%s %d: cap %d is not a positive multiple of 64 KiB", c, max, capSize)
			}
			if WireBound(c, capSize+chunkQuantum) <= max-HeaderReserve-message.HeaderOverhead {
				t.Errorf("%s %d: cap %d is not the largest that fits", c, max, capSize)
			}
			if max != 9<<20 && max != 1<<20 {
				continue
			}
			raw := make([]byte, capSize)
			for i := range raw {
				raw[i] = byte(rng.Uint32())
			}
			enc, err := codec.NewEncoder(c, c.DefaultLevel())
			testutil.OK(t, err)
			var wire []byte
			var frames []seektable.Frame
			for off := 0; off < len(raw); off += codec.FrameSize {
				before := len(wire)
				piece := raw[off:min(off+codec.FrameSize, len(raw))]
				wire, err = enc.Encode(wire, piece)
				testutil.OK(t, err)
				frames = append(frames, seektable.Frame{Wire: uint32(len(wire) - before), Raw: uint32(len(piece))})
			}
			if c == codec.Zstd {
				wire = seektable.Append(wire, frames)
			}
			if int64(len(wire)) > WireBound(c, capSize) {
				t.Errorf("%s: %d random bytes became %d wire bytes, above WireBound %d", c, capSize, len(wire), WireBound(c, capSize))
			}
			if total := int64(len(wire)) + HeaderReserve + message.HeaderOverhead; total > max {
				t.Errorf("%s: message of %d bytes for FERRY_MESSAGE_MAX=%d", c, total, max)
			}
			t.Logf("%s FERRY_MESSAGE_MAX=%d: chunk cap %d, random chunk → %d wire bytes; largest file at 1000 chunks %.2f GB",
				c, max, capSize, len(wire), float64(capSize)*1000/1e9)
		}
	}
	if got := MessageChunkCap(codec.Zstd, 9<<20); got != 9_371_648 {
		t.Errorf("zstd cap at the default FERRY_MESSAGE_MAX is %d; the doc comment and README say 9371648", got)
	}
}

func TestBadRequestsNameTheInput(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f.csv")
	testutil.OK(t, os.WriteFile(file, []byte("x"), 0o644))
	testutil.OK(t, os.Symlink(dir, filepath.Join(dir, "loop")))
	testutil.OK(t, os.WriteFile(filepath.Join(dir, "back\\slash.txt"), []byte("x"), 0o644))
	testutil.OK(t, os.WriteFile(filepath.Join(dir, ".x.ferry-part"), []byte("x"), 0o644))
	tests := []struct {
		name string
		s    Spec
		want string
	}{
		{"missing source", Spec{Sources: []string{filepath.Join(dir, "nope")}, Destination: "gs://bkt/p"}, "nope"},
		{"not gs", Spec{Sources: []string{file}, Destination: "s3://b/p"}, `"s3://b/p"`},
		{"bad bucket", Spec{Sources: []string{file}, Destination: "gs://B!/p"}, `"B!"`},
		{"dotdot prefix", Spec{Sources: []string{file}, Destination: "gs://bkt/a/../b"}, `".."`},
		{"staging prefix", Spec{Sources: []string{file}, Destination: "gs://bkt/.ferry/x"}, ".ferry/"},
		{"done prefix", Spec{Sources: []string{file}, Destination: "gs://bkt/.ferry-done"}, ".ferry-done/"},
		{"control char", Spec{Sources: []string{file}, Destination: "gs://bkt/a\x01b"}, "control character"},
		{"codec", Spec{Sources: []string{file}, Destination: "gs://bkt/p", Codec: "lz4"}, `"lz4"`},
		{"level", Spec{Sources: []string{file}, Destination: "gs://bkt/p", Codec: codec.Gzip, Level: 12}, "level 12"},
		{"chunk 0", Spec{Sources: []string{file}, Destination: "gs://bkt/p", ChunkSize: -1}, "chunk size -1"},
		{"chunk absurd", Spec{Sources: []string{file}, Destination: "gs://bkt/p", ChunkSize: 1 << 40}, "chunk size"},
		{"backslash", Spec{Sources: []string{filepath.Join(dir, "back\\slash.txt")}, Destination: "gs://bkt/p"}, "backslash"},
		{"restore's temporary name", Spec{Sources: []string{filepath.Join(dir, ".x.ferry-part")}, Destination: "gs://bkt/p"}, "reserved"},
		{"no source", Spec{Destination: "gs://bkt/p"}, "no source"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.s.ChunkSize == 0 {
				tc.s.ChunkSize = 1 << 20
			}
			_, err := New(tc.s, Limits{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want an error containing %s", err, tc.want)
			}
		})
	}
}

// TestRootsConfineSources: with roots, a source (or a file found in a
// directory) whose resolved path leaves them is refused, whether it gets
// there by "..", an absolute path or a symlink; what stays inside is read
// through the root.
func TestRootsConfineSources(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	outside := filepath.Join(base, "secret.txt")
	testutil.OK(t, os.MkdirAll(filepath.Join(root, "data", "sub"), 0o755))
	testutil.OK(t, os.WriteFile(outside, []byte("secret"), 0o600))
	testutil.OK(t, os.WriteFile(filepath.Join(root, "data", "ok.csv"), []byte("ok"), 0o644))
	testutil.OK(t, os.WriteFile(filepath.Join(root, "data", "sub", "ok2.csv"), []byte("ok2"), 0o644))
	testutil.OK(t, os.Symlink(outside, filepath.Join(root, "escape.txt")))
	testutil.OK(t, os.MkdirAll(filepath.Join(root, "tree"), 0o755))
	testutil.OK(t, os.Symlink(outside, filepath.Join(root, "tree", "escape.txt")))
	testutil.OK(t, os.Symlink(filepath.Join(root, "data", "ok.csv"), filepath.Join(root, "inside-link.csv")))
	testutil.OK(t, os.Symlink(base, filepath.Join(root, "up")))

	spec := func(src string) Spec {
		return Spec{Sources: []string{src}, Destination: "gs://bkt/p", ChunkSize: 1 << 20, Roots: []string{root}}
	}
	for _, src := range []string{
		outside,
		filepath.Join(root, "..", "secret.txt"),
		filepath.Join(root, "escape.txt"),
		filepath.Join(root, "tree"),
		root + "/up/secret.txt",
		root + "/up/root/../secret.txt",
		"/etc/hostname",
	} {
		_, err := New(spec(src), Limits{})
		if !errors.Is(err, ErrOutsideRoots) || !strings.Contains(err.Error(), "FERRY_SOURCE_ROOTS="+root) {
			t.Errorf("source %s: %v, want an error naming FERRY_SOURCE_ROOTS", src, err)
		}
	}
	p, err := New(Spec{Sources: []string{filepath.Join(root, "data"), filepath.Join(root, "inside-link.csv")},
		Destination: "gs://bkt/p", ChunkSize: 1 << 20, Roots: []string{root}}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range p.Files {
		fh, err := f.Open()
		testutil.OK(t, err)
		b := make([]byte, 10)
		n, _ := fh.Read(b)
		fh.Close()
		got = append(got, f.Object+"="+string(b[:n]))
		if f.Root != root {
			t.Errorf("%s: root %q, want %q", f.Path, f.Root, root)
		}
	}
	want := "p/data/ok.csv.zst=ok p/data/sub/ok2.csv.zst=ok2 p/inside-link.csv.zst=ok"
	if strings.Join(got, " ") != want {
		t.Fatalf("read %v, want %s", got, want)
	}
	if _, err := New(Spec{Sources: []string{outside}, Destination: "gs://bkt/p", ChunkSize: 1 << 20}, Limits{}); err != nil {
		t.Fatalf("without roots (producer submit), any readable file goes: %v", err)
	}
}

func TestResolveNamesObjectsAsTheProducerDoes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "src")
	testutil.OK(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	testutil.OK(t, os.WriteFile(filepath.Join(dir, "a.csv"), []byte("aa"), 0o644))
	testutil.OK(t, os.WriteFile(filepath.Join(dir, "sub", "b.csv"), nil, 0o644))
	dest, files, err := Resolve([]string{dir}, "gs://bkt/pre/", codec.Gzip)
	if err != nil {
		t.Fatal(err)
	}
	if dest.String() != "gs://bkt/pre" || len(files) != 2 || files[0].Object != "pre/src/a.csv.gz" || files[0].Size != 2 ||
		files[1].Object != "pre/src/sub/b.csv.gz" || files[1].Path != filepath.Join(dir, "sub", "b.csv") {
		t.Fatalf("Resolve = %v %+v", dest, files)
	}
	if _, files, _ := Resolve([]string{dir}, "gs://bkt", ""); files[0].Object != "src/a.csv.zst" {
		t.Fatalf("default codec: %+v", files)
	}
}

// Standard input (issue 13 §5): the destination's last element names the
// object, with the codec's extension; its chunks start at the requested
// size and double every FERRY_MAX_CHUNKS/16 chunks up to the cap the
// producer's memory or, with FERRY_TRANSPORT=pubsub, the message sets.
func TestStdinIsOneStreamNamedByTheDestination(t *testing.T) {
	p, err := New(Spec{Sources: []string{"-"}, Destination: "gs://bkt/dumps/2026/db.sql", ChunkSize: 32 << 20}, Limits{StreamMax: 73 << 20})
	testutil.OK(t, err)
	f := p.Files[0]
	if p.Dest.Prefix != "dumps/2026" || f.Object != "dumps/2026/db.sql.zst" || f.Rel != "db.sql" || f.Stream == nil {
		t.Fatalf("plan %+v, file %+v", p.Dest, f)
	}
	s := f.Stream
	for i, want := range map[int]int64{0: 32 << 20, 61: 32 << 20, 62: 64 << 20, 123: 64 << 20, 124: 73 << 20, 999: 73 << 20} {
		if got := s.Chunk(i); got != want {
			t.Errorf("chunk %d: %d bytes, want %d", i, got, want)
		}
	}
	if want := int64(62*32+62*64+876*73) << 20; s.Most() != want || p.MaxChunk() != 73<<20 {
		t.Errorf("largest stream %d, want %d; largest chunk %d", s.Most(), want, p.MaxChunk())
	}
	// With FERRY_TRANSPORT=pubsub every chunk is the message cap.
	p, err = New(Spec{Sources: []string{"-"}, Destination: "gs://bkt/db.sql", ChunkSize: 32 << 20, Codec: codec.Gzip}, Limits{StreamMax: 73 << 20, MessageMax: 9 << 20})
	testutil.OK(t, err)
	capSize := MessageChunkCap(codec.Gzip, 9<<20)
	if s := p.Files[0].Stream; s.First != capSize || s.Max != capSize || s.Most() != 1000*capSize || p.Files[0].Object != "db.sql.gz" {
		t.Errorf("pubsub stream %+v, object %s; want every chunk %d", s, p.Files[0].Object, capSize)
	}
	err = s.TooLong(Limits{MessageMax: 9 << 20})
	for _, w := range []string{"standard input", "longer than", "FERRY_MAX_CHUNKS=1000", "FERRY_MESSAGE_MAX"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q does not say %q", err, w)
		}
	}
	for _, bad := range []struct {
		sources    []string
		dest, want string
	}{
		{[]string{"-", "a.csv"}, "gs://bkt/x", "must be the only source"},
		{[]string{"-"}, "gs://bkt", "needs an object name"},
		{[]string{"-"}, "gs://bkt/dir/", "needs an object name"},
	} {
		if _, err := New(Spec{Sources: bad.sources, Destination: bad.dest, ChunkSize: 1 << 20}, Limits{}); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v → %s: %v, want %q", bad.sources, bad.dest, err, bad.want)
		}
	}
}

// TestNoDestinationOrObjectUnderFerrysOwnPrefixes walks message's one list
// of reserved roots: a destination inside any of them is refused naming
// it, and so is a tree sent to the bucket's root whose directory would put
// its objects there.
func TestNoDestinationOrObjectUnderFerrysOwnPrefixes(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f.csv")
	testutil.OK(t, os.WriteFile(file, []byte("x"), 0o644))
	for _, root := range message.ReservedRoots() {
		t.Run(root, func(t *testing.T) {
			for _, dest := range []string{"gs://bkt/" + strings.TrimSuffix(root, "/"), "gs://bkt/" + root + "victim"} {
				_, err := New(Spec{Sources: []string{file}, Destination: dest, ChunkSize: 1 << 20}, Limits{})
				if err == nil || !strings.Contains(err.Error(), root) {
					t.Errorf("New to %s = %v, want an error naming %s", dest, err, root)
				}
			}
			tree := filepath.Join(t.TempDir(), strings.TrimSuffix(root, "/"))
			testutil.OK(t, os.MkdirAll(tree, 0o755))
			testutil.OK(t, os.WriteFile(filepath.Join(tree, "victim"), []byte("x"), 0o644))
			p, err := New(Spec{Sources: []string{tree}, Destination: "gs://bkt", ChunkSize: 1 << 20, Codec: codec.None}, Limits{})
			if err == nil {
				err = p.Walk(func(File) error { return nil }, func(Skipped) {})
			}
			if err == nil || !strings.Contains(err.Error(), root) {
				t.Errorf("a tree %s sent to gs://bkt = %v, want an error naming %s", tree, err, root)
			}
		})
	}
}
