package config

import (
	"context"
	"strings"
	"testing"

	"github.com/sethvargo/go-envconfig"
)

// Issue 40 §6: ferry cp has one budget, and the services it runs in its
// process share it: their bounds add up to no more than FERRY_CP_MEMORY.
func TestCopyBudgetIsShared(t *testing.T) {
	for _, mem := range []string{"192MiB", "256MiB", "4GiB"} {
		var c Copy
		if err := Load(context.Background(), &c, envconfig.MapLookuper(map[string]string{"FERRY_CP_MEMORY": mem})); err != nil {
			t.Fatalf("FERRY_CP_MEMORY=%s: %v", mem, err)
		}
		p, w, m := c.Producer(), c.Worker(), c.Merger(t.TempDir())
		// The requests in flight hold their share beside their messages
		// (worker.Budget).
		sum := int64(p.MemoryLimit) + c.Backlog() + int64(w.MaxOutstanding) + w.RequestBytes() + int64(m.Memory)
		if sum > int64(c.Memory) {
			t.Errorf("FERRY_CP_MEMORY=%s: producer %d + backlog %d + uploads %d + their requests %d + merger %d = %d, over the budget", mem,
				p.MemoryLimit, c.Backlog(), w.MaxOutstanding, w.RequestBytes(), m.Memory, sum)
		}
		if p.Spool.Transport != TransportPubSub || p.MessageMax < 9<<20 {
			t.Errorf("FERRY_CP_MEMORY=%s: transport %s, message max %d: chunks must travel in their messages", mem, p.Spool.Transport, p.MessageMax)
		}
	}
}

// A bad value is refused at start naming its variable, whichever service
// the value is for.
func TestCopyRefusesBadValuesNamingThem(t *testing.T) {
	for env, want := range map[string]string{
		"FERRY_CP_MEMORY=1MiB":            "FERRY_CP_MEMORY",
		"FERRY_CP_UPLOADS=0":              "FERRY_CP_UPLOADS",
		"FERRY_CP_UPLOADS=5000":           "FERRY_CP_UPLOADS",
		"FERRY_CHUNK_SIZE=1KiB":           "FERRY_CHUNK_SIZE",
		"FERRY_CODEC=lzma":                "FERRY_CODEC",
		"FERRY_TRANSFER_TIMEOUT=1s":       "FERRY_TRANSFER_TIMEOUT",
		"FERRY_IDEMPOTENCY_SECRET=short":  "FERRY_IDEMPOTENCY_SECRET",
		"FERRY_BQ_DATASET=rows":           "FERRY_BQ_DATASET",
		"FERRY_COMPRESS_CONCURRENCY=-1":   "FERRY_COMPRESS_CONCURRENCY",
		"FERRY_BUCKETS=Not_A_Bucket_Name": "FERRY_BUCKETS",
	} {
		k, v, _ := strings.Cut(env, "=")
		var c Copy
		err := Load(context.Background(), &c, envconfig.MapLookuper(map[string]string{k: v}))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error naming %s", env, err, want)
		}
	}
}
