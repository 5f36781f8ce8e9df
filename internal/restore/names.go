package restore

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/names"
)

// isFerryInternal: ferry's own prefixes in a bucket (staging, done
// markers, key objects: message.ReservedRoots) are never restored.
func isFerryInternal(name string) bool { return message.ReservedRoot(name) != "" }

// partSuffix and logSuffix name an interrupted restore's leftovers.
const (
	partSuffix = names.PartSuffix
	logSuffix  = names.LogSuffix
)

// checkRel refuses an output name that is not a plain relative path inside
// the destination, or that restore keeps for its own temporary files: the
// rule producer submit applies before it sends a file (names.Check).
// Symbolic links inside the destination are os.Root's to refuse.
func checkRel(rel string) error {
	if err := names.Check(rel); err != nil {
		return fmt.Errorf("output %w", err)
	}
	return nil
}

// shortBase is the longest base name whose temporary name is the base
// itself between the affixes; a longer one's must fit NAME_MAX (255).
const shortBase = 200

// tempName is where rel is written until its bytes are proven: a hidden
// file beside it, the same on every run so that the next run finds what an
// interrupted one left, and the temporary name of no other object. A base
// longer than shortBase bytes goes in as its first 160 bytes and its whole
// SHA-256: more than shortBase bytes, so never a short base's own (an
// object named by a long name's digest once shared its temporary file).
// The names are reserved (names.Reserved) as a path's last element only:
// a directory of the tree may have one, and altTemp steps around it.
func tempName(rel string) string {
	dir, base := path.Split(rel)
	if len(base) > shortBase {
		sum := sha256.Sum256([]byte(base))
		cut := 160
		for cut > 0 && !utf8.RuneStart(base[cut]) {
			cut--
		}
		base = base[:cut] + "." + hex.EncodeToString(sum[:])
	}
	return dir + "." + base + partSuffix
}

// altTemp is the n-th temporary name of rel after tempName (n ≥ 1), for
// when a directory of the tree holds the ones before: reserved too, and
// found again by the next run, which meets the same directories.
func altTemp(rel string, n int) string {
	t := strings.TrimSuffix(tempName(rel), partSuffix)
	return fmt.Sprintf("%s.%d%s", t, n, partSuffix)
}

// outputRel is the output name of object name found under prefix: the
// relative path, without the codec extension ferry added.
func outputRel(name, prefix string, k kind) string {
	rel := name
	if prefix != "" {
		rel = strings.TrimPrefix(name, prefix+"/")
	}
	if k.ferry {
		if trimmed := strings.TrimSuffix(rel, k.codec.Ext()); trimmed != "" && !strings.HasSuffix(trimmed, "/") {
			rel = trimmed
		}
	}
	return rel
}
