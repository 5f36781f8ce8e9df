package table

import (
	"testing"
	"time"
)

// FuzzNumeric: the one-pass reading of a NUMERIC(18, s) value agrees with
// the long way (math/big, as for NUMERIC(38, s)): the same value, or both
// refuse it.
func FuzzNumeric(f *testing.F) {
	for _, s := range []string{"0.51", "-0.51", "12", "007", "1.", ".5", "-", "123456789012.123456", "999999999999999999", "0", "-0", "0.000001"} {
		f.Add(s, uint8(6))
	}
	f.Fuzz(func(t *testing.T, v string, scale uint8) {
		sc := int(scale % 10)
		fast, errFast := parseNumeric(v, Field{Type: Numeric, Precision: 18, Scale: sc})
		slow, errSlow := parseNumeric(v, Field{Type: Numeric, Precision: 38, Scale: sc})
		if errFast == nil && (errSlow != nil || fast != slow) {
			t.Fatalf("%q scale %d: NUMERIC(18) reads %v, NUMERIC(38) %v (%v)", v, sc, fast, slow, errSlow)
		}
		if errSlow != nil && errFast == nil {
			t.Fatalf("%q: refused only by NUMERIC(38): %v", v, errSlow)
		}
	})
}

// FuzzDate: parseDate takes exactly what time.Parse(time.DateOnly) takes,
// as the same day.
func FuzzDate(f *testing.F) {
	for _, s := range []string{"2026-12-04", "2024-02-29", "2023-02-29", "0000-01-01", "2026-13-01", "2026-00-10", "2026-1-01", "+026-12-04"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		days, ok := parseDate(v)
		tm, err := time.Parse(time.DateOnly, v)
		if ok != (err == nil) || (ok && days != tm.Unix()/86400) {
			t.Fatalf("%q: parseDate %d %v, time.Parse %v %v", v, days, ok, tm, err)
		}
	})
}
