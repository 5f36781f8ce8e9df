package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"cloud.google.com/go/storage"
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
