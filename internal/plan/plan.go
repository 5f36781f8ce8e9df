// Package plan turns what a user or batch system asks for into the list of
// files a transfer moves: it parses the gs:// destination, walks the sources
// (confined to allowed roots when asked), names each file's final object and
// chooses each file's chunk size within the limits of the transport. It
// touches no network. The producer plans with it before reading a byte;
// verify and restore use the same names, so they pair every source with the
// object the producer wrote.
package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ferry-dev/ferry/internal/codec"
)

// Spec is what a transfer asks for.
type Spec struct {
	Sources     []string
	Destination string      // gs://BUCKET[/PREFIX]
	Codec       codec.Codec // "" means zstd
	Level       int         // 0 means the codec's default
	ChunkSize   int64       // requested; grows or is capped per file (ChunkSize)
	// Roots, when set, confine the sources: every file's resolved path
	// (links and ".." followed) must lie under one of them.
	Roots []string
	// Selection: links, unreadable files, filters and --files-from.
	Selection Selection
}

// Plan is a validated Spec: the files, their objects and chunk sizes.
type Plan struct {
	Dest  Destination
	Codec codec.Codec
	Level int
	// Files are in the order of their final object names.
	Files []File
	// Skipped are what the walk found and did not take (links, FIFOs,
	// sockets, devices, unreadable files), each with its final object's
	// name; Excluded counts what the filters left out.
	Skipped  []Skipped
	Excluded int
	Symlinks Symlinks
}

// Skipped is one skipped file and the object it would have become.
type Skipped struct {
	Skip
	Object string
}

// File is one source file and how it travels.
type File struct {
	SourceFile
	Object    string // final object name in Dest.Bucket
	ChunkSize int64
	Chunks    int
	// Stream is set for standard input, whose length is unknown until its
	// end: Size, Mod and Chunks are then 0, and Stream sizes the chunks.
	Stream *Stream
}

// Request chunk sizes outside these bounds are refused.
const (
	MinRequestChunk = 64 << 10
	MaxRequestChunk = MaxChunkSize
)

// New validates s and plans every file within l. Errors name the input at
// fault; nothing outside the local file system is touched.
func New(s Spec, l Limits) (*Plan, error) {
	dest, err := ParseDestination(s.Destination)
	if err != nil {
		return nil, err
	}
	c, level, err := codecLevel(s.Codec, s.Level)
	if err != nil {
		return nil, err
	}
	if s.ChunkSize < MinRequestChunk || s.ChunkSize > MaxRequestChunk {
		return nil, fmt.Errorf("chunk size %d: want 64KiB to 1GiB", s.ChunkSize)
	}
	if IsStdin(s.Sources) {
		return streamPlan(s, l, c, level)
	}
	var conf *confiner
	if len(s.Roots) > 0 {
		if conf, err = newConfiner(s.Roots); err != nil {
			return nil, err
		}
	}
	w, err := walk(s.Sources, conf, s.Selection)
	if err != nil {
		return nil, err
	}
	p := &Plan{Dest: dest, Codec: c, Level: level, Files: make([]File, len(w.files)), Excluded: w.excluded, Symlinks: w.sel.Symlinks}
	for _, k := range w.skipped {
		p.Skipped = append(p.Skipped, Skipped{Skip: k, Object: dest.Object(k.Rel, c.Ext())})
	}
	for i, f := range w.files {
		obj := dest.Object(f.Rel, c.Ext())
		if err := checkName(obj); err != nil {
			return nil, fmt.Errorf("source %s: object name: %w", f.Path, err)
		}
		size, err := ChunkSize(f.Size, s.ChunkSize, c, l)
		if err != nil {
			return nil, fmt.Errorf("source %s: %w", f.Path, err)
		}
		p.Files[i] = File{SourceFile: f, Object: obj, ChunkSize: size, Chunks: ChunkCount(f.Size, size)}
	}
	// Files go in final-object order, the order in which GCS lists them
	// (not quite the walk's: "a.b.zst" sorts before "a.zst"), so that the
	// merger joins a listing of the destination with the manifest one
	// page at a time (message.PageFiles).
	slices.SortFunc(p.Files, func(a, b File) int { return strings.Compare(a.Object, b.Object) })
	return p, nil
}

func codecLevel(c codec.Codec, level int) (codec.Codec, int, error) {
	if c == "" {
		c = codec.Zstd
	}
	if _, err := codec.Parse(string(c)); err != nil {
		return "", 0, err
	}
	if level == 0 {
		level = c.DefaultLevel()
	}
	if err := c.CheckLevel(level); err != nil {
		return "", 0, err
	}
	return c, level, nil
}

// MaxChunk is the largest chunk size of any file of p (at least 1); a
// stream's is the largest it may grow to.
func (p *Plan) MaxChunk() int64 {
	var m int64 = 1
	for _, f := range p.Files {
		if f.Stream != nil {
			m = max(m, f.Stream.Max)
			continue
		}
		m = max(m, min(f.ChunkSize, max(f.Size, 1)))
	}
	return m
}

// Resolved is one source file and the final object it becomes.
type Resolved struct {
	Path   string
	Object string
	Size   int64
}

// Resolve lists the files that sources cover and their final object names
// under destination for codec c ("" means zstd), as the producer names them;
// verify and restore use it to pair sources with objects. It does not check
// chunk sizes, so it works for any transfer that ran.
func Resolve(sources []string, destination string, c codec.Codec) (Destination, []Resolved, error) {
	dest, err := ParseDestination(destination)
	if err != nil {
		return Destination{}, nil, err
	}
	if c, _, err = codecLevel(c, 0); err != nil {
		return Destination{}, nil, err
	}
	w, err := walk(sources, nil, Selection{})
	if err != nil {
		return Destination{}, nil, err
	}
	out := make([]Resolved, len(w.files))
	for i, f := range w.files {
		out[i] = Resolved{Path: f.Path, Object: dest.Object(f.Rel, c.Ext()), Size: f.Size}
	}
	return dest, out, nil
}
