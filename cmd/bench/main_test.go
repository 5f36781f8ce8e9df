package main

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

func TestParseWorkloads(t *testing.T) {
	got, err := parseWorkloads("1, shaped-link,5,7")
	if err != nil || !reflect.DeepEqual(got, []string{"large-file", "shaped-link", "restore", "big-tree"}) {
		t.Errorf("parseWorkloads = %v, %v", got, err)
	}
	if got, err := parseWorkloads(""); err != nil || got != nil {
		t.Errorf("empty: %v, %v; want all (nil)", got, err)
	}
	if _, err := parseWorkloads("8"); err == nil || !strings.Contains(err.Error(), `workload "8"`) {
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
