package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func init() {
	cobra.AddTemplateFunc("ferryFlagUsages", flagUsages)
}

// usageTemplate is cobra's, with flags listed by flagUsages.
var usageTemplate = strings.NewReplacer(
	"{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}", "{{ferryFlagUsages .LocalFlags}}",
	"{{.InheritedFlags.FlagUsages | trimTrailingWhitespaces}}", "{{ferryFlagUsages .InheritedFlags}}",
).Replace((&cobra.Command{}).UsageTemplate())

// flagUsages lists flags as pflag does, but a boolean flag reads "--wait",
// not "--wait[=true|false]".
func flagUsages(fs *pflag.FlagSet) string {
	type row struct{ name, usage string }
	var rows []row
	width := 0
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
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
		width = max(width, len(name))
		rows = append(rows, row{name, usage})
	})
	var b strings.Builder
	for i, r := range rows {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%-*s   %s", width, r.name, r.usage)
	}
	return b.String()
}
