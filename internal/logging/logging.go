// Package logging builds the slog loggers ferry's binaries use: JSON with
// Cloud Logging's "severity" key for services, readable text on a terminal.
package logging

import (
	"io"
	"log/slog"
	"os"
)

// New returns a logger writing to w at level ("debug", "info", "warn",
// "error") in format ("json", "text" or "auto": text when w is a terminal).
func New(w io.Writer, level, format string) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lv}
	if format == "auto" {
		format = "json"
		if IsTerminal(w) {
			format = "text"
		}
	}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	opts.ReplaceAttr = func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 {
			switch a.Key {
			case slog.LevelKey:
				// Cloud Logging reads the level from "severity". A
				// caller's own "level" attribute is not a slog.Level and
				// is left alone.
				if lv, ok := a.Value.Any().(slog.Level); ok {
					a.Key = "severity"
					if lv == slog.LevelWarn {
						a.Value = slog.StringValue("WARNING")
					}
				}
			case slog.MessageKey:
				a.Key = "message"
			}
		}
		return a
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// Discard returns a logger that drops everything; constructors use it for a
// nil logger.
func Discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// OrDiscard returns l, or a discarding logger when l is nil.
func OrDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return Discard()
	}
	return l
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
