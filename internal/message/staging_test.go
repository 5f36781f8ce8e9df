package message

import "testing"

// What a failed transfer's clean-up keeps: an object that holds more than
// the transfer created from nothing (it replaced one, grew one by an
// append, or was adopted from a transfer that no longer ran); every other
// object of the transfer goes.
func TestKeptOnFailure(t *testing.T) {
	for _, tc := range []struct {
		md   map[string]string
		kept bool
	}{
		{FinalMetadata("t2", 10, 1, "zstd"), false},
		{map[string]string{MetaTransfer: "t2", MetaReplaced: "17"}, true},
		{map[string]string{MetaTransfer: "t2", MetaAppended: "17"}, true},
		{map[string]string{MetaTransfer: "t2", MetaAdopted: "t1"}, true},
		{map[string]string{MetaTransfer: "t2", MetaAdopted: ""}, false},
	} {
		if got := KeptOnFailure(tc.md); got != tc.kept {
			t.Errorf("KeptOnFailure(%v) = %v, want %v", tc.md, got, tc.kept)
		}
	}
}
