package layout

import (
	"os"
	"strings"
	"testing"
)

// twoCommands is the sh block of a document that names make run.
func twoCommands(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, block := range strings.Split(string(b), "```sh\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		if strings.HasPrefix(block, "make run ") {
			return block
		}
	}
	t.Fatalf("%s has no sh block that starts with make run", path)
	return ""
}

// The README and docs/development.md say the same of what make run and
// make test do.
func TestTheREADMEAndTheDevelopmentGuideAgreeOnTheTwoCommands(t *testing.T) {
	readme, dev := twoCommands(t, "../../README.md"), twoCommands(t, "../../docs/development.md")
	if readme != dev {
		t.Fatalf("the two commands differ:\nREADME.md:\n%s\ndocs/development.md:\n%s", readme, dev)
	}
	for _, want := range []string{"make run", "make test"} {
		if !strings.Contains(readme, want) {
			t.Errorf("the block does not name %s:\n%s", want, readme)
		}
	}
}
