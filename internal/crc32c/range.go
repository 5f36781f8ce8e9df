package crc32c

import (
	"fmt"
	"io"
	"runtime"

	"golang.org/x/sync/errgroup"
)

// rangeSegment is the least a goroutine of OfRange reads: below it, a
// second reader costs more than it saves.
const rangeSegment = 64 << 20

// rangeBlock is each read of OfRange: large enough that a read costs its
// copy, not the system call.
const rangeBlock = 1 << 20

// OfRange returns the CRC32C of the n bytes of r from off. A range of
// several times 64 MiB is read in segments by up to GOMAXPROCS goroutines
// whose CRC32Cs are combined, so that proving the prefix of a large file
// (an append) takes the time of reading it on every core, not one. It
// fails when r has fewer bytes.
func OfRange(r io.ReaderAt, off, n int64) (uint32, error) {
	return ofRange(r, off, n, rangeSegment)
}

func ofRange(r io.ReaderAt, off, n, segment int64) (uint32, error) {
	segs := int64(min(runtime.GOMAXPROCS(0), 8))
	segs = max(1, min(segs, n/segment))
	crcs := make([]uint32, segs)
	lens := make([]int64, segs)
	var g errgroup.Group
	for i := range segs {
		from := off + i*(n/segs)
		lens[i] = n / segs
		if i == segs-1 {
			lens[i] = n - i*(n/segs)
		}
		g.Go(func() error {
			h := New()
			got, err := io.CopyBuffer(h, io.NewSectionReader(r, from, lens[i]), make([]byte, min(rangeBlock, max(lens[i], 1))))
			if err != nil {
				return err
			}
			if got != lens[i] {
				return fmt.Errorf("%d bytes from offset %d: %w", lens[i], from, io.ErrUnexpectedEOF)
			}
			crcs[i] = h.Sum32()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	crc := crcs[0]
	for i := int64(1); i < segs; i++ {
		crc = Combine(crc, crcs[i], lens[i])
	}
	return crc, nil
}
