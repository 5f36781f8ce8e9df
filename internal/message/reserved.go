package message

import "strings"

// reservedRoots are the prefixes ferry keeps for itself in a bucket:
// staging (with the leases, the loader's rows and every transfer's working
// objects), the done markers and the key objects. A final object is never
// written under one, and a destination never names one: a transfer that
// could put its objects there could replace another transfer's key object
// or done marker. A root added later is added here, and every check
// follows.
var reservedRoots = [...]string{StagingRoot, DoneRoot, KeyRoot}

// ReservedRoots returns the prefixes ferry keeps for itself, each ending
// in "/".
func ReservedRoots() []string { return append([]string(nil), reservedRoots[:]...) }

// ReservedRoot returns the root of ferry's own that the object name lies
// under, or "" when it lies under none.
func ReservedRoot(name string) string {
	for _, r := range reservedRoots {
		if strings.HasPrefix(name, r) {
			return r
		}
	}
	return ""
}

// ReservedPrefix returns the root of ferry's own that every object under
// prefix (a destination prefix, no trailing "/") would lie under, or "".
func ReservedPrefix(prefix string) string {
	if prefix == "" {
		return ""
	}
	return ReservedRoot(strings.TrimSuffix(prefix, "/") + "/")
}
