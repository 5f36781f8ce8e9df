package producer

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
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

// Object is the final object name of a file with relative path rel.
func (d Destination) Object(rel, ext string) string {
	if d.Prefix == "" {
		return rel + ext
	}
	return d.Prefix + "/" + rel + ext
}

var bucketRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$`)

// ParseDestination parses gs://bucket[/prefix]; the error names s.
func ParseDestination(s string) (Destination, error) {
	rest, ok := strings.CutPrefix(s, "gs://")
	if !ok {
		return Destination{}, fmt.Errorf("destination %q: want gs://BUCKET/PREFIX", s)
	}
	bucket, prefix, _ := strings.Cut(rest, "/")
	if !bucketRE.MatchString(bucket) {
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
		if strings.HasPrefix(prefix+"/", ".ferry/") {
			return Destination{}, fmt.Errorf("destination %q: .ferry/ is ferry's staging prefix", s)
		}
	}
	return Destination{Bucket: bucket, Prefix: prefix}, nil
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

// sourceFile is one file to transfer.
type sourceFile struct {
	Path string // as opened
	Rel  string // relative path, slash separated: the object name under the prefix
	Size int64
	Mod  int64 // modification time, UnixNano, to detect changes while reading
}

// walk expands sources into files. A file keeps its base name; a directory
// is walked recursively and keeps its own name as the first path element, as
// gsutil cp -r does. Symlinked files are followed; symlinked directories are
// not (that is how loops are avoided) and are reported.
func walk(sources []string) ([]sourceFile, error) {
	if len(sources) == 0 {
		return nil, errors.New("no source given")
	}
	var files []sourceFile
	seen := map[string]string{}
	add := func(p, rel string, fi fs.FileInfo) error {
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("source %s: not a regular file (%s)", p, fi.Mode().Type())
		}
		if err := checkName(rel); err != nil {
			return fmt.Errorf("source %s: %w", p, err)
		}
		if prev, dup := seen[rel]; dup {
			return fmt.Errorf("sources %s and %s would both become object %q", prev, p, rel)
		}
		seen[rel] = p
		files = append(files, sourceFile{Path: p, Rel: rel, Size: fi.Size(), Mod: fi.ModTime().UnixNano()})
		return nil
	}
	for _, src := range sources {
		fi, err := os.Stat(src)
		if err != nil {
			return nil, fmt.Errorf("source %s: %w", src, unwrapPathErr(err))
		}
		if !fi.IsDir() {
			if err := add(src, filepath.Base(src), fi); err != nil {
				return nil, err
			}
			continue
		}
		root := filepath.Clean(src)
		base := filepath.Base(root)
		if base == "." || base == "/" || base == ".." {
			base = ""
		}
		err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return fmt.Errorf("source %s: %w", p, unwrapPathErr(err))
			}
			if d.IsDir() {
				return nil
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			rel = path.Join(base, filepath.ToSlash(rel))
			info, err := d.Info()
			if err != nil {
				return fmt.Errorf("source %s: %w", p, unwrapPathErr(err))
			}
			if d.Type()&fs.ModeSymlink != 0 {
				info, err = os.Stat(p) // follow
				if err != nil {
					return fmt.Errorf("source %s: symlink cannot be followed: %w", p, unwrapPathErr(err))
				}
				if info.IsDir() {
					return fmt.Errorf("source %s: symlink to a directory; ferry does not follow those (they can loop)", p)
				}
			}
			return add(p, rel, info)
		})
		if err != nil {
			return nil, err
		}
	}
	sort.SliceStable(files, func(i, j int) bool { return files[i].Rel < files[j].Rel })
	return files, nil
}

func unwrapPathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
