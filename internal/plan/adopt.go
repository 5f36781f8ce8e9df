package plan

import (
	"fmt"

	"github.com/ferry-dev/ferry/internal/message"
)

// Adopt is a file another host's walk planned (a shard of a pooled
// transfer, message.ShardFile), checked against this plan as Walk checks
// what it finds: its object is the one this plan names for its relative
// path, its chunks are the ones this plan cuts, and its path lies under
// this host's roots, through which it is then read. Nothing the shard says
// picks a path, an object or a chunk size this plan would not.
func (p *Plan) Adopt(sf SourceFile, object string, chunkSize int64, chunks int, appendTo *message.ChunkInfo) (File, error) {
	if p.conf == nil {
		return File{}, fmt.Errorf("source %s: this host confines no sources (FERRY_SOURCE_ROOTS), so it reads none of another's walk", sf.Path)
	}
	root, in, err := p.conf.place(sf.Path)
	if err != nil {
		return File{}, err
	}
	sf.Root, sf.InRoot = root, in
	if err := checkName(sf.Rel); err != nil {
		return File{}, fmt.Errorf("source %s: relative path %q: %w", sf.Path, sf.Rel, err)
	}
	obj := p.Dest.Object(sf.Rel, p.suffix(sf.Rel))
	if obj != object {
		return File{}, fmt.Errorf("source %s: the shard names its object %s, this plan %s", sf.Path, object, obj)
	}
	if err := checkFinal(obj); err != nil {
		return File{}, fmt.Errorf("source %s: object name: %w", sf.Path, err)
	}
	size, err := ChunkSize(sf.Size, p.spec.ChunkSize, p.Codec, p.limits)
	if err != nil {
		return File{}, fmt.Errorf("source %s: %w", sf.Path, err)
	}
	f := File{SourceFile: sf, Object: obj, ChunkSize: size, Chunks: ChunkCount(sf.Size, size)}
	if appendTo != nil {
		if appendTo.RawSize <= 0 || appendTo.RawSize >= sf.Size {
			return File{}, fmt.Errorf("source %s: an append of %d bytes onto %d", sf.Path, sf.Size, appendTo.RawSize)
		}
		f.AppendTo(*appendTo)
	}
	if size != chunkSize || f.Chunks != chunks {
		return File{}, fmt.Errorf("source %s: the shard cuts it into %d chunks of %d bytes, this plan into %d of %d", sf.Path, chunks, chunkSize, f.Chunks, size)
	}
	return f, nil
}
