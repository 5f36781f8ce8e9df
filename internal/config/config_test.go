package config

import (
	"context"
	"fmt"
	"os"
	"strconv"
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
		{map[string]string{"FERRY_BQ_DATASET": "ferry", "FERRY_RESULTS_BUCKET": "b"}, &Merger{}, "FERRY_BQ_LOCATION"},
		{map[string]string{"FERRY_SOURCE_ROOTS": "/srv", "FERRY_AGENT_ID": "host a/1"}, &Agent{}, "FERRY_AGENT_ID"},
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
	for in, want := range map[string]Bytes{"262144": 262144, "256KiB": 256 << 10, "32MiB": 32 << 20, "1GiB": 1 << 30, "10MB": 10e6, "100kB": 100e3, " 4 MiB ": 4 << 20} {
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

// TestDocsListEveryVariable keeps docs/configuration.md's table in step with the
// structs: every variable, with its default.
func TestDocsListEveryVariable(t *testing.T) {
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for _, cfg := range []any{&Producer{}, &Worker{}, &Merger{}, &Restore{}, &Bench{}, &Copy{}, &Agent{}} {
		for _, v := range Describe(cfg) {
			row := "| `" + v.Name + "` |"
			i := strings.Index(readme, row)
			if i < 0 {
				t.Errorf("docs/configuration.md has no row for %s", v.Name)
				continue
			}
			line := readme[i:]
			line = line[:strings.Index(line, "\n")]
			if v.Default != "" && !strings.Contains(line, "`"+v.Default+"`") {
				t.Errorf("docs/configuration.md row for %s lacks its default %q: %s", v.Name, v.Default, line)
			}
		}
	}
}

func TestEnvFileDoesNotOverrideTheEnvironment(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/.env"
	body := "# seeds-style settings\nexport FERRY_CODEC=gzip\nFERRY_CHUNK_SIZE = \"8MiB\"\n\nFERRY_METHOD='from-file'\n" +
		"FERRY_LOG_LEVEL=warn # a comment after the value\nSTORAGE_EMULATOR_HOST=127.0.0.1:4443\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FERRY_METHOD", "from-env")
	t.Setenv(EnvFileVar, path)
	t.Setenv("STORAGE_EMULATOR_HOST", "") // restored after the test
	_ = os.Unsetenv("STORAGE_EMULATOR_HOST")
	var p Producer
	if err := FromEnvironment(context.Background(), &p); err != nil {
		t.Fatal(err)
	}
	if p.Codec != "gzip" || p.ChunkSize != 8<<20 || p.Method != "from-env" || p.Log.Level != "warn" || p.Emulators.GCS != "127.0.0.1:4443" {
		t.Fatalf("codec %q chunk %d method %q level %q gcs %q; want gzip, 8MiB, the environment's method, warn and the file's emulator",
			p.Codec, p.ChunkSize, p.Method, p.Log.Level, p.Emulators.GCS)
	}
	// The file is read, not applied: the process environment is unchanged.
	for k, v := range map[string]string{"FERRY_CODEC": "gzip", "FERRY_CHUNK_SIZE": "8MiB", "STORAGE_EMULATOR_HOST": "127.0.0.1:4443"} {
		if os.Getenv(k) == v {
			t.Errorf("%s=%s leaked into the process environment", k, v)
		}
	}
}

func TestEnvFileErrorsNameTheLine(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		line       int
	}{
		{"not a setting", "FERRY_CODEC=zstd\nthis is not a setting\n", 2},
		{"after a multi-line quoted value", "A=\"one\ntwo\"\nB=2\n# note\nC D=3\n", 5},
		{"unterminated quote", "A=1\n\nB=\"open\n", 3},
		{"bad key", "A=1\nexport FERRY.CODEC=zstd\n", 2},
		// Issue 42 §5: a key file named by mistake; nothing of it shown.
		{"a key file", "{\n  \"type\": \"service_account\",\n  \"private_key\": \"-----BEGIN PRIVATE KEY-----\\nSECRET\\n\"\n}\n", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := t.TempDir() + "/.env"
			if err := os.WriteFile(path, []byte(tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := ReadEnvFile(path)
			if want := fmt.Sprintf("%s:%d:", path, tc.line); err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("error %v, want one naming %s", err, want)
			}
			for _, secret := range []string{"SECRET", "service_account", "open", "FERRY.CODEC", "this is"} {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("error %q shows the file's contents (%q)", err, secret)
				}
			}
			t.Setenv(EnvFileVar, path)
			if err := FromEnvironment(context.Background(), &Producer{}); !IsError(err) {
				t.Fatalf("FromEnvironment error %v is not a configuration error", err)
			}
		})
	}
}

// TestConfigErrorsAreConfigErrors: an invalid variable is a configuration
// error (binaries exit 2 on it), also when it parses but is out of range.
func TestConfigErrorsAreConfigErrors(t *testing.T) {
	for _, env := range []map[string]string{{"FERRY_CHUNK_SIZE": "lots"}, {"FERRY_CHUNK_SIZE": "512KiB"}, {"PUBSUB_EMULATOR_HOST": "http://x/"}} {
		if err := Load(context.Background(), &Producer{}, envconfig.MapLookuper(env)); !IsError(err) {
			t.Errorf("Load(%v) = %v, want a configuration error", env, err)
		}
	}
	// Issue 42 §5: values that once panicked or escaped the memory
	// budget are refused at start, naming the variable.
	for k, v := range map[string]string{"FERRY_REQUEST_STALL": "0", "FERRY_COMPRESS_CONCURRENCY": "1000"} {
		err := Load(context.Background(), &Producer{}, envconfig.MapLookuper(map[string]string{k: v}))
		if !IsError(err) || !strings.Contains(err.Error(), k+"=") {
			t.Errorf("%s=%s: %v, want a configuration error naming it", k, v, err)
		}
	}
	// A secret too short to keep ids unguessable, named without its value.
	err := Load(context.Background(), &Producer{}, envconfig.MapLookuper(map[string]string{"FERRY_IDEMPOTENCY_SECRET": "hunter2"}))
	if !IsError(err) || !strings.Contains(err.Error(), "FERRY_IDEMPOTENCY_SECRET") || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("a 7-character FERRY_IDEMPOTENCY_SECRET: %v, want a configuration error naming the variable, not its value", err)
	}
}

// TestChunkSizeLimitsAreOneCheck: the bounds FERRY_CHUNK_SIZE has are the
// ones --chunk-size uses (CheckChunkSize), and they are what the message says.
func TestChunkSizeLimitsAreOneCheck(t *testing.T) {
	for b, ok := range map[Bytes]bool{MinChunkSize - 1: false, MinChunkSize: true, 32 << 20: true, MaxChunkSize: true, MaxChunkSize + 1: false} {
		err := CheckChunkSize(b)
		if (err == nil) != ok {
			t.Errorf("CheckChunkSize(%d) = %v", b, err)
		}
		envErr := Load(context.Background(), &Producer{}, envconfig.MapLookuper(map[string]string{"FERRY_CHUNK_SIZE": strconv.FormatInt(int64(b), 10)}))
		if (envErr == nil) != ok {
			t.Errorf("FERRY_CHUNK_SIZE=%d: %v", b, envErr)
		}
		if err != nil && !strings.Contains(err.Error(), "want 1MiB to 1GiB") {
			t.Errorf("CheckChunkSize(%d) = %v, want the bounds named", b, err)
		}
	}
}
