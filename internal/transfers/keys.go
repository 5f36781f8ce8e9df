package transfers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
)

// ErrNoKey: the caller holds no end key of the transfer.
var ErrNoKey = errors.New("no end key")

// KeyDir is where producer submit keeps end keys: dir when set
// (FERRY_KEY_DIR), else $XDG_STATE_HOME/ferry/keys, else
// ~/.local/state/ferry/keys.
func KeyDir(dir string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	if x := os.Getenv("XDG_STATE_HOME"); x != "" {
		return filepath.Join(x, "ferry", "keys"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("where to keep end keys: %w (set FERRY_KEY_DIR)", err)
	}
	return filepath.Join(home, ".local", "state", "ferry", "keys"), nil
}

// SaveKey keeps transfer id's end key in dir, readable by its owner only.
func SaveKey(dir, id, key string) error {
	if !message.ValidTransferID(id) || !message.ValidKeyHex(key) {
		return fmt.Errorf("end key of transfer %.64q: not one ferry makes", id)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("end key of transfer %s: %w", id, err)
	}
	p := filepath.Join(dir, id)
	if err := os.WriteFile(p+".tmp", []byte(key+"\n"), 0o600); err != nil {
		return fmt.Errorf("end key of transfer %s: %w", id, err)
	}
	if err := os.Rename(p+".tmp", p); err != nil {
		return fmt.Errorf("end key of transfer %s: %w", id, err)
	}
	return nil
}

// LoadKey reads an end key from path (a file holding its 64 hex digits).
func LoadKey(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("%w: %s does not exist", ErrNoKey, path)
	}
	if err != nil {
		return "", fmt.Errorf("end key: %w", err)
	}
	key := strings.TrimSpace(string(b))
	if !message.ValidKeyHex(key) {
		return "", fmt.Errorf("end key in %s: want 64 lowercase hex digits", path)
	}
	return key, nil
}

// keyStore is what adding an operator's key needs of GCS.
type keyStore interface {
	Attrs(ctx context.Context, bucket, name string) (gcs.Attrs, error)
	ReadAll(ctx context.Context, bucket, name string) ([]byte, error)
	Upload(ctx context.Context, bucket, name string, r io.Reader, opt gcs.UploadOptions) (gcs.Attrs, error)
}

var _ keyStore = (*gcs.Store)(nil)

// OperatorKey adds a fresh end key to transfer id's key object and
// returns it, for producer cancel --operator. Replacing the key object
// needs storage.objects.delete on the key prefix, which terraform/ grants
// to operators and the producer service, not to submitters: GCS's answer
// is the proof that the caller may end any transfer.
func OperatorKey(ctx context.Context, s keyStore, bucket, id string) (string, error) {
	name := message.KeyObject(id)
	for range 3 {
		a, err := s.Attrs(ctx, bucket, name)
		if errors.Is(err, gcs.ErrNotFound) {
			return "", fmt.Errorf("transfer %s has no key object gs://%s/%s (never started, or started by a ferry without end keys): %w", id, bucket, name, err)
		}
		if err != nil {
			return "", err
		}
		b, err := s.ReadAll(ctx, bucket, name)
		if err != nil {
			return "", err
		}
		var k message.Keys
		if message.Decode(b, &k) != nil || k.Check(id) != nil {
			k = message.Keys{V: message.Version, TransferID: id} // not ferry's: replaced
		}
		key := message.NewEndKey()
		k.Add(message.KeyHash(key))
		body := message.Encode(k)
		_, err = s.Upload(ctx, bucket, name, bytes.NewReader(body), gcs.UploadOptions{Size: int64(len(body)), CRC32C: crc32c.Checksum(body),
			IfGeneration: a.Generation, ContentType: "application/json"})
		if errors.Is(err, gcs.ErrPrecondition) {
			continue // changed since it was read
		}
		if err != nil {
			return "", fmt.Errorf("adding an operator's end key to gs://%s/%s (it needs storage.objects.delete there, an operator's grant): %w", bucket, name, err)
		}
		return key, nil
	}
	return "", fmt.Errorf("gs://%s/%s changed three times while an operator's end key was added; try again", bucket, name)
}
