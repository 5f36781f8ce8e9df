package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"

	"github.com/ferry-dev/ferry/internal/bench/datagen"
	"github.com/ferry-dev/ferry/internal/crc32c"
)

// Sizes are the data sets of a bench run.
type Sizes struct {
	// Tiers of the large-file workload, by the seeds' names.
	Tiers []string
	// SmallFiles is the number of files of the source-tree-like set;
	// BigFiles × BigEach the seeds' transfer_manager set (100 × 10 MB).
	SmallFiles int
	BigFiles   int
	BigEach    int64
	// ShapedSize is the file sent over the shaped link.
	ShapedSize int64
	// CodecTier and RestoreTier pick the file of those workloads.
	CodecTier, RestoreTier string
	// Trees are the sizes of workload 7's trees of small files.
	Trees []TreeSize
	// RandomSize is workload 4's file of random bytes (incompressible).
	RandomSize int64
	// RealTreeGcloud runs gcloud storage cp -r beside ferry on the real
	// tree (Config.RealTree): two minutes for the Go distribution.
	RealTreeGcloud bool
}

// TreeSize is one tree of workload 7: its number of files, and whether
// gcloud storage cp -r runs beside ferry (at 119 files/s it needs 14
// minutes for 100,000 files, so only BENCH_FULL and BENCH_QUICK run it).
type TreeSize struct {
	Files  int
	Gcloud bool
}

// Plain is make bench: the seeds' 10 MB and 200 MB tiers, 5,000 small
// files and 100 × 10 MB, 100 MB over the shaped link.
var Plain = Sizes{Tiers: []string{"small", "medium"}, SmallFiles: 5000, BigFiles: 100, BigEach: 10_000_000,
	ShapedSize: 100_000_000, CodecTier: "medium", RestoreTier: "medium", Trees: []TreeSize{{Files: 100_000}}, RandomSize: 200_000_000, RealTreeGcloud: true}

// Full adds the 1.2 GB tier, and uses it for codecs and restore.
var Full = Sizes{Tiers: []string{"small", "medium", "large"}, SmallFiles: 5000, BigFiles: 100, BigEach: 10_000_000,
	ShapedSize: 100_000_000, CodecTier: "large", RestoreTier: "large",
	Trees: []TreeSize{{Files: 100_000, Gcloud: true}, {Files: 1_000_000}}, RandomSize: 200_000_000, RealTreeGcloud: true}

// Quick proves the bench works end to end in a few minutes: small data,
// figures that mean little.
var Quick = Sizes{Tiers: []string{"small"}, SmallFiles: 200, BigFiles: 10, BigEach: 1_000_000,
	ShapedSize: 10_000_000, CodecTier: "small", RestoreTier: "small", Trees: []TreeSize{{Files: 2_000, Gcloud: true}}, RandomSize: 10_000_000}

// File is one source file and its CRC32C (for checking what a peer stored).
type File struct {
	Path   string
	Size   int64
	CRC32C uint32
}

// Tree is a directory of source files.
type Tree struct {
	Dir   string
	Files int
	Bytes int64
	// Name is its tier name in rows: "files-5000", "files-100x10MB".
	Name string
}

// Data is every data set of a run, generated once and reused by later runs
// (the generator is deterministic).
type Data struct {
	Tier   map[string]File
	Small  Tree
	Big    Tree
	Shaped File
	// Random is incompressible: random bytes.
	Random File
	// Trees are workload 7's, made when it runs (a million files take a
	// while to write).
	Trees []Tree
}

func (d *Data) smallTier() string { return d.Small.Name }

// PrepareData generates what sizes asks for under dir, reusing files that
// are already there with the right size.
func PrepareData(ctx context.Context, bin, dir string, s Sizes) (*Data, error) {
	d := &Data{Tier: map[string]File{}}
	tiers := append([]string{}, s.Tiers...)
	tiers = append(tiers, s.CodecTier, s.RestoreTier)
	for _, name := range tiers {
		if _, ok := d.Tier[name]; ok || name == "" {
			continue
		}
		t, err := datagen.TierByName(name)
		if err != nil {
			return nil, err
		}
		f, err := csvFile(filepath.Join(dir, name+"_upload.csv"), t.Size, 1)
		if err != nil {
			return nil, err
		}
		d.Tier[name] = f
	}
	var err error
	if d.Shaped, err = csvFile(filepath.Join(dir, "shaped_upload.csv"), s.ShapedSize, 3); err != nil {
		return nil, err
	}
	if d.Random, err = randomFile(filepath.Join(dir, fmt.Sprintf("random-%s.bin", mbName(s.RandomSize))), s.RandomSize); err != nil {
		return nil, err
	}
	if d.Small, err = sourceTree(filepath.Join(dir, fmt.Sprintf("tree-%d", s.SmallFiles)), s.SmallFiles); err != nil {
		return nil, err
	}
	d.Small.Name = fmt.Sprintf("files-%d", s.SmallFiles)
	bigDir := filepath.Join(dir, fmt.Sprintf("many-%dx%d", s.BigFiles, s.BigEach))
	if d.Big, err = treeOf(bigDir); err != nil || d.Big.Files != s.BigFiles {
		if err := os.RemoveAll(bigDir); err != nil {
			return nil, err
		}
		if err := datagen.WriteManySmall(bigDir, s.BigFiles, s.BigEach, 5); err != nil {
			return nil, err
		}
		if d.Big, err = treeOf(bigDir); err != nil {
			return nil, err
		}
	}
	d.Big.Name = fmt.Sprintf("files-%dx%s", s.BigFiles, mbName(s.BigEach))
	return d, ctx.Err()
}

func mbName(n int64) string {
	if n%1_000_000 == 0 {
		return strconv.FormatInt(n/1_000_000, 10) + "MB"
	}
	return strconv.FormatInt(n, 10) + "B"
}

// csvFile writes a seed-like CSV of about size bytes to path unless it is
// there already, and returns it with its CRC32C.
func csvFile(path string, size int64, seed int64) (File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return File{}, err
	}
	if st, err := os.Stat(path); err != nil || st.Size() < size || st.Size() > size+1024 {
		f, err := os.Create(path)
		if err != nil {
			return File{}, err
		}
		if _, err := datagen.WriteCSV(f, size, seed); err != nil {
			f.Close()
			return File{}, fmt.Errorf("%s: %w", path, err)
		}
		if err := f.Close(); err != nil {
			return File{}, err
		}
	}
	return checksumFile(path)
}

// randomFile writes size random bytes (a fixed seed) to path unless it is
// there already, and returns it with its CRC32C.
func randomFile(path string, size int64) (File, error) {
	if st, err := os.Stat(path); err != nil || st.Size() != size {
		f, err := os.Create(path)
		if err != nil {
			return File{}, err
		}
		r := rand.New(rand.NewPCG(17, 19))
		buf := make([]byte, 1<<20)
		for left := size; left > 0 && err == nil; left -= int64(len(buf)) {
			for i := 0; i < len(buf); i += 8 {
				binary.LittleEndian.PutUint64(buf[i:], r.Uint64())
			}
			_, err = f.Write(buf[:min(left, int64(len(buf)))])
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return File{}, fmt.Errorf("%s: %w", path, err)
		}
	}
	return checksumFile(path)
}

func checksumFile(path string) (File, error) {
	f, err := os.Open(path)
	if err != nil {
		return File{}, err
	}
	defer f.Close()
	h := crc32c.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return File{}, fmt.Errorf("%s: %w", path, err)
	}
	return File{Path: path, Size: n, CRC32C: h.Sum32()}, nil
}

// sourceTree writes n files of a few KB to 100 KB (log-uniform, like a
// source tree's) in directories of about 40 files, two levels deep.
func sourceTree(dir string, n int) (Tree, error) {
	if t, err := treeOf(dir); err == nil && t.Files == n {
		return t, nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return Tree{}, err
	}
	r := rand.New(rand.NewPCG(11, 13))
	for i := range n {
		size := int64(math.Exp(math.Log(2_000) + r.Float64()*(math.Log(100_000)-math.Log(2_000))))
		p := filepath.Join(dir, fmt.Sprintf("pkg%02d", i/400), fmt.Sprintf("sub%02d", i/40%10), fmt.Sprintf("file%05d.csv", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return Tree{}, err
		}
		f, err := os.Create(p)
		if err != nil {
			return Tree{}, err
		}
		_, err = datagen.WriteCSV(f, size, int64(100+i))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return Tree{}, fmt.Errorf("%s: %w", p, err)
		}
	}
	return treeOf(dir)
}

// tinyTree writes n files of 100 to 1,100 bytes, 1,000 to a directory
// under 100 top directories: a tree whose cost is its file count.
func tinyTree(dir string, n int) (Tree, error) {
	if t, err := treeOf(dir); err == nil && t.Files == n {
		return t, nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return Tree{}, err
	}
	line := []byte("0123456789,abcdefghij,ABCDEFGHIJ,0.25,2026-12-02T00:00:00Z,ferry\n")
	buf := make([]byte, 0, 1200)
	for i := range n {
		d := filepath.Join(dir, fmt.Sprintf("top%02d", i/1000%100), fmt.Sprintf("dir%04d", i/1000))
		if i%1000 == 0 {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return Tree{}, err
			}
		}
		buf = buf[:0]
		for len(buf) < 100+i%1000 {
			buf = append(buf, line...)
		}
		buf = strconv.AppendInt(buf[:100+i%1000], int64(i), 10)
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%07d.csv", i)), buf, 0o644); err != nil {
			return Tree{}, err
		}
	}
	return treeOf(dir)
}

// treeOf counts the regular files under dir and their bytes.
func treeOf(dir string) (Tree, error) {
	t := Tree{Dir: dir}
	err := filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.Type().IsRegular() {
			info, err := e.Info()
			if err != nil {
				return err
			}
			t.Files++
			t.Bytes += info.Size()
		}
		return nil
	})
	return t, err
}
