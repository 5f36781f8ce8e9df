package restore

// SetFreeSpace makes r see a file system with free bytes free, as a small
// tmpfs would show it.
func SetFreeSpace(r *Restorer, free int64) {
	r.freeSpace = func(string) (int64, error) { return free, nil }
}

// SetEUID makes r restore as if it ran as effective user euid.
func SetEUID(r *Restorer, euid int) { r.euid = func() int { return euid } }

// SetWritten has r call fn with each temporary file's path once its bytes
// are downloaded, before they are read back.
func SetWritten(r *Restorer, fn func(path string)) { r.written = fn }
