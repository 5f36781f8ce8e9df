package gcs

import (
	"fmt"
	"strings"
	"testing"
)

// A listing that shows noncurrent versions beside the live one (a
// versioned bucket, a stand-in that lists them) gives List's caller one
// entry per name, the live generation, so a confirmation that compares the
// generation it wrote, or restore, never meets an old one.
func TestListGivesTheLiveGenerationOfEachNameOnce(t *testing.T) {
	tests := []struct {
		listed []Attrs
		want   string
	}{
		{nil, ""},
		{[]Attrs{{Name: "a", Generation: 1}, {Name: "b", Generation: 2}}, "a#1 b#2"},
		{[]Attrs{{Name: "a", Generation: 1, noncurrent: true}, {Name: "a", Generation: 5}, {Name: "b", Generation: 2}}, "a#5 b#2"},
		{[]Attrs{{Name: "a", Generation: 5}, {Name: "a", Generation: 1, noncurrent: true}}, "a#5"},
		{[]Attrs{{Name: "a", Generation: 3}, {Name: "a", Generation: 4}}, "a#4"},
		{[]Attrs{{Name: "a", Generation: 1, noncurrent: true}, {Name: "b", Generation: 2, noncurrent: true}, {Name: "c", Generation: 3}}, "c#3"},
	}
	for i, tc := range tests {
		var got []string
		next, flush := latest(func(a Attrs) error { got = append(got, fmt.Sprintf("%s#%d", a.Name, a.Generation)); return nil })
		for _, a := range tc.listed {
			if err := next(a); err != nil {
				t.Fatal(err)
			}
		}
		if err := flush(); err != nil {
			t.Fatal(err)
		}
		if s := strings.Join(got, " "); s != tc.want {
			t.Errorf("case %d: List gave %q, want %q", i, s, tc.want)
		}
	}
}
