// Package names is the one rule for the relative paths ferry turns into
// object names (producer submit, producer serve) and back into files
// (restore): what one side refuses, the other refuses too, so nothing is
// uploaded that cannot be restored. It also names restore's temporary files,
// which no restored file may be called.
package names

import (
	"fmt"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxObject is the longest object name GCS accepts, in bytes.
const MaxObject = 1024

// PartSuffix and LogSuffix name an interrupted restore's leftovers: the
// temporary file ".NAME.ferry-part" and its journal ".NAME.ferry-part.log".
const (
	PartSuffix = ".ferry-part"
	LogSuffix  = ".log"
)

// Check refuses a slash-separated relative path that GCS would refuse as
// part of an object name or that restore could not write back: invalid
// UTF-8, control characters (NUL among them), backslashes, an absolute
// path, empty, "." or ".." elements, more than MaxObject bytes, or the name
// of one of restore's temporary files. Its errors quote at most 64 bytes of
// rel.
func Check(rel string) error {
	switch {
	case rel == "":
		return fmt.Errorf("empty name")
	case !utf8.ValidString(rel):
		return fmt.Errorf("name %.64q is not valid UTF-8", rel)
	case len(rel) > MaxObject:
		return fmt.Errorf("name %.64q… is %d bytes; GCS allows %d", rel, len(rel), MaxObject)
	case strings.HasPrefix(rel, "/"):
		return fmt.Errorf("name %.64q is absolute", rel)
	case strings.ContainsRune(rel, '\\'):
		return fmt.Errorf("name %.64q contains a backslash, which restore cannot write back", rel)
	}
	for _, r := range rel {
		if unicode.IsControl(r) {
			return fmt.Errorf("name %.64q contains control character %U", rel, r)
		}
	}
	for _, seg := range strings.Split(rel, "/") {
		switch seg {
		case "":
			return fmt.Errorf("name %.64q has an empty path element", rel)
		case ".", "..":
			return fmt.Errorf("name %.64q contains %q, which would leave the destination", rel, seg)
		}
	}
	if Reserved(path.Base(rel)) {
		return fmt.Errorf("name %.64q is reserved for restore's temporary files (.NAME%s, .NAME%s%s)", rel, PartSuffix, PartSuffix, LogSuffix)
	}
	return nil
}

// Reserved reports whether base is the name restore gives a temporary file.
func Reserved(base string) bool {
	return strings.HasPrefix(base, ".") && (strings.HasSuffix(base, PartSuffix) || strings.HasSuffix(base, PartSuffix+LogSuffix))
}
