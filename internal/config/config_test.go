package config

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/sethvargo/go-envconfig"
)

func TestDefaultsLoad(t *testing.T) {
	ctx := context.Background()
	var p Producer
	if err := Load(ctx, &p, envconfig.MapLookuper(nil)); err != nil {
		t.Fatal(err)
	}
	if p.ChunkSize != 32<<20 || p.Codec != "zstd" || p.PubSub.ChunksTopic != "ferry-chunks" || p.InlineMax != 256<<10 {
		t.Fatalf("unexpected defaults: %+v", p)
	}
	var w Worker
	if err := Load(ctx, &w, envconfig.MapLookuper(nil)); err != nil {
		t.Fatal(err)
	}
	if w.ID == "" || w.Concurrency != 8 {
		t.Fatalf("worker defaults: %+v", w)
	}
	var m Merger
	if err := Load(ctx, &m, envconfig.MapLookuper(nil)); err != nil {
		t.Fatal(err)
	}
}

func TestErrorsNameTheVariable(t *testing.T) {
	tests := []struct {
		env  map[string]string
		cfg  validator
		want string
	}{
		{map[string]string{"FERRY_CHUNK_SIZE": "lots"}, &Producer{}, "FERRY_CHUNK_SIZE"},
		{map[string]string{"FERRY_CHUNK_SIZE": "10"}, &Producer{}, "FERRY_CHUNK_SIZE"},
		{map[string]string{"FERRY_CODEC": "lz4"}, &Producer{}, "FERRY_CODEC"},
		{map[string]string{"FERRY_LOG_LEVEL": "loud"}, &Producer{}, "FERRY_LOG_LEVEL"},
		{map[string]string{"FERRY_WORKER_CONCURRENCY": "0"}, &Worker{}, "FERRY_WORKER_CONCURRENCY"},
		{map[string]string{"FERRY_SHUTDOWN_GRACE": "soon"}, &Worker{}, "FERRY_SHUTDOWN_GRACE"},
		{map[string]string{"FERRY_CHUNKS_TOPIC": "a b"}, &Worker{}, "FERRY_CHUNKS_TOPIC"},
		{map[string]string{"FERRY_COMPOSE_CONCURRENCY": "1000"}, &Merger{}, "FERRY_COMPOSE_CONCURRENCY"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			err := Load(context.Background(), tc.cfg, envconfig.MapLookuper(tc.env))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load(%v) error = %v, want one naming %s", tc.env, err, tc.want)
			}
		})
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]Bytes{"262144": 262144, "256KiB": 256 << 10, "32MiB": 32 << 20, "1GiB": 1 << 30, "10MB": 10e6, " 4 MiB ": 4 << 20} {
		got, err := ParseBytes(in)
		if err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "-1", "1.5MiB", "MiB", "99999999999TiB"} {
		if _, err := ParseBytes(bad); err == nil {
			t.Errorf("ParseBytes(%q) succeeded", bad)
		}
	}
}

func TestDescribeListsEveryVariable(t *testing.T) {
	vars := Describe(&Worker{})
	names := map[string]bool{}
	for _, v := range vars {
		if v.Help == "" {
			t.Errorf("%s has no help text", v.Name)
		}
		names[v.Name] = true
	}
	for _, want := range []string{"FERRY_PROJECT", "FERRY_CHUNKS_SUBSCRIPTION", "FERRY_WORKER_CONCURRENCY", "FERRY_SHUTDOWN_GRACE", "FERRY_LOG_LEVEL"} {
		if !names[want] {
			t.Errorf("Describe(Worker) lacks %s", want)
		}
	}
}

// TestREADMEListsEveryVariable keeps the README's table in step with the
// structs: every variable, with its default.
func TestREADMEListsEveryVariable(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for _, cfg := range []any{&Producer{}, &Worker{}, &Merger{}} {
		for _, v := range Describe(cfg) {
			row := "| `" + v.Name + "` |"
			i := strings.Index(readme, row)
			if i < 0 {
				t.Errorf("README.md has no row for %s", v.Name)
				continue
			}
			line := readme[i:]
			line = line[:strings.Index(line, "\n")]
			if v.Default != "" && !strings.Contains(line, "`"+v.Default+"`") {
				t.Errorf("README.md row for %s lacks its default %q: %s", v.Name, v.Default, line)
			}
		}
	}
}

func TestEnvFileDoesNotOverrideTheEnvironment(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/.env"
	body := "# seeds-style settings\nexport FERRY_CODEC=gzip\nFERRY_CHUNK_SIZE = \"8MiB\"\n\nFERRY_METHOD='from-file'\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FERRY_METHOD", "from-env")
	t.Setenv("FERRY_ENV_FILE", path)
	// Variables the file sets must not leak into other tests.
	t.Setenv("FERRY_CODEC", "")
	_ = os.Unsetenv("FERRY_CODEC")
	t.Setenv("FERRY_CHUNK_SIZE", "")
	_ = os.Unsetenv("FERRY_CHUNK_SIZE")
	var p Producer
	if err := FromEnvironment(context.Background(), &p); err != nil {
		t.Fatal(err)
	}
	if p.Codec != "gzip" || p.ChunkSize != 8<<20 || p.Method != "from-env" {
		t.Fatalf("codec %q chunk %d method %q; want gzip, 8MiB and the environment's method", p.Codec, p.ChunkSize, p.Method)
	}
}

func TestEnvFileErrorsNameTheLine(t *testing.T) {
	path := t.TempDir() + "/.env"
	if err := os.WriteFile(path, []byte("FERRY_CODEC=zstd\nthis is not a setting\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := LoadEnvFile(path); err == nil || !strings.Contains(err.Error(), path+":2") {
		t.Fatalf("error %v, want one naming %s:2", err, path)
	}
}
