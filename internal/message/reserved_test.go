package message

import (
	"errors"
	"strings"
	"testing"
)

// TestEveryReservedRootIsRefusedAsAFinalObject walks the one list: a chunk
// message whose final object lies under any of ferry's own prefixes is
// malformed, naming the prefix, and the key and done prefixes are on it.
func TestEveryReservedRootIsRefusedAsAFinalObject(t *testing.T) {
	roots := ReservedRoots()
	for _, must := range []string{StagingRoot, DoneRoot, KeyRoot, LeaseRoot, AgentRoot} {
		if ReservedRoot(must+"x") == "" {
			t.Errorf("%s is not under any reserved root %v", must, roots)
		}
	}
	// Nothing that walks the staging root takes these for transfers.
	for _, root := range []string{LeaseRoot, AgentRoot} {
		if id := strings.TrimSuffix(strings.TrimPrefix(root, StagingRoot), "/"); ValidTransferID(id) {
			t.Errorf("%s: %q is a valid transfer id", root, id)
		}
	}
	for _, root := range roots {
		t.Run(root, func(t *testing.T) {
			c := goodChunk()
			c.Parts[0].Final, c.Parts[0].Chunks, c.Parts[0].Index, c.Parts[0].Object = true, 1, 0, root+"victim"
			_, _, err := DecodeChunk(EncodeChunk(c, [][]byte{[]byte("abc")}))
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), root) {
				t.Fatalf("DecodeChunk of a final object %svictim = %v, want ErrMalformed naming %s", root, err, root)
			}
			if got := ReservedPrefix(strings.TrimSuffix(root, "/")); got != root {
				t.Fatalf("ReservedPrefix(%q) = %q, want %q", strings.TrimSuffix(root, "/"), got, root)
			}
		})
	}
	for _, free := range []string{"", "data", ".ferry-keysx", ".ferryx/a", "a/.ferry-keys"} {
		if got := ReservedPrefix(free); got != "" {
			t.Errorf("ReservedPrefix(%q) = %q, want none", free, got)
		}
	}
}
