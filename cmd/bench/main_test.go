package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/bench/verdict"
)

func TestParseWorkloads(t *testing.T) {
	got, err := parseWorkloads("1, shaped-link,5,7,8,9,10,11,12")
	if err != nil || !reflect.DeepEqual(got, []string{"large-file", "shaped-link", "restore", "big-tree", "parquet", "append", "pushback", "latency", "pool"}) {
		t.Errorf("parseWorkloads = %v, %v", got, err)
	}
	if got, err := parseWorkloads(""); err != nil || got != nil {
		t.Errorf("empty: %v, %v; want all (nil)", got, err)
	}
	if _, err := parseWorkloads("13"); err == nil || !strings.Contains(err.Error(), `workload "13"`) {
		t.Errorf("unknown workload: %v", err)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--quick", "--full"}, nil, "exclude each other"},
		{[]string{"--workloads", "nine"}, nil, `workload "nine"`},
		{[]string{"extra"}, nil, `unexpected argument "extra"`},
		{nil, map[string]string{"BENCH_REPEATS": "zero"}, `BENCH_REPEATS="zero"`},
		{nil, map[string]string{"BENCH_LINK_MBPS": "-1"}, `BENCH_LINK_MBPS="-1"`},
		{nil, map[string]string{"BENCH_GCS": "disk"}, `BENCH_GCS="disk": want fs or memory`},
		{nil, map[string]string{"BENCH_QUICK": "yes please"}, `BENCH_QUICK="yes please"`},
	} {
		t.Run(c.want, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v) // restored when the subtest ends
			}
			var out, errOut bytes.Buffer
			if code := run(c.args, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), c.want) {
				t.Errorf("%v %v: exit %d, stderr %q; want 2 and %q", c.args, c.env, code, errOut.String(), c.want)
			}
		})
	}
}

// bench readme refuses the summary of a part of make bench, naming the
// file and why, and leaves the README as it was; --partial takes it.
func TestReadmeRefusesAPartialRun(t *testing.T) {
	dir := t.TempDir()
	sum := filepath.Join(dir, "bench-summary.md")
	readme := filepath.Join(dir, "README.md")
	before := "# ferry\n\n" + verdict.SummaryBegin + "\nwhole run\n" + verdict.SummaryEnd + "\n"
	var s bytes.Buffer
	verdict.WriteSummary(&s, "Measured by `BENCH_WORKLOADS=7 BENCH_FULL=1 make bench` from 2026-12-02 10:08 to 10:54 UTC.", []verdict.Goal{{Name: "tree", Target: "<= 256", Measured: "124", State: "met"}})
	for path, body := range map[string]string{sum: s.String(), readme: before} {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"readme", sum, readme}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), sum+": its run set BENCH_WORKLOADS") {
		t.Fatalf("readme of a partial run: exit %d, stderr %q; want 2 naming the summary and BENCH_WORKLOADS", code, errOut.String())
	}
	if b, _ := os.ReadFile(readme); string(b) != before {
		t.Fatalf("the README changed after a refusal:\n%s", b)
	}
	errOut.Reset()
	if code := run([]string{"readme", "--partial", sum, readme}, &out, &errOut); code != 0 {
		t.Fatalf("readme --partial: exit %d, stderr %q", code, errOut.String())
	}
	if b, _ := os.ReadFile(readme); !strings.Contains(string(b), "| tree | <= 256 | 124 | met |") || strings.Contains(string(b), "whole run") {
		t.Fatalf("README after --partial:\n%s", b)
	}
}
