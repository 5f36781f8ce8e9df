package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"
)

func init() {
	cobra.AddTemplateFunc("ferryFlagUsages", func(fs *pflag.FlagSet) string { return flagUsages(fs, noWrap, nil) })
	cobra.AddTemplateFunc("ferryLocalFlags", localFlags)
}

// usageTemplate is cobra's, with flags listed by localFlags (in their
// groups, wrapped) and flagUsages.
var usageTemplate = strings.NewReplacer(
	"\n\nFlags:\n{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}", "{{ferryLocalFlags .}}",
	"{{.InheritedFlags.FlagUsages | trimTrailingWhitespaces}}", "{{ferryFlagUsages .InheritedFlags}}",
).Replace((&cobra.Command{}).UsageTemplate())

// The annotations behind grouped help: a flag's group, a command's groups
// in order, and the mark of a command whose help is brief (its advanced
// flags and its environment only in --help-all).
const (
	groupAnnotation  = "ferry_group"
	groupsAnnotation = "ferry_groups"
	briefAnnotation  = "ferry_brief"
	allAnnotation    = "ferry_help_all"
)

// Advanced is the group of flags a brief help leaves to --help-all.
const Advanced = "More flags"

// Group lists the named flags of cmd under title in its help; groups print
// in the order Group was called, and flags in no group after them.
func Group(cmd *cobra.Command, title string, names ...string) {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	if g := cmd.Annotations[groupsAnnotation]; g == "" {
		cmd.Annotations[groupsAnnotation] = title
	} else {
		cmd.Annotations[groupsAnnotation] = g + "\n" + title
	}
	for _, n := range names {
		if err := cmd.Flags().SetAnnotation(n, groupAnnotation, []string{title}); err != nil {
			panic(fmt.Sprintf("cli.Group %q: %v", title, err)) // a flag renamed without its group
		}
	}
}

// Brief makes cmd's --help fit one screen: its Advanced flags and its
// environment variables are shown by --help-all only.
func Brief(cmd *cobra.Command) {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[briefAnnotation] = "1"
	cmd.Flags().Bool("help-all", false, "help with every flag and the environment variables")
	cmd.InitDefaultHelpFlag()
}

// showsAll reports whether cmd's help is to show everything.
func showsAll(cmd *cobra.Command) bool {
	return cmd.Annotations[briefAnnotation] == "" || cmd.Annotations[allAnnotation] != ""
}

// noWrap leaves usage lines whole.
const noWrap = 0

// helpWidth is how wide help lines may be: the terminal's width, else 100.
func helpWidth(cmd *cobra.Command) int {
	if f, ok := cmd.OutOrStdout().(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		if w, _, err := term.GetSize(int(f.Fd())); err == nil && w >= 40 {
			return w
		}
	}
	return 100
}

// localFlags is the "Flags:" part of cmd's help: one section a group, in
// order, then the flags in none; each usage wrapped to the help's width.
func localFlags(cmd *cobra.Command) string {
	fs := cmd.LocalFlags()
	titles := strings.Split(cmd.Annotations[groupsAnnotation], "\n")
	if cmd.Annotations[groupsAnnotation] == "" {
		titles = nil
	}
	width := helpWidth(cmd)
	var b strings.Builder
	section := func(title string, in func(*pflag.Flag) bool) {
		if u := flagUsages(fs, width, in); u != "" {
			fmt.Fprintf(&b, "\n\n%s:\n%s", title, u)
		}
	}
	groupOf := func(f *pflag.Flag) string {
		if g := f.Annotations[groupAnnotation]; len(g) > 0 {
			return g[0]
		}
		return ""
	}
	for _, t := range titles {
		if t == Advanced && !showsAll(cmd) {
			continue
		}
		section(t, func(f *pflag.Flag) bool { return groupOf(f) == t })
	}
	title := "Flags"
	if len(titles) > 0 {
		title = "Other flags"
	}
	section(title, func(f *pflag.Flag) bool { return groupOf(f) == "" })
	return b.String()
}

// flagUsages lists the flags of fs that in admits (all if nil) as pflag
// does, but a boolean flag reads "--wait", not "--wait[=true|false]", and
// with width > 0 each usage is wrapped under its own column.
func flagUsages(fs *pflag.FlagSet, width int, in func(*pflag.Flag) bool) string {
	type row struct{ name, usage string }
	var rows []row
	nameWidth := 0
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || in != nil && !in(f) {
			return
		}
		name := "      --" + f.Name
		if f.Shorthand != "" {
			name = "  -" + f.Shorthand + ", --" + f.Name
		}
		varname, usage := pflag.UnquoteUsage(f)
		if varname != "" && f.Value.Type() != "bool" {
			name += " " + varname
		}
		if d := f.DefValue; d != "" && d != "false" && d != "0" && d != "0s" && d != "[]" && d != "map[]" {
			if f.Value.Type() == "string" {
				d = fmt.Sprintf("%q", d)
			}
			usage += " (default " + d + ")"
		}
		nameWidth = max(nameWidth, len(name))
		rows = append(rows, row{name, usage})
	})
	var b strings.Builder
	for i, r := range rows {
		if i > 0 {
			b.WriteByte('\n')
		}
		indent := nameWidth + 3
		lines := []string{r.usage}
		if width > 0 {
			lines = wrap(r.usage, max(width-indent, 30))
		}
		fmt.Fprintf(&b, "%-*s   %s", nameWidth, r.name, lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(&b, "\n%*s%s", indent, "", l)
		}
	}
	return b.String()
}

// wrap breaks s into lines of at most n bytes at spaces (a longer word
// stands alone).
func wrap(s string, n int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		switch {
		case line == "":
			line = w
		case len(line)+1+len(w) <= n:
			line += " " + w
		default:
			lines = append(lines, line)
			line = w
		}
	}
	return append(lines, line)
}
