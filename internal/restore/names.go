package restore

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"strings"
)

// Ferry's own prefixes in a bucket: staging objects and done markers are
// never restored.
var ferryPrefixes = []string{".ferry/", ".ferry-done/"}

func isFerryInternal(name string) bool {
	for _, p := range ferryPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// partSuffix and logSuffix name an interrupted restore's leftovers.
const (
	partSuffix = ".ferry-part"
	logSuffix  = ".log"
)

// checkRel refuses an output name that is not a plain relative path inside
// the destination, or that restore keeps for its own temporary files.
// Symbolic links inside the destination are os.Root's to refuse.
func checkRel(rel string) error {
	if rel == "" {
		return fmt.Errorf("empty output name")
	}
	if strings.HasPrefix(rel, "/") {
		return fmt.Errorf("output name %q is absolute", rel)
	}
	if strings.ContainsRune(rel, 0) || strings.ContainsRune(rel, '\\') {
		return fmt.Errorf("output name %q contains NUL or a backslash", rel)
	}
	for _, seg := range strings.Split(rel, "/") {
		switch seg {
		case "":
			return fmt.Errorf("output name %q has an empty path element", rel)
		case ".", "..":
			return fmt.Errorf("output name %q contains %q, which would leave the destination", rel, seg)
		}
	}
	base := path.Base(rel)
	if strings.HasPrefix(base, ".") && (strings.HasSuffix(base, partSuffix) || strings.HasSuffix(base, partSuffix+logSuffix)) {
		return fmt.Errorf("output name %q is reserved for restore's temporary files", rel)
	}
	return nil
}

// tempName is where rel is written until its bytes are proven: a hidden
// file beside it, the same on every run so that the next run finds what an
// interrupted one left.
func tempName(rel string) string {
	dir, base := path.Split(rel)
	if len(base) > 200 { // keep within NAME_MAX with the affixes
		sum := sha256.Sum256([]byte(base))
		base = hex.EncodeToString(sum[:16])
	}
	return dir + "." + base + partSuffix
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
