package config

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/sethvargo/go-envconfig"
)

// LoadEnvFile sets the variables of a .env file (KEY=VALUE lines; blank
// lines, # comments, an "export " prefix and quotes around values are
// allowed) that the environment does not already set: the real environment
// wins, as the seeds' python-dotenv habit expects. Errors name file and line.
func LoadEnvFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("FERRY_ENV_FILE: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		k, v, ok := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			return fmt.Errorf("%s:%d: want KEY=VALUE, got %q", path, n, sc.Text())
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' && v[len(v)-1] == '"' || v[0] == '\'' && v[len(v)-1] == '\'') {
			v = v[1 : len(v)-1]
		}
		if _, set := os.LookupEnv(k); !set {
			if err := os.Setenv(k, v); err != nil {
				return fmt.Errorf("%s:%d: %w", path, n, err)
			}
		}
	}
	return sc.Err()
}

// FromEnvironment loads cfg from the process environment, after the .env
// file FERRY_ENV_FILE names, if any. This is what the binaries call.
func FromEnvironment(ctx context.Context, cfg validator) error {
	if p := os.Getenv("FERRY_ENV_FILE"); p != "" {
		if err := LoadEnvFile(p); err != nil {
			return err
		}
	}
	return Load(ctx, cfg, envconfig.OsLookuper())
}
