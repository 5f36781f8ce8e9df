package gcs_test

import (
	"context"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/teststack"
)

func TestMain(m *testing.M) { os.Exit(teststack.MainWithGCS(m)) }

func TestNewRangeReader(t *testing.T) {
	ctx := context.Background()
	s := teststack.Bucket(t, "gcs-range")
	if _, err := s.PutSmall(ctx, "gcs-range", "o", []byte("0123456789"), false, ""); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		off, n int64
		want   string
	}{{0, -1, "0123456789"}, {3, 4, "3456"}, {7, -1, "789"}, {-2, -1, "89"}} {
		r, err := s.NewRangeReader(ctx, "gcs-range", "o", tc.off, tc.n)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(r)
		r.Close()
		if err != nil || string(b) != tc.want {
			t.Errorf("range %d+%d: %q, %v; want %q", tc.off, tc.n, b, err, tc.want)
		}
	}
	_, err := s.NewRangeReader(ctx, "gcs-range", "missing", 0, 1)
	if !errors.Is(err, gcs.ErrNotFound) {
		t.Fatalf("missing object: %v, want ErrNotFound", err)
	}
}
