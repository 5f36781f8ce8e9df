package peer

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"cloud.google.com/go/storage"
	"golang.org/x/sync/errgroup"
)

// GoUpload is the seeds' single-stream baseline in Go: one file to one
// object with cloud.google.com/go/storage, as a program a user would write.
// Simple sends the file in one request; resumable in chunks of chunkSize
// (the library's default is 16 MiB; the seeds used 10 MB). It reaches
// fake-gcs-server through STORAGE_EMULATOR_HOST.
func GoUpload(ctx context.Context, resumable bool, chunkSize int, src, dst string) error {
	bucket, name, ok := strings.Cut(strings.TrimPrefix(dst, "gs://"), "/")
	if !strings.HasPrefix(dst, "gs://") || !ok || bucket == "" || name == "" {
		return fmt.Errorf("destination %q: want gs://BUCKET/OBJECT", dst)
	}
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	c, err := storage.NewClient(ctx)
	if err != nil {
		return fmt.Errorf("storage client: %w", err)
	}
	defer func() { _ = c.Close() }()
	w := c.Bucket(bucket).Object(name).NewWriter(ctx)
	w.ChunkSize = 0
	if resumable {
		w.ChunkSize = chunkSize
	}
	if _, err := io.Copy(w, f); err != nil {
		_ = w.Close()
		return fmt.Errorf("upload %s to %s: %w", src, dst, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("upload %s to %s: %w", src, dst, err)
	}
	return nil
}

// PutTree is the ideal client of the many-files workload: the smallest
// program that puts every file under dir as dst/<base of dir>/<path> (as
// gcloud storage cp -r names them), one simple request each, parallel in
// flight, and nothing else: no compression, no checks of its own beyond the
// library's. It is the server's ceiling on this machine; every method is
// also shown as a fraction of it.
func PutTree(ctx context.Context, parallel int, dir, dst string) error {
	bucket, prefix, _ := strings.Cut(strings.TrimPrefix(dst, "gs://"), "/")
	if !strings.HasPrefix(dst, "gs://") || bucket == "" {
		return fmt.Errorf("destination %q: want gs://BUCKET/PREFIX", dst)
	}
	c, err := storage.NewClient(ctx)
	if err != nil {
		return fmt.Errorf("storage client: %w", err)
	}
	defer func() { _ = c.Close() }()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	root := filepath.Clean(dir)
	base := filepath.Base(root)
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		name := path.Join(prefix, base, filepath.ToSlash(rel))
		g.Go(func() error {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			w := c.Bucket(bucket).Object(name).NewWriter(gctx)
			w.ChunkSize = 0
			if _, err := io.Copy(w, f); err != nil {
				_ = w.Close()
				return fmt.Errorf("put %s: %w", name, err)
			}
			if err := w.Close(); err != nil {
				return fmt.Errorf("put %s: %w", name, err)
			}
			return nil
		})
		return nil
	})
	if werr := g.Wait(); err == nil {
		err = werr
	}
	return err
}
