package config

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/joho/godotenv"
	"github.com/sethvargo/go-envconfig"
)

// EnvFileVar names the .env file whose settings apply where the environment
// sets nothing.
const EnvFileVar = "FERRY_ENV_FILE"

// ReadEnvFile reads a .env file with godotenv, the seeds' python-dotenv
// habit in Go: KEY=VALUE lines, blank lines, # comments (also after a value:
// "KEY=v # note" is v), an "export " prefix, and single or double quotes
// around values. Keys must be variable names. Errors name file and line.
// The process environment is neither read nor changed.
func ReadEnvFile(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvFileVar, err)
	}
	vars, err := godotenv.UnmarshalBytes(b)
	if err != nil {
		// The parser quotes the rest of the file ("near ..."): never
		// shown, since a file named by mistake may hold a key.
		msg, _, _ := strings.Cut(err.Error(), " near ")
		msg, _, _ = strings.Cut(msg, `"`) // nor what it quotes
		msg = strings.TrimSpace(msg)
		return nil, fmt.Errorf("%s:%d: %s: not a .env file of KEY=VALUE lines (%s names it; its contents are not shown)", path, badLine(b), msg, EnvFileVar)
	}
	for k := range vars {
		if !varName.MatchString(k) {
			return nil, fmt.Errorf("%s:%d: not a variable name (%s names the file; its contents are not shown)", path, lineOfKey(b, k), EnvFileVar)
		}
	}
	return vars, nil
}

var varName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// badLine finds the line a parse error starts on: the line after the
// longest run of leading lines that parses. (A quoted value may span lines,
// so a shorter prefix can fail where the whole file would not.)
func badLine(b []byte) int {
	lines := strings.SplitAfter(string(b), "\n")
	good := 0
	for n := 1; n <= len(lines); n++ {
		if _, err := godotenv.Unmarshal(strings.Join(lines[:n], "")); err == nil {
			good = n
		}
	}
	return good + 1
}

// lineOfKey is the first line that sets key.
func lineOfKey(b []byte, key string) int {
	for i, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		l = strings.TrimSpace(strings.TrimPrefix(l, "export "))
		if strings.HasPrefix(l, key) {
			return i + 1
		}
	}
	return 1
}

// Environment is where the binaries read their settings: the process
// environment first, then the .env file FERRY_ENV_FILE names, if any.
func Environment() (envconfig.Lookuper, error) {
	path := os.Getenv(EnvFileVar)
	if path == "" {
		return envconfig.OsLookuper(), nil
	}
	vars, err := ReadEnvFile(path)
	if err != nil {
		return nil, &Error{err}
	}
	return envconfig.MultiLookuper(envconfig.OsLookuper(), envconfig.MapLookuper(vars)), nil
}

// FromEnvironment loads cfg from Environment. This is what the binaries call.
func FromEnvironment(ctx context.Context, cfg validator) error {
	l, err := Environment()
	if err != nil {
		return err
	}
	return Load(ctx, cfg, l)
}
