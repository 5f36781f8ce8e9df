// Package cli is what every ferry binary does around its real work, so the
// mains stay thin and alike: a cobra command with gcloud-like parsing (flags
// before or after the arguments), --help on stdout that lists the binary's
// environment variables, --version, SIGINT and SIGTERM cancelling the
// context, and one meaning for each exit status:
//
//	0  success (also --help and --version)
//	1  the run failed: a transfer failed, a backend could not be reached, …
//	2  a usage or configuration error: a bad flag or argument, an invalid
//	   FERRY_* variable or FERRY_ENV_FILE
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"sync/atomic"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/message"
)

// Exit statuses.
const (
	ExitOK     = 0
	ExitFailed = 1
	ExitUsage  = 2
)

// UsageError is a mistake on the command line.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef returns a UsageError.
func Usagef(format string, a ...any) error { return &UsageError{fmt.Errorf(format, a...)} }

// envAnnotation holds the environment variables a command reads, for --help.
const envAnnotation = "ferry-env"

// Env lists the environment variables of cfg (a pointer to a config struct)
// at the end of cmd's --help.
func Env(cmd *cobra.Command, cfg any) {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[envAnnotation] = config.Usage(cfg)
}

// Main runs root with the process's arguments, the context cancelled by
// SIGINT or SIGTERM, and exits with Run's status.
func Main(root *cobra.Command) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	endProfile := startProfile(root.Name(), os.Stderr)
	code := Run(ctx, root, os.Args[1:], os.Stdout, os.Stderr)
	endProfile()
	stop()
	os.Exit(code)
}

// Run runs root with args and returns the exit status. Errors are printed
// to stderr as "NAME: error"; a usage error adds where help is.
func Run(ctx context.Context, root *cobra.Command, args []string, stdout, stderr io.Writer) int {
	root.SilenceErrors, root.SilenceUsage = true, true
	// Only a root that asks for it (WithCompletion) has a completion
	// command: the fleet's binaries run under systemd, not in a shell.
	root.CompletionOptions.DisableDefaultCmd = root.Annotations[completionAnnotation] == ""
	root.SetArgs(args)
	root.SetOut(stdout)
	// A command run with --json writes through a counter, so that a
	// failure prints a document only where the command printed none.
	out := &countingWriter{w: stdout}
	root.SetErr(stderr)
	root.SetVersionTemplate("{{.Name}} {{.Version}}\n")
	root.SetUsageTemplate(usageTemplate)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &UsageError{err} })
	help := root.HelpFunc()
	root.SetHelpFunc(func(c *cobra.Command, a []string) {
		help(c, a)
		if env := c.Annotations[envAnnotation]; env != "" && showsAll(c) {
			fmt.Fprint(c.OutOrStdout(), "\n"+env)
		}
	})
	// Anything that fails before a command's RunE starts is a usage
	// error: an unknown command or flag, wrong arguments.
	running := false
	walk(root, func(c *cobra.Command) {
		if run := c.RunE; run != nil {
			c.RunE = func(c *cobra.Command, a []string) error {
				running = true
				if all, _ := c.Flags().GetBool("help-all"); all && c.Annotations[briefAnnotation] != "" {
					c.Annotations[allAnnotation] = "1"
					return c.Help()
				}
				if asksJSON(c) {
					c.SetOut(out)
				}
				return run(c, a)
			}
		}
	})
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	name := root.Name()
	if cmd != nil {
		name = cmd.CommandPath()
	}
	code := ExitFailed
	var ue *UsageError
	switch {
	case !running || errors.As(err, &ue):
		fmt.Fprintf(stderr, "%s: %v\nRun '%s --help' for usage.\n", root.Name(), err, name)
		code = ExitUsage
	case config.IsError(err):
		fmt.Fprintf(stderr, "%s: %v\n", root.Name(), err)
		code = ExitUsage
	default:
		fmt.Fprintf(stderr, "%s: %v\n", root.Name(), err)
	}
	if cmd != nil && asksJSON(cmd) && out.n.Load() == 0 {
		// --json promises one document on stdout, failure included;
		// a command that printed its own (a transfer that ended
		// failed) has kept it.
		_ = PrintJSON(stdout, Failure{V: message.Version, Status: StatusError, Error: err.Error(), ExitCode: code})
	}
	return code
}

// StatusError is the status of the document --json prints for a command
// that failed before it had one of its own to print.
const StatusError = "error"

// Failure is that document: the error as stderr gives it, and the exit
// status.
type Failure struct {
	V        int    `json:"v"`
	Status   string `json:"status"`
	Error    string `json:"error"`
	ExitCode int    `json:"exit_code"`
}

// asksJSON reports whether cmd was run with --json.
func asksJSON(cmd *cobra.Command) bool {
	f := cmd.Flags().Lookup("json")
	return f != nil && f.Value.Type() == "bool" && f.Value.String() == "true"
}

// countingWriter counts what a command wrote to stdout.
type countingWriter struct {
	w io.Writer
	n atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}

func walk(c *cobra.Command, fn func(*cobra.Command)) {
	fn(c)
	for _, sub := range c.Commands() {
		walk(sub, fn)
	}
}

// NoArgs accepts no positional arguments, as a usage error.
func NoArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return Usagef("unexpected argument %q", args[0])
	}
	return nil
}

// Service is the command of a long-running service that takes no
// arguments: run gets the context and its error exits 1 (2 for a
// configuration error).
func Service(name, version, about string, cfg any, run func(ctx context.Context) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:     name,
		Short:   firstLine(about),
		Long:    about,
		Version: version,
		Args:    NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return run(cmd.Context()) },
	}
	Env(cmd, cfg)
	return cmd
}

func firstLine(s string) string {
	for i, r := range s {
		if r == '\n' {
			return s[:i]
		}
	}
	return s
}

// completionAnnotation marks a root command that offers shell completion.
const completionAnnotation = "ferry_completion"

// WithCompletion gives root the completion command (bash, zsh, fish,
// powershell), as cobra writes it.
func WithCompletion(root *cobra.Command) {
	if root.Annotations == nil {
		root.Annotations = map[string]string{}
	}
	root.Annotations[completionAnnotation] = "1"
}

// BuildVersion is version, or, for a binary built without one (go
// install), the module version the build recorded.
func BuildVersion(version string) string {
	if version != "" && version != "dev" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// PrintJSON prints v as one indented JSON document: what every command's
// --json prints on stdout, once.
func PrintJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}
