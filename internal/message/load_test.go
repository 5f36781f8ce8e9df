package message

import "testing"

// A load is hive-partitioned only over BigQuery's default layout: every
// object directly inside key=value directories, the same keys in the same
// order, below one prefix.
func TestHivePrefix(t *testing.T) {
	for _, tc := range []struct {
		names []string
		want  string
	}{
		{[]string{"land/export/dt=2026-12-01/a.csv.gz", "land/export/dt=2026-12-02/b.csv.gz"}, "gs://b/land/export/"},
		{[]string{"dt=1/lang=en/a.ndjson", "dt=2/lang=fr/a.ndjson"}, "gs://b/"},
		{[]string{"p/dt=1/a.csv", "p/dt=1/x/b.csv"}, ""},               // one not directly inside the keys
		{[]string{"p/dt=1/lang=en/a.csv", "p/lang=fr/dt=2/a.csv"}, ""}, // keys in another order
		{[]string{"p/dt=1/a.csv", "q/dt=2/a.csv"}, ""},                 // two prefixes
		{[]string{"p/a.csv", "p/b.csv"}, ""},                           // no keys
		{[]string{"p/dt=1/a.csv/part-00000.parquet"}, ""},              // a Parquet part's directory is its file
		{[]string{"p/dt=/a.csv"}, ""},                                  // an empty value
		{[]string{"p/1dt=x/a.csv"}, ""},                                // not a column name
	} {
		if got := HivePrefix("b", tc.names); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.names, got, tc.want)
		}
	}
}

// PartIndex reads back exactly the names PartName writes.
func TestPartIndex(t *testing.T) {
	for name, want := range map[string]int{"part-00000.parquet": 0, "part-00042.parquet": 42, "part-123456.parquet": 123456,
		"part-0042.parquet": -1, "part-00042.parq": -1, "xpart-00001.parquet": -1, "part--0001.parquet": -1, "rejects.ndjson": -1} {
		i, ok := PartIndex(name)
		if (want >= 0) != ok || ok && i != want {
			t.Errorf("PartIndex(%q) = %d, %v; want %d", name, i, ok, want)
		}
	}
}
