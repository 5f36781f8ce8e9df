package progress

import (
	"testing"
	"time"
)

func TestRestoreLine(t *testing.T) {
	for _, c := range []struct {
		s    Restore
		want string
	}{
		{Restore{Raw: 50e6, RawTotal: 200e6, Elapsed: time.Second}, "██████░░░░░░░░░░░░░░░░░░  25%  restored 50.0 MB / 200.0 MB  50.0 MB/s"},
		{Restore{Objects: 3, Listed: 4, Listing: true, Raw: 1e6, Elapsed: 2 * time.Second}, "██████████████████░░░░░░  75%  restored 3 / 4+ (listing…) objects  1.0 MB  0.5 MB/s"},
		{Restore{}, "░░░░░░░░░░░░░░░░░░░░░░░░   0%  restored 0 / 0 objects  0.0 MB  0.0 MB/s"},
	} {
		if got := RestoreLine(c.s); got != c.want {
			t.Errorf("RestoreLine(%+v)\n got %q\nwant %q", c.s, got, c.want)
		}
	}
}
