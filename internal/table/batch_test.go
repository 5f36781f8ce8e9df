package table

import (
	"fmt"
	"testing"
)

// A wide table's batch holds fewer rows, so that what one batch holds is
// bounded by maxBatchCells values whatever the width: a 10,000-column file
// took 1.1 GiB at 8,192 rows a batch.
func TestAWideTablesBatchIsBoundedInValues(t *testing.T) {
	for _, tc := range []struct{ columns, rows int }{{1, batchRows}, {128, batchRows}, {129, maxBatchCells / 129}, {10_000, maxBatchCells / 10_000}, {MaxColumns * 10, 16}} {
		got := batchRowsFor(tc.columns)
		if got != tc.rows {
			t.Errorf("batchRowsFor(%d) = %d, want %d", tc.columns, got, tc.rows)
		}
		if tc.columns <= MaxColumns && got*tc.columns > maxBatchCells {
			t.Errorf("%d columns: a batch of %d rows holds %d values, more than %d", tc.columns, got, got*tc.columns, maxBatchCells)
		}
	}
	s := make(Schema, 10_000)
	for i := range s {
		s[i] = Field{Name: fmt.Sprintf("c%d", i), Type: String}
	}
	c, err := NewConverter(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n := cap(c.cols[0].bytes) * len(c.cols); n > maxBatchCells {
		t.Errorf("a converter of 10,000 columns holds room for %d values, more than %d", n, maxBatchCells)
	}
}
