package plan

import (
	"fmt"
	"regexp"
	"strings"
)

// Filter is one include or exclude rule, with rsync's pattern semantics,
// matched on a path relative to the source directory:
//
//   - a pattern without "/" (a trailing one aside) or "**" matches the last
//     path element; otherwise it matches the whole path, or, unless it
//     starts with "/", any tail of it that starts at an element boundary;
//   - "*" matches within an element, "**" across elements, "?" one
//     character but "/", "[…]" a class;
//   - a trailing "/" matches only directories.
//
// The first rule that matches decides; a path no rule matches is sent. An
// excluded directory is not walked at all. In a request a rule is written
// "- PATTERN" (exclude) or "+ PATTERN" (include).
type Filter struct {
	Include bool
	Pattern string
	re      *regexp.Regexp
	dirOnly bool
}

// MaxFilters bounds the rules of one transfer.
const MaxFilters = 1000

// ParseFilter parses "- PATTERN" or "+ PATTERN".
func ParseFilter(rule string) (Filter, error) {
	sign, pat, ok := strings.Cut(rule, " ")
	if !ok || (sign != "+" && sign != "-") {
		return Filter{}, fmt.Errorf("filter %.64q: want \"- PATTERN\" (exclude) or \"+ PATTERN\" (include)", rule)
	}
	return NewFilter(sign == "+", pat)
}

// NewFilter compiles one rule; the error names the pattern.
func NewFilter(include bool, pattern string) (Filter, error) {
	f := Filter{Include: include, Pattern: pattern}
	p := pattern
	if p == "" || p == "/" {
		return f, fmt.Errorf("filter pattern %q is empty", pattern)
	}
	if len(p) > 4096 {
		return f, fmt.Errorf("filter pattern %.64q… is %d bytes; 4096 at most", pattern, len(p))
	}
	f.dirOnly = strings.HasSuffix(p, "/")
	p = strings.TrimSuffix(p, "/")
	anchored := strings.HasPrefix(p, "/")
	p = strings.TrimPrefix(p, "/")
	body, err := globRE(p)
	if err != nil {
		return f, fmt.Errorf("filter pattern %.64q: %v", pattern, err)
	}
	if anchored {
		body = "^" + body + "$"
	} else {
		body = "(^|/)" + body + "$"
	}
	f.re, err = regexp.Compile(body)
	if err != nil {
		return f, fmt.Errorf("filter pattern %.64q: %v", pattern, err)
	}
	return f, nil
}

// String is the rule as a request writes it.
func (f Filter) String() string {
	if f.Include {
		return "+ " + f.Pattern
	}
	return "- " + f.Pattern
}

func (f Filter) matches(rel string, isDir bool) bool {
	return (!f.dirOnly || isDir) && f.re.MatchString(rel)
}

// selected reports whether the path rel (inside its source) is sent.
func (s Selection) selected(rel string, isDir bool) bool {
	for _, f := range s.Filters {
		if f.matches(rel, isDir) {
			return f.Include
		}
	}
	return true
}

// globRE translates an rsync glob into a regular expression.
func globRE(p string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case '*':
			if i+1 < len(p) && p[i+1] == '*' {
				b.WriteString(".*")
				i++
			} else {
				b.WriteString("[^/]*")
			}
		case '?':
			b.WriteString("[^/]")
		case '\\':
			if i+1 == len(p) {
				return "", fmt.Errorf("ends in a backslash")
			}
			i++
			b.WriteString(regexp.QuoteMeta(p[i : i+1]))
		case '[':
			end := strings.IndexByte(p[i+1:], ']')
			if end < 0 {
				return "", fmt.Errorf("unclosed [")
			}
			class := p[i+1 : i+1+end]
			if class == "" {
				return "", fmt.Errorf("empty []")
			}
			if class[0] == '!' {
				class = "^" + class[1:]
			}
			b.WriteString("[" + strings.ReplaceAll(class, `\`, `\\`) + "]")
			i += end + 1
		default:
			b.WriteString(regexp.QuoteMeta(p[i : i+1]))
		}
	}
	return b.String(), nil
}
