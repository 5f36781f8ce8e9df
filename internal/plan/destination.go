package plan

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ferry-dev/ferry/internal/message"
)

// Destination is a parsed gs://bucket/prefix.
type Destination struct {
	Bucket, Prefix string
}

func (d Destination) String() string {
	if d.Prefix == "" {
		return "gs://" + d.Bucket
	}
	return "gs://" + d.Bucket + "/" + d.Prefix
}

// Object is the final object name of a file with relative path rel (slash
// separated) and codec extension ext (codec.Codec.Ext).
func (d Destination) Object(rel, ext string) string {
	if d.Prefix == "" {
		return rel + ext
	}
	return d.Prefix + "/" + rel + ext
}

// ParseDestination parses gs://bucket[/prefix]; the error names s.
func ParseDestination(s string) (Destination, error) {
	rest, ok := strings.CutPrefix(s, "gs://")
	if !ok {
		return Destination{}, fmt.Errorf("destination %q: want gs://BUCKET/PREFIX", s)
	}
	bucket, prefix, _ := strings.Cut(rest, "/")
	if !message.ValidBucket(bucket) {
		return Destination{}, fmt.Errorf("destination %q: %q is not a valid bucket name", s, bucket)
	}
	prefix = strings.Trim(prefix, "/")
	if prefix != "" {
		if err := checkName(prefix); err != nil {
			return Destination{}, fmt.Errorf("destination %q: %w", s, err)
		}
		for _, seg := range strings.Split(prefix, "/") {
			if seg == "." || seg == ".." {
				return Destination{}, fmt.Errorf("destination %q: prefix may not contain %q", s, seg)
			}
		}
		if root := message.ReservedPrefix(prefix); root != "" {
			return Destination{}, fmt.Errorf("destination %q: %s is ferry's own prefix; choose a prefix outside %v", s, root, message.ReservedRoots())
		}
	}
	return Destination{Bucket: bucket, Prefix: prefix}, nil
}

// checkFinal holds a final object's name to checkName and keeps it out of
// ferry's own prefixes (a tree at the bucket's root with a directory named
// .ferry-keys, say).
func checkFinal(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if root := message.ReservedRoot(name); root != "" {
		return fmt.Errorf("%q lies under %s, ferry's own prefix", name, root)
	}
	return nil
}

// checkName rejects what GCS rejects or readers trip over: invalid UTF-8,
// control characters and names over 1024 bytes.
func checkName(name string) error {
	if !utf8.ValidString(name) {
		return fmt.Errorf("name %q is not valid UTF-8", name)
	}
	if len(name) > 1024 {
		return fmt.Errorf("name %.60q… is %d bytes; GCS allows 1024", name, len(name))
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return fmt.Errorf("name %q contains control character %U", name, r)
		}
	}
	return nil
}
