package bench

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ferry-dev/ferry/internal/bench/verdict"
	"github.com/ferry-dev/ferry/internal/gcs"
)

// Workload 10 reads what each process waited out from the summary line its
// Store logs on Close.
func TestPushbackRows(t *testing.T) {
	dir := t.TempDir()
	prefix := filepath.Join(dir, "pushback-files-100-limit-150-ferry-4w-1")
	write := func(name, body string) {
		if err := os.WriteFile(prefix+"-"+name+".log", []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("worker-1", `{"level":"WARN","msg":"GCS asks for fewer writes"}`+"\n"+
		`{"level":"WARN","msg":"`+gcs.PushbackSummary+`","bucket":"b","pushbacks":7,"cuts":3,"settled_writes_per_s":"40.5"}`+"\n")
	write("producer", "not json\n")
	write("merger", `{"severity":"WARNING","message":"`+gcs.PushbackSummary+`","bucket":"b","pushbacks":2,"cuts":1,"settled_writes_per_s":"9.5"}`+"\n")
	got := readPushbacks(prefix)
	if len(got) != 2 || got[0] != (verdict.ProcPushback{Name: "merger", PushBacks: 2, Settled: 9.5}) || got[1] != (verdict.ProcPushback{Name: "worker-1", PushBacks: 7, Settled: 40.5}) {
		t.Fatalf("readPushbacks = %+v", got)
	}

}
