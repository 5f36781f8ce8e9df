//go:build unix

package producer

import (
	"errors"
	"syscall"
)

// processRuns reports whether process pid runs on this host: signal 0
// checks without sending anything; EPERM is a process of another user.
func processRuns(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
