// Package command holds ferry's commands, one file a verb: each parses its
// flags and arguments, reads its configuration and calls the engine
// (submit, copier, restore, transfers, doctor). The binaries' mains are a
// line each: ferry (Ferry: cp, restore, status), producer (Producer:
// submit, serve, status, list, cancel, doctor) and restore (Restore).
// Shared parsing, --help and exit statuses are internal/cli's.
package command
