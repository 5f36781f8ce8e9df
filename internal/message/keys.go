package message

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"
)

// KeyRoot is the prefix of key objects, one per transfer. It is not under
// StagingRoot: IAM lets submitters create objects here but not replace or
// delete them, so a key object, once written, is the transfer's own (see
// Keys).
const KeyRoot = ".ferry-keys/"

// KeyObject is the key object of a transfer.
func KeyObject(transferID string) string { return KeyRoot + transferID }

// MaxKeys is the most key hashes a key object holds.
const MaxKeys = 16

// Keys is a transfer's key object: the SHA-256, in hex, of every end key
// that may end the transfer (its producer's; the requester's, from a
// request's end_key_sha256; an operator's, added with producer cancel
// --operator). Pub/Sub does not say who published a message, so an end
// event on the control topic (sealed, failed, cancel) proves itself with a
// key: the merger acts on it only when the key's SHA-256 is listed here.
//
// The producer writes the object before anything else of the transfer,
// under a does-not-exist precondition, so a transfer id that appears in a
// listing already has its key object. Replacing it needs
// storage.objects.delete on KeyRoot, which terraform/ grants to the
// producer service and operators, not to submitters: a submitter cannot
// put its own key into another's transfer.
type Keys struct {
	V          int      `json:"v"`
	TransferID string   `json:"transfer_id"`
	SHA256     []string `json:"sha256"`
	// Request is the SHA-256 (hex) of the request that started the
	// transfer (its sources, destination and options): an idempotency
	// key names one request, and a producer refuses the same key for
	// another. Empty in the key objects of older producers.
	Request string `json:"request,omitempty"`
	// Chunks is the SHA-256 (hex) of the run's chunk key: every chunk
	// message of the run carries the key (Chunk.Key), and a worker
	// uploads a chunk only when its key hashes to this. The key travels
	// only in chunk messages, which only workers read; whoever may
	// publish on the chunks topic (every submitter) cannot make one of
	// another transfer's. Empty in the key objects of older producers.
	Chunks string `json:"chunks,omitempty"`
}

func (k *Keys) version() int { return k.V }

// NewEndKey returns a fresh end key: 32 random bytes in hex.
func NewEndKey() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// KeyHash is the SHA-256 of an end key, in hex: what a key object lists.
func KeyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// ValidKeyHex reports whether s is 64 lowercase hex digits: an end key or
// its hash.
func ValidKeyHex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Check rejects a key object ferry could not have written for transferID.
func (k *Keys) Check(transferID string) error {
	if k.TransferID != transferID {
		return fmt.Errorf("key object of transfer %.64q, want %.64q", k.TransferID, transferID)
	}
	if len(k.SHA256) == 0 || len(k.SHA256) > MaxKeys {
		return fmt.Errorf("%d key hashes, want 1 to %d", len(k.SHA256), MaxKeys)
	}
	for _, h := range k.SHA256 {
		if !ValidKeyHex(h) {
			return fmt.Errorf("key hash %.80q is not 64 lowercase hex digits", h)
		}
	}
	if k.Request != "" && !ValidKeyHex(k.Request) {
		return fmt.Errorf("request digest %.80q is not 64 lowercase hex digits", k.Request)
	}
	if k.Chunks != "" && !ValidKeyHex(k.Chunks) {
		return fmt.Errorf("chunk key hash %.80q is not 64 lowercase hex digits", k.Chunks)
	}
	return nil
}

// ProvesChunk reports whether key, a chunk message's, is the chunk key k
// lists. A key object of an older producer lists none, and proves every
// chunk of its transfer.
func (k *Keys) ProvesChunk(key string) bool {
	return k.Chunks == "" || (ValidKeyHex(key) && KeyHash(key) == k.Chunks)
}

// Opens reports whether key is one of the end keys k lists.
func (k *Keys) Opens(key string) bool {
	return ValidKeyHex(key) && slices.Contains(k.SHA256, KeyHash(key))
}

// Add lists the hash of one more key, dropping the oldest past MaxKeys.
func (k *Keys) Add(hash string) {
	if slices.Contains(k.SHA256, hash) {
		return
	}
	k.SHA256 = append(k.SHA256, hash)
	if len(k.SHA256) > MaxKeys {
		k.SHA256 = k.SHA256[len(k.SHA256)-MaxKeys:]
	}
}

// NewTransferID returns the id of a transfer: derived from the idempotency key
// when there is one, so the same key always names the same transfer, else
// time-ordered and random. Anyone who knows a key can compute its id; see
// KeyedTransferID.
func NewTransferID(idempotencyKey string) string {
	return KeyedTransferID("", idempotencyKey)
}

// KeyedTransferID is NewTransferID under secret (FERRY_IDEMPOTENCY_SECRET):
// with one, a key's id is an HMAC-SHA256 of the key, which nobody without
// the secret can compute. A submitter may create key objects (it writes
// its own), so one who can compute another's id can create that
// transfer's key object first, with a key of its own that then ends the
// transfer. An empty secret gives NewTransferID's ids.
func KeyedTransferID(secret, idempotencyKey string) string {
	if idempotencyKey != "" {
		if secret != "" {
			mac := hmac.New(sha256.New, []byte(secret))
			mac.Write([]byte(idempotencyKey))
			return "h" + hex.EncodeToString(mac.Sum(nil)[:10])
		}
		sum := sha256.Sum256([]byte(idempotencyKey))
		return "k" + hex.EncodeToString(sum[:10])
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "t" + time.Now().UTC().Format("20060102t150405") + "-" + hex.EncodeToString(b[:])
}
