package restore

// SetFreeSpace makes r see a file system with free bytes free, as a small
// tmpfs would show it.
func SetFreeSpace(r *Restorer, free int64) {
	r.freeSpace = func(string) (int64, error) { return free, nil }
}
