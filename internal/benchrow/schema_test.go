package benchrow

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"testing"
)

var update = flag.Bool("update", false, "rewrite schema/*.json from the Go definitions")

// TestSchemaFilesMatchGo proves the exported BigQuery schema files equal the
// Go definition (run with -update after changing Row or ChunkRow).
func TestSchemaFilesMatchGo(t *testing.T) {
	for file, fields := range map[string][]Field{
		"../../schema/transfers.json": TransfersSchema(),
		"../../schema/chunks.json":    ChunksSchema(),
	} {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(fields); err != nil {
			t.Fatal(err)
		}
		want := buf.Bytes()
		if *update {
			if err := os.WriteFile(file, want, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("%v (run go test ./internal/benchrow -update)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the Go definition; run go test ./internal/benchrow -update", file)
		}
	}
}

// TestRowsFitTheSchema: a row marshalled to JSON has exactly the schema's
// columns, so bq load of the NDJSON accepts it.
func TestRowsFitTheSchema(t *testing.T) {
	r := Row{TransferID: "t", Error: "e", Labels: []Label{{Key: "k", Value: "v"}}, Levels: []LevelUse{{Level: 3, Chunks: 1, Bytes: 1}},
		TableBytes: 1, Rows: 1, RowsRejected: 1, BQTable: "p.d.t", BQJobID: "j", BQRows: 1, FilesAppended: 1, BytesAppended: 1,
		Pool: true, Agents: []Agent{{Agent: "a", Bytes: 1}}}
	b, _ := json.Marshal(r)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	cols := map[string]bool{}
	for _, f := range TransfersSchema() {
		cols[f.Name] = true
		if _, ok := m[f.Name]; !ok {
			t.Errorf("column %s missing from the JSON row", f.Name)
		}
		if f.Description == "" {
			t.Errorf("column %s has no description", f.Name)
		}
	}
	for k := range m {
		if !cols[k] {
			t.Errorf("JSON key %s is not a column", k)
		}
	}
}
