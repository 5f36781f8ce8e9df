package spool

// What the external tests look at inside the writer.
const (
	BacklogPresent = backlogPresent
	OrphanAge      = orphanAge
)

// Reclaim forgets every file the workers removed, as a write into a full
// spool does.
func (s *Spool) Reclaim() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reclaimLocked()
}
