package names

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, ok := range []string{"a", "dir/file.csv", "über/日本.txt", ".hidden", "x.ferry-part", strings.Repeat("a", MaxObject)} {
		if err := Check(ok); err != nil {
			t.Errorf("Check(%q) = %v, want nil", ok, err)
		}
	}
	for name, want := range map[string]string{
		"":                               "empty",
		"back\\slash.txt":                "backslash",
		"a/.x.ferry-part":                "reserved",
		".x.ferry-part.log":              "reserved",
		"bad\xffutf8":                    "UTF-8",
		"tab\there":                      "control character",
		"nul\x00":                        "control character",
		"/abs":                           "absolute",
		"a//b":                           "empty path element",
		"a/../b":                         `".."`,
		strings.Repeat("a", MaxObject+1): "GCS allows 1024",
	} {
		err := Check(name)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check(%.40q) = %v, want an error with %q", name, err, want)
		}
		if err != nil && len(err.Error()) > 300 {
			t.Errorf("Check(%.40q): error of %d bytes echoes too much", name, len(err.Error()))
		}
	}
}
