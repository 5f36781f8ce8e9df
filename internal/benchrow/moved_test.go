package benchrow

import "testing"

func TestMovedSaysWhatMoved(t *testing.T) {
	for _, c := range []struct {
		m    Moved
		want string
	}{
		{Moved{Appended: 1, Read: 1_500_133, Sent: 512_000}, "1 file appended (its tail only): 1.5 MB read, 512.0 kB sent"},
		{Moved{Appended: 2, Whole: 1, Read: 3_000_000, Sent: 1_000_000}, "2 files appended (their tails only), 1 sent whole: 3.0 MB read, 1.0 MB sent"},
		{Moved{Converted: 1, Read: 20_000_000, Sent: 9_210_000}, "1 file converted to Parquet: 20.0 MB read, 9.2 MB sent"},
		{Moved{}, "no file sent: 0 B read, 0 B sent"},
	} {
		if got := c.m.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.m, got, c.want)
		}
	}
}
