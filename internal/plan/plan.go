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
	"os"
	"path"
	"path/filepath"

	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/message"
)

// Spec is what a transfer asks for.
type Spec struct {
	Sources     []string
	Destination string      // gs://BUCKET[/PREFIX]
	Codec       codec.Codec // "" means zstd
	Level       int         // 0: zstd adapts each chunk's level; gzip 6
	ChunkSize   int64       // requested; grows or is capped per file (ChunkSize)
	// Roots, when set, confine the sources: every file's resolved path
	// (links and ".." followed) must lie under one of them.
	Roots []string
	// Selection: links, unreadable files, filters and --files-from.
	Selection Selection
	// Convert, when set, sends delimited text as Parquet.
	Convert *Convert
}

// Plan is a validated Spec: the files, their objects and chunk sizes.
type Plan struct {
	Dest  Destination
	Codec codec.Codec
	// Level is fixed, or 0 for zstd: each chunk's level adapts to what
	// waits, the compressor or the link (package level).
	Level int
	// Files are in the order of their final object names (New fills
	// them; Open leaves them to Walk).
	Files []File
	// Skipped are what the walk found and did not take (links, FIFOs,
	// sockets, devices, unreadable files), each with its final object's
	// name; Excluded counts what the filters left out.
	Skipped  []Skipped
	Excluded int
	Symlinks Symlinks

	spec   Spec
	limits Limits
	conf   *confiner
	stream bool // standard input: Files is its one file
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
	// Part is set for a part of a source converted to Parquet
	// (Spec.Convert): Size is then the part's bytes of the source.
	Part *Part
	// Append is set for a file that grew past what its final object
	// holds, proven unchanged up to there (the producer's skip check):
	// the object is the file's first chunk (message.ChunkInfo.Generation)
	// and its other chunks cut the tail, from Append.RawSize.
	Append *message.ChunkInfo
	// Staged is set when the transfer overwrites: a file of one chunk
	// goes to its staging object too, and the merger composes it onto
	// its final name at the end (message.Manifest.Staged). Replaces is
	// the generation of the final object the producer's listing found
	// there, 0 for none.
	Staged   bool
	Replaces int64
	// Span, when set, is the only chunks read: a pool's shard of a file
	// larger than a shard (message.ShardPlan.Range).
	Span *message.ChunkSpan
}

// AppendTo makes f an append to the object described by first, which
// holds f's first first.RawSize bytes: one chunk for it, then the tail
// cut as f's chunks were.
func (f *File) AppendTo(first message.ChunkInfo) {
	tail := f.Size - first.RawSize
	f.Append = &first
	f.Chunks = 1 + int((tail+f.ChunkSize-1)/f.ChunkSize)
}

// ChunkRange is the offset and size of chunk idx of f in the source.
func (f *File) ChunkRange(idx int) (off, size int64) {
	if f.Append != nil {
		if idx == 0 {
			return 0, f.Append.RawSize
		}
		off = f.Append.RawSize + int64(idx-1)*f.ChunkSize
	} else {
		off = int64(idx) * f.ChunkSize
	}
	return off, min(f.ChunkSize, f.Size-off)
}

// Request chunk sizes outside these bounds are refused.
const (
	MinRequestChunk = 64 << 10
	MaxRequestChunk = MaxChunkSize
)

// New validates s and plans every file within l. Errors name the input at
// fault; nothing outside the local file system is touched. It holds every
// file: a transfer walks with Open and Walk instead.
func New(s Spec, l Limits) (*Plan, error) {
	p, err := Open(s, l)
	if err != nil || p.stream {
		return p, err
	}
	err = p.Walk(func(f File) error {
		p.Files = append(p.Files, f)
		return nil
	}, func(k Skipped) { p.Skipped = append(p.Skipped, k) })
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Open validates s within l and returns its plan without walking the
// sources: Walk then yields the files. A plan of standard input has its
// one file already.
func Open(s Spec, l Limits) (*Plan, error) {
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
	if s.Convert != nil {
		cv := &Convert{Match: s.Convert.Match, Schema: s.Convert.Schema, Compression: s.Convert.Compression, BadRows: s.Convert.BadRows, Text: s.Convert.Text,
			InferRows: s.Convert.InferRows}
		if err := cv.check(); err != nil {
			return nil, err
		}
		s.Convert = cv
	}
	if IsStdin(s.Sources) {
		if s.Convert != nil {
			return nil, fmt.Errorf("standard input cannot be converted to Parquet: a file is cut into parts before it is read")
		}
		p, err := streamPlan(s, l, c, level)
		if p != nil {
			p.stream = true
		}
		return p, err
	}
	sel, err := checkSelection(s.Sources, s.Selection)
	if err != nil {
		return nil, err
	}
	s.Selection = sel
	p := &Plan{Dest: dest, Codec: c, Level: level, Symlinks: sel.Symlinks, spec: s, limits: l}
	if len(s.Roots) > 0 {
		if p.conf, err = newConfiner(s.Roots); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// ObjectsPrefix is a prefix every final object of the plan starts with:
// the destination's, or, for one source, the source's own under it, so
// that a listing of what is there sees only what the transfer may write.
func (p *Plan) ObjectsPrefix() string {
	prefix := p.Dest.Prefix
	if prefix != "" {
		prefix += "/"
	}
	if len(p.spec.Sources) != 1 {
		return prefix
	}
	src := p.spec.Sources[0]
	if p.stream {
		return p.Files[0].Object
	}
	base := filepath.Base(filepath.Clean(src))
	if base == "." || base == "/" || base == ".." {
		return prefix
	}
	st, err := os.Stat(src)
	switch {
	case err != nil || p.conf != nil:
		return prefix // the walk says why, or resolves it inside its root
	case st.IsDir():
		return p.Dest.Object(base, "") + "/"
	}
	return p.Dest.Object(base, p.suffix(base))
}

// Converts reports whether the plan converts delimited text to Parquet.
func (p *Plan) Converts() bool { return p.spec.Convert != nil }

// suffix is what follows the relative path rel in its object's name: the
// codec's extension, or "/" and the part's name for a converted file.
func (p *Plan) suffix(rel string) string {
	if p.spec.Convert.converts(path.Base(rel)) {
		return convertKey
	}
	return p.Codec.Ext()
}

// Walk walks the plan's sources and calls fn with each file, in the order
// of the final object names, as it finds it (a plan of standard input: its
// one file), and skip with what the walk skips. It sets Excluded. Memory
// does not grow with the number of files: the walk holds the entries of the
// directories it is in.
func (p *Plan) Walk(fn func(File) error, skip func(Skipped)) error {
	if p.stream {
		for _, f := range p.Files {
			if err := fn(f); err != nil {
				return err
			}
		}
		return nil
	}
	ext := p.Codec.Ext()
	excluded, err := walkOrdered(p.spec.Sources, p.conf, p.spec.Selection, p.suffix, func(sf SourceFile) error {
		if cv := p.spec.Convert; cv.converts(path.Base(sf.Rel)) {
			if sf.Size == 0 {
				// A day with nothing to export, not a table: counted
				// and named, never fatal to the other files.
				skip(Skipped{Skip: Skip{Path: sf.Path, Rel: sf.Rel, Reason: SkipEmptyTable}, Object: p.Dest.Object(sf.Rel, "")})
				return nil
			}
			target, err := ChunkSize(sf.Size, p.spec.ChunkSize, codec.None, p.limits)
			if err != nil {
				return fmt.Errorf("source %s: %w", sf.Path, err)
			}
			return cv.parts(sf, p.Dest, target, fn)
		}
		obj := p.Dest.Object(sf.Rel, ext)
		if err := checkFinal(obj); err != nil {
			return fmt.Errorf("source %s: object name: %w", sf.Path, err)
		}
		size, err := ChunkSize(sf.Size, p.spec.ChunkSize, p.Codec, p.limits)
		if err != nil {
			return fmt.Errorf("source %s: %w", sf.Path, err)
		}
		return fn(File{SourceFile: sf, Object: obj, ChunkSize: size, Chunks: ChunkCount(sf.Size, size)})
	}, func(k Skip) { skip(Skipped{Skip: k, Object: p.Dest.Object(k.Rel, p.suffix(k.Rel))}) })
	p.Excluded = excluded
	return err
}

func codecLevel(c codec.Codec, level int) (codec.Codec, int, error) {
	if c == "" {
		c = codec.Zstd
	}
	if _, err := codec.Parse(string(c)); err != nil {
		return "", 0, err
	}
	if level == 0 && c == codec.Zstd {
		return c, 0, nil // each chunk's level adapts (package level)
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
