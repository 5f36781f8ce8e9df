package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/cli"
)

func TestUsageErrorsExit2AndNameTheInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  map[string]string
		code int
		out  string // in stdout
		err  string // in stderr
	}{
		{args: []string{"--help"}, code: 0, out: "restore [flags] gs://BUCKET/PREFIX[/OBJECT] DEST"},
		{args: []string{"--version"}, code: 0, out: "restore dev"},
		{args: []string{"gs://b-1/x"}, code: 2, err: `want gs://BUCKET/PREFIX[/OBJECT] and DEST, got ["gs://b-1/x"]`},
		{args: []string{"--bogus", "gs://b-1/x", "d"}, code: 2, err: "unknown flag: --bogus"},
		{args: []string{"s3://b-1/x", "d"}, code: 2, err: `source "s3://b-1/x": want gs://BUCKET/PREFIX`},
		{args: []string{"--memory", "lots", "gs://b-1/x", "d"}, code: 2, err: `"lots" is not a byte count`},
		{args: []string{"--concurrency", "64", "--memory", "64MiB", "gs://b-1/x", "d"}, code: 2, err: "want at least 4 MiB per range in flight"},
		{args: []string{"--to", "parquet", "gs://b-1/x/", "d"}, code: 2, err: `--to "parquet": want csv`},
		{args: []string{"gs://b-1/x", "d"}, env: map[string]string{"FERRY_RESTORE_CONCURRENCY": "0"}, code: 2, err: "FERRY_RESTORE_CONCURRENCY=0"},
	} {
		for k, v := range c.env {
			t.Setenv(k, v)
		}
		var out, errb bytes.Buffer
		code := cli.Run(context.Background(), command(), c.args, &out, &errb)
		if code != c.code || !strings.Contains(out.String(), c.out) || !strings.Contains(errb.String(), c.err) {
			t.Errorf("restore %q: exit %d, stdout %q, stderr %q; want exit %d, stdout with %q, stderr with %q",
				c.args, code, out.String(), errb.String(), c.code, c.out, c.err)
		}
	}
}
