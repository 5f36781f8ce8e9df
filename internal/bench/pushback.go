package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/ferry-dev/ferry/internal/bench/verdict"
	"github.com/ferry-dev/ferry/internal/gcs"
)

func (b *Bench) pushback(ctx context.Context) error {
	t := b.data.Small
	dir := t.Dir
	src := func() []string { return []string{dir} }
	for _, limit := range verdict.PushbackLimits {
		ms := []method{b.ferryMethod("ferry-4w", 4, "zstd", 0, src), b.cpMethod(src)}
		if err := b.runPlan(ctx, plan{workload: verdict.Pushback, tier: fmt.Sprintf("%s-limit-%.0f", t.Name, limit), methods: ms,
			verify: verifyUpload(t.Files, t.Bytes, nil, "peer/"), writeLimit: limit}); err != nil {
			return err
		}
	}
	return nil
}

// readPushbacks reads the push-back summaries from the logs of a repeat
// (prefix + "-NAME.log", JSON lines), one per process that met any.
func readPushbacks(prefix string) []verdict.ProcPushback {
	files, _ := filepath.Glob(prefix + "-*.log")
	var out []verdict.ProcPushback
	for _, path := range files {
		name := strings.TrimSuffix(strings.TrimPrefix(path, prefix+"-"), ".log")
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		p := verdict.ProcPushback{Name: name}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var l struct {
				Msg       string `json:"msg"`
				Message   string `json:"message"` // FERRY_LOG_FORMAT=json: Cloud Logging's names
				PushBacks int64  `json:"pushbacks"`
				Settled   string `json:"settled_writes_per_s"`
			}
			if json.Unmarshal(sc.Bytes(), &l) != nil || (l.Msg != gcs.PushbackSummary && l.Message != gcs.PushbackSummary) {
				continue
			}
			s, _ := strconv.ParseFloat(l.Settled, 64)
			p.PushBacks += l.PushBacks
			p.Settled += s
		}
		_ = f.Close()
		if p.PushBacks > 0 {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
