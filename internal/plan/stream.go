package plan

import (
	"fmt"
	"path"
	"strings"

	"github.com/ferry-dev/ferry/internal/codec"
)

// Stdin is the source that names standard input: `producer submit -
// gs://BUCKET/PREFIX/NAME`.
const Stdin = "-"

// StdinName is how errors and the manifest name standard input.
const StdinName = "standard input"

// Stream is how a source of unknown length — standard input — is cut into
// chunks. The length is known only at its end, so chunk i's size cannot
// follow from it: chunks start at First and double every Every chunks up to
// Max, so that MaxChunks chunks cover large streams while small ones keep
// small chunks (and many workers).
type Stream struct {
	First, Max       int64
	Every, MaxChunks int
}

// Chunk is the size of chunk i.
func (s *Stream) Chunk(i int) int64 {
	size := s.First
	for k := i / s.Every; k > 0 && size < s.Max; k-- {
		size *= 2
	}
	return min(size, s.Max)
}

// Most is the largest stream MaxChunks chunks hold.
func (s *Stream) Most() int64 {
	var n int64
	for i := 0; i < s.MaxChunks; i++ {
		c := s.Chunk(i)
		if c == s.Max {
			return n + int64(s.MaxChunks-i)*c
		}
		n += c
	}
	return n
}

// TooLong is the error for a stream longer than Most: it names the limit
// and what raises it.
func (s *Stream) TooLong(l Limits) error {
	why := fmt.Sprintf("chunks of at most %d bytes (the most FERRY_PRODUCER_MEMORY allows a stream)", s.Max)
	raise := "FERRY_MAX_CHUNKS or FERRY_PRODUCER_MEMORY"
	if l.MessageMax > 0 {
		why = fmt.Sprintf("chunks of at most %d bytes (FERRY_TRANSPORT=pubsub: a compressed chunk must fit FERRY_MESSAGE_MAX=%d)", s.Max, l.MessageMax)
		raise = "FERRY_MAX_CHUNKS"
	}
	return fmt.Errorf("%s: longer than %d bytes, the most FERRY_MAX_CHUNKS=%d %s hold; raise %s",
		StdinName, s.Most(), s.MaxChunks, why, raise)
}

// streamPlan plans standard input as the one file of the transfer: the
// destination's last element names it, as with gcloud storage cp -
// gs://BUCKET/PREFIX/NAME, and the codec's extension is appended
// (NAME.zst), as for every file.
func streamPlan(s Spec, l Limits, c codec.Codec, level int) (*Plan, error) {
	if len(s.Sources) != 1 {
		return nil, fmt.Errorf("source %s (%s) must be the only source", Stdin, StdinName)
	}
	dest, err := ParseDestination(s.Destination)
	if err != nil {
		return nil, err
	}
	if dest.Prefix == "" || strings.HasSuffix(s.Destination, "/") {
		return nil, fmt.Errorf("destination %q: %s needs an object name: gs://BUCKET/PREFIX/NAME", s.Destination, StdinName)
	}
	dir, name := path.Split(dest.Prefix)
	dest.Prefix = strings.TrimSuffix(dir, "/")
	obj := dest.Object(name, c.Ext())
	if err := checkFinal(obj); err != nil {
		return nil, fmt.Errorf("destination %q: object name: %w", s.Destination, err)
	}
	st := &Stream{Max: MaxChunkSize, MaxChunks: l.maxChunks()}
	if l.StreamMax > 0 {
		st.Max = min(st.Max, l.StreamMax)
	}
	if l.MessageMax > 0 {
		st.Max = min(st.Max, MessageChunkCap(c, l.MessageMax))
	}
	st.First = min(s.ChunkSize, st.Max)
	st.Every = max(1, st.MaxChunks/16)
	f := File{SourceFile: SourceFile{Path: StdinName, Rel: name}, Object: obj, ChunkSize: st.First, Stream: st}
	return &Plan{Dest: dest, Codec: c, Level: level, Files: []File{f}}, nil
}

// IsStdin reports whether sources name standard input.
func IsStdin(sources []string) bool {
	for _, s := range sources {
		if s == Stdin {
			return true
		}
	}
	return false
}
