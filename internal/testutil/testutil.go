// Package testutil holds the helpers tests of many packages share: a
// failed step ends the test, and seed-like CSV (internal/bench/datagen's)
// written to a file or held in memory. Only tests import it.
package testutil

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/ferry-dev/ferry/internal/bench/datagen"
)

// OK ends the test when err is not nil.
func OK(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// CSV is about size bytes of seed-like CSV (whole records; a little
// more than size) from seed.
func CSV(t testing.TB, size, seed int64) []byte {
	t.Helper()
	var b bytes.Buffer
	_, err := datagen.WriteCSV(&b, size, seed)
	OK(t, err)
	return b.Bytes()
}

// WriteCSV writes CSV(size, seed) to path, making its directory.
func WriteCSV(t testing.TB, path string, size, seed int64) {
	t.Helper()
	OK(t, os.MkdirAll(filepath.Dir(path), 0o755))
	f, err := os.Create(path)
	OK(t, err)
	defer f.Close()
	_, err = datagen.WriteCSV(f, size, seed)
	OK(t, err)
	OK(t, f.Close())
}
