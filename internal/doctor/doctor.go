// Package doctor proves a deployment, as `producer doctor` runs it: with the
// caller's own credentials and the configuration the fleet uses, it checks
// that what terraform/ creates exists as ferry needs it (topics,
// subscriptions and their dead-letter policies, the bucket's key and
// lifecycle, the dataset's location and tables), that the caller may do what
// a submitter does, which of the pool's agents answer and read their roots
// (pool.go), and then sends a canary transfer through the fleet and
// reads it back (canary.go). It keeps nothing: every run asks GCS, Pub/Sub
// and BigQuery again, and the canary removes what it wrote.
//
// A check that the backend cannot answer (an emulator that keeps no
// lifecycle rules, a caller that may not read subscriptions) is skipped with
// the reason, never passed.
package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/queue"
)

// Status is a check's outcome.
type Status string

// The outcomes.
const (
	OK   Status = "ok"
	Fail Status = "FAIL"
	Skip Status = "skip"
)

// Result is one line of the doctor's table.
type Result struct {
	Check  string `json:"check"`
	Status Status `json:"status"`
	// Detail is what was found; Do what to do about a failure.
	Detail string `json:"detail"`
	Do     string `json:"do,omitempty"`
}

// Failed reports whether any result failed.
func Failed(rs []Result) bool {
	for _, r := range rs {
		if r.Status == Fail {
			return true
		}
	}
	return false
}

// Write prints rs as a table: check, result, what was found, what to do.
func Write(w io.Writer, rs []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tRESULT\tFOUND\tDO")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Check, r.Status, r.Detail, r.Do)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	n := map[Status]int{}
	for _, r := range rs {
		n[r.Status]++
	}
	_, err := fmt.Fprintf(w, "\n%d ok, %d failed, %d skipped\n", n[OK], n[Fail], n[Skip])
	return err
}

// WriteJSON prints rs as one JSON object: {"ok": bool, "checks": [...]}.
func WriteJSON(w io.Writer, rs []Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		OK     bool     `json:"ok"`
		Checks []Result `json:"checks"`
	}{!Failed(rs), rs})
}

// pubsubAdmin is what the doctor asks Pub/Sub. *queue.Client has it.
type pubsubAdmin interface {
	TopicKMSKey(ctx context.Context, id string) (string, error)
	DescribeSubscription(ctx context.Context, id string) (queue.SubscriptionInfo, error)
	TestTopicPermissions(ctx context.Context, id string, perms []string) ([]string, error)
	Endpoint() string
}

var _ pubsubAdmin = (*queue.Client)(nil)

// bucketStore is what the doctor asks GCS. *gcs.Store has it.
type bucketStore interface {
	Bucket(ctx context.Context, bucket string) (gcs.BucketInfo, error)
	TestPermissions(ctx context.Context, bucket string, perms []string) ([]string, error)
	PutSmall(ctx context.Context, bucket, name string, data []byte, ifAbsent bool, contentType string) (gcs.Attrs, error)
	ReadAll(ctx context.Context, bucket, name string) ([]byte, error)
	Delete(ctx context.Context, bucket, name string) error
	List(ctx context.Context, bucket, prefix string, fn func(gcs.Attrs) error) error
}

var _ bucketStore = (*gcs.Store)(nil)

// Dataset is what the doctor learns of the BigQuery dataset.
type Dataset struct {
	Location string
	// Tables maps each table to its columns, "name TYPE MODE" in order.
	Tables map[string][]string
}

// datasetReader reads a dataset's location and tables (bigquery.go).
type datasetReader interface {
	Dataset(ctx context.Context, project, dataset string) (Dataset, error)
}

// Options are one doctor's run.
type Options struct {
	PubSub config.PubSub
	// Bucket is the fleet's bucket; KMSKey what FERRY_KMS_KEY says (""
	// for Google-managed keys).
	Bucket, KMSKey string
	// Emulated: GCS is fake-gcs-server, which keeps no location, uniform
	// access, soft delete or lifecycle rules: those checks are skipped.
	Emulated bool
	Queue    pubsubAdmin
	Store    bucketStore
	// BigQuery: the dataset and the location the merger loads into
	// (FERRY_BQ_*); Datasets nil or BQDataset "" skips the checks.
	Datasets             datasetReader
	BQProject, BQDataset string
	BQLocation           string
	WantTables           map[string][]string
	// ID names this run's probe objects.
	ID string
	// Pool: an agent of the pool must answer (producer doctor --pool).
	Pool bool
	// Now is the clock heartbeats are aged by (default time.Now).
	Now func() time.Time
}

func (o Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

// checkTimeout bounds each check; every call below has its own deadline
// too (queue, gcs).
const checkTimeout = 30 * time.Second

// Run makes every check but the canary and returns one result each.
func Run(ctx context.Context, o Options) []Result {
	var rs []Result
	add := func(r ...Result) { rs = append(rs, r...) }
	add(topics(ctx, o)...)
	add(subscriptions(ctx, o)...)
	add(bucket(ctx, o)...)
	add(permissions(ctx, o)...)
	add(dataset(ctx, o)...)
	add(Pool(ctx, o)...)
	return rs
}

// topics: every topic and dead-letter topic exists, under the key.
func topics(ctx context.Context, o Options) []Result {
	ps := o.PubSub
	ids := []string{ps.RequestsTopic, ps.ChunksTopic, ps.EventsTopic, ps.ControlTopic, ps.DoneTopic, ps.ShardsTopic,
		ps.RequestsDeadLetter, ps.ChunksDeadLetter, ps.EventsDeadLetter, ps.ControlDeadLetter, ps.ShardsDeadLetter}
	var rs []Result
	for _, id := range ids {
		if id == "" {
			continue
		}
		r := Result{Check: "pubsub: topic " + id}
		cctx, cancel := context.WithTimeout(ctx, checkTimeout)
		key, err := o.Queue.TopicKMSKey(cctx, id)
		cancel()
		switch {
		case errors.Is(err, queue.ErrNotFound):
			r.Status, r.Detail, r.Do = Fail, "does not exist on "+o.Queue.Endpoint(), "terraform apply (terraform/pubsub.tf), or check FERRY_PROJECT and the FERRY_*_TOPIC names"
		case errors.Is(err, queue.ErrDenied):
			r.Status, r.Detail = Skip, "the caller may not read topics (roles/pubsub.viewer)"
		case err != nil:
			r.Status, r.Detail, r.Do = Fail, err.Error(), "check FERRY_PROJECT and that Pub/Sub answers"
		case o.KMSKey != "" && key != o.KMSKey:
			r.Status, r.Detail, r.Do = Fail, fmt.Sprintf("encrypted with %q, not FERRY_KMS_KEY", key), "terraform apply with kms = true (every topic takes the key)"
		default:
			r.Status, r.Detail = OK, "exists"
			if key != "" {
				r.Detail += ", CMEK " + key
			}
		}
		rs = append(rs, r)
	}
	return rs
}

// subscriptions: each subscription of the fleet receives from its topic
// and dead-letters into its own dead-letter topic. The chunks one is also
// what the workers' autoscaler watches.
func subscriptions(ctx context.Context, o Options) []Result {
	ps := o.PubSub
	want := []struct{ id, topic, dead, who string }{
		{ps.ChunksSubscription, ps.ChunksTopic, ps.ChunksDeadLetter, "the workers' (and the autoscaler's)"},
		{ps.EventsSubscription, ps.EventsTopic, ps.EventsDeadLetter, "the merger's"},
		{ps.ControlSubscription, ps.ControlTopic, ps.ControlDeadLetter, "the merger's"},
		{ps.RequestsSubscription, ps.RequestsTopic, ps.RequestsDeadLetter, "producer serve's"},
		{ps.ShardsSubscription, ps.ShardsTopic, ps.ShardsDeadLetter, "the pool's agents'"},
	}
	var rs []Result
	for _, w := range want {
		if w.id == "" {
			continue
		}
		r := Result{Check: "pubsub: subscription " + w.id}
		cctx, cancel := context.WithTimeout(ctx, checkTimeout)
		info, err := o.Queue.DescribeSubscription(cctx, w.id)
		cancel()
		switch {
		case errors.Is(err, queue.ErrNotFound):
			r.Status, r.Detail, r.Do = Fail, w.who+" subscription does not exist", "terraform apply (terraform/pubsub.tf)"
		case errors.Is(err, queue.ErrDenied):
			r.Status, r.Detail = Skip, "the caller may not read subscriptions (a submitter has no subscription rights): run as an operator to check it"
		case err != nil:
			r.Status, r.Detail, r.Do = Fail, err.Error(), "check that Pub/Sub answers"
		case info.Topic != w.topic:
			r.Status, r.Detail, r.Do = Fail, fmt.Sprintf("receives from topic %q, want %s", info.Topic, w.topic), "terraform apply (terraform/pubsub.tf)"
		case w.dead != "" && info.DeadLetterTopic != w.dead:
			r.Status, r.Detail, r.Do = Fail, fmt.Sprintf("dead-letters into %q, want %s: a message that always fails would be redelivered forever", info.DeadLetterTopic, w.dead), "terraform apply (terraform/pubsub.tf)"
		default:
			r.Status, r.Detail = OK, fmt.Sprintf("on %s, dead-letters into %s after %d attempts", info.Topic, info.DeadLetterTopic, info.MaxAttempts)
		}
		rs = append(rs, r)
	}
	return rs
}

// bucket: the bucket exists with the key, uniform access, the bucket's
// soft delete and the lifecycle rule that removes a crash's staging.
func bucket(ctx context.Context, o Options) []Result {
	check := "gcs: bucket gs://" + o.Bucket
	cctx, cancel := context.WithTimeout(ctx, checkTimeout)
	b, err := o.Store.Bucket(cctx, o.Bucket)
	cancel()
	switch {
	case errors.Is(err, gcs.ErrNotFound):
		return []Result{{check, Fail, "does not exist", "terraform apply (terraform/storage.tf), or check FERRY_BUCKETS"}}
	case err != nil:
		return []Result{{check, Fail, err.Error(), "check the bucket's name and that GCS answers"}}
	}
	rs := []Result{{check, OK, "exists" + inLocation(b.Location), ""}}
	if o.BQLocation != "" && b.Location != "" {
		r := Result{"gcs: bucket location", OK, fmt.Sprintf("%s: BigQuery in %s loads from it", b.Location, o.BQLocation), ""}
		if !loadsFrom(o.BQLocation, b.Location) {
			r = Result{"gcs: bucket location", Fail, fmt.Sprintf("%s: a load job of a dataset in %s cannot read it", b.Location, o.BQLocation),
				"put the dataset in the bucket's region, US, or the multi-region that holds it (terraform's bq_location)"}
		}
		rs = append(rs, r)
	}
	key := Result{Check: "gcs: bucket key"}
	switch {
	case b.DefaultKMSKey == o.KMSKey && o.KMSKey == "":
		key.Status, key.Detail = OK, "Google-managed (FERRY_KMS_KEY is empty)"
	case b.DefaultKMSKey == o.KMSKey:
		key.Status, key.Detail = OK, "CMEK "+b.DefaultKMSKey
	case o.Emulated && o.KMSKey != "":
		key.Status, key.Detail = Skip, "fake-gcs-server keeps no keys"
	default:
		key.Status, key.Detail, key.Do = Fail, fmt.Sprintf("default key %q, FERRY_KMS_KEY %q", b.DefaultKMSKey, o.KMSKey), "set FERRY_KMS_KEY to the bucket's key, or terraform apply with kms as you want it"
	}
	rs = append(rs, key)
	if o.Emulated {
		return append(rs, Result{"gcs: bucket settings", Skip, "fake-gcs-server keeps no uniform access, soft delete or lifecycle rules", ""})
	}
	ubla := Result{"gcs: uniform access", OK, "on", ""}
	if !b.UniformAccess {
		ubla = Result{"gcs: uniform access", Fail, "off: object ACLs could grant what IAM does not", "terraform apply (uniform_bucket_level_access)"}
	}
	soft := Result{"gcs: soft delete", OK, fmt.Sprintf("%d days", int(b.SoftDelete.Hours()/24)), ""}
	if b.SoftDelete == 0 {
		soft.Detail = "off: an accidental delete of your data cannot be undone (deleted staging parts cost nothing)"
	}
	life := Result{"gcs: staging lifecycle", OK, fmt.Sprintf("%s deleted after %d days", message.StagingRoot, b.Expiry[message.StagingRoot]), ""}
	if _, ok := b.Expiry[message.StagingRoot]; !ok {
		life = Result{"gcs: staging lifecycle", Fail, "no lifecycle rule deletes " + message.StagingRoot + ": parts a crash leaves behind stay and are billed", "terraform apply (terraform/storage.tf)"}
	}
	if days, ok := b.Expiry[""]; ok {
		life = Result{"gcs: staging lifecycle", Fail, fmt.Sprintf("a lifecycle rule deletes every object after %d days, final objects included", days), "give the rule matches_prefix"}
	}
	return append(rs, ubla, soft, life)
}

// loadsFrom reports whether a BigQuery dataset in location bq can load
// from a bucket in location bucket: the same location, the US
// multi-region, or EU for a bucket in a European region (terraform's
// bq_location precondition says the same).
func loadsFrom(bq, bucket string) bool {
	bq, bucket = strings.ToLower(bq), strings.ToLower(bucket)
	return bq == bucket || bq == "us" || (bq == "eu" && strings.HasPrefix(bucket, "europe-"))
}

func inLocation(l string) string {
	if l == "" {
		return ""
	}
	return " in " + l
}

// roleFor names the role that grants a permission a submitter needs.
var roleFor = map[string]string{
	"storage.buckets.get":    "ferry's custom role ferryBucketGet (terraform/iam.tf) or roles/storage.legacyBucketReader",
	"storage.objects.list":   "ferry's custom role ferryObjectsList or roles/storage.objectViewer",
	"storage.objects.create": "roles/storage.objectUser (the submitter's: on .ferry/; objectViewer on .ferry-done/)",
	"storage.objects.get":    "roles/storage.objectUser (the submitter's: on .ferry/; objectViewer on .ferry-done/)",
	"storage.objects.delete": "roles/storage.objectUser (the submitter's: on .ferry/; objectViewer on .ferry-done/)",
	"pubsub.topics.publish":  "roles/pubsub.publisher",
}

// permissions: the caller may do what `producer submit` does. Bucket-level
// permissions come from testIamPermissions; object permissions are granted
// to a submitter only under ferry's prefixes (a condition testIamPermissions
// on the bucket cannot see), so a probe object under the staging prefix is
// written, read and deleted instead.
func permissions(ctx context.Context, o Options) []Result {
	var rs []Result
	bucketPerms := []string{"storage.buckets.get", "storage.objects.list"}
	cctx, cancel := context.WithTimeout(ctx, checkTimeout)
	got, err := o.Store.TestPermissions(cctx, o.Bucket, bucketPerms)
	cancel()
	check := "iam: gs://" + o.Bucket
	if err != nil {
		rs = append(rs, Result{check, Fail, err.Error(), "check that GCS answers testIamPermissions"})
	} else if miss := missing(bucketPerms, got); len(miss) > 0 {
		rs = append(rs, Result{check, Fail, "the caller lacks " + strings.Join(miss, ", "), grants(miss)})
	} else {
		rs = append(rs, Result{check, OK, "may " + strings.Join(bucketPerms, ", "), ""})
	}
	rs = append(rs, probe(ctx, o))
	for _, topic := range []string{o.PubSub.ChunksTopic, o.PubSub.ControlTopic} {
		check := "iam: topic " + topic
		cctx, cancel := context.WithTimeout(ctx, checkTimeout)
		got, err := o.Queue.TestTopicPermissions(cctx, topic, []string{"pubsub.topics.publish"})
		cancel()
		switch {
		case errors.Is(err, queue.ErrNotFound):
			continue // the topic check says so
		case err != nil && strings.Contains(err.Error(), "Unimplemented"):
			rs = append(rs, Result{check, Skip, "this Pub/Sub (" + o.Queue.Endpoint() + ") does not answer testIamPermissions", ""})
		case err != nil:
			rs = append(rs, Result{check, Fail, err.Error(), "check that Pub/Sub answers"})
		case len(missing([]string{"pubsub.topics.publish"}, got)) > 0:
			rs = append(rs, Result{check, Fail, "the caller may not publish to " + topic, "grant roles/pubsub.publisher on topic " + topic})
		default:
			rs = append(rs, Result{check, OK, "may publish", ""})
		}
	}
	return rs
}

// probe writes, reads and deletes one small object under the staging
// prefix, as a submitter writes its manifest.
func probe(ctx context.Context, o Options) Result {
	name := message.StagingRoot + "doctor-" + o.ID
	check := "iam: write gs://" + o.Bucket + "/" + message.StagingRoot
	cctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	body := []byte("ferry doctor " + o.ID + "\n")
	if _, err := o.Store.PutSmall(cctx, o.Bucket, name, body, true, "text/plain"); err != nil {
		return Result{check, Fail, err.Error(), grants([]string{"storage.objects.create"})}
	}
	b, err := o.Store.ReadAll(cctx, o.Bucket, name)
	if err != nil || string(b) != string(body) {
		_ = o.Store.Delete(cctx, o.Bucket, name)
		return Result{check, Fail, fmt.Sprintf("read back %q, %v", b, err), grants([]string{"storage.objects.get"})}
	}
	if err := o.Store.Delete(cctx, o.Bucket, name); err != nil {
		return Result{check, Fail, err.Error(), grants([]string{"storage.objects.delete"})}
	}
	return Result{check, OK, "wrote, read back and deleted " + name, ""}
}

func missing(want, got []string) []string {
	have := map[string]bool{}
	for _, g := range got {
		have[g] = true
	}
	var out []string
	for _, w := range want {
		if !have[w] {
			out = append(out, w)
		}
	}
	return out
}

func grants(perms []string) string {
	var roles []string
	seen := map[string]bool{}
	for _, p := range perms {
		if r := roleFor[p]; r != "" && !seen[r] {
			seen[r] = true
			roles = append(roles, r)
		}
	}
	sort.Strings(roles)
	return "grant " + strings.Join(roles, "; ")
}

// dataset: the dataset is where the merger loads from (FERRY_BQ_LOCATION)
// and its tables have the schema of schema/.
func dataset(ctx context.Context, o Options) []Result {
	check := "bigquery: dataset " + o.BQDataset
	if o.Datasets == nil || o.BQDataset == "" {
		return []Result{{"bigquery: dataset", Skip, "no --bq-dataset given (the merger's FERRY_BQ_DATASET): not checked", ""}}
	}
	cctx, cancel := context.WithTimeout(ctx, checkTimeout)
	d, err := o.Datasets.Dataset(cctx, o.BQProject, o.BQDataset)
	cancel()
	if err != nil {
		return []Result{{check, Fail, err.Error(), "terraform apply (terraform/bigquery.tf), or check --bq-project and --bq-dataset"}}
	}
	var rs []Result
	if o.BQLocation != "" && !strings.EqualFold(d.Location, o.BQLocation) {
		rs = append(rs, Result{check, Fail, fmt.Sprintf("in %s, but FERRY_BQ_LOCATION says %s: every load job would fail", d.Location, o.BQLocation), "set the merger's FERRY_BQ_LOCATION to " + d.Location + " (terraform sets it from the dataset)"})
	} else {
		rs = append(rs, Result{check, OK, "in " + d.Location, ""})
	}
	names := make([]string, 0, len(o.WantTables))
	for t := range o.WantTables {
		names = append(names, t)
	}
	sort.Strings(names)
	for _, t := range names {
		want := o.WantTables[t]
		got, ok := d.Tables[t]
		check := "bigquery: table " + o.BQDataset + "." + t
		switch {
		case !ok:
			rs = append(rs, Result{check, Fail, "does not exist", "terraform apply (terraform/bigquery.tf)"})
		case strings.Join(got, ", ") != strings.Join(want, ", "):
			rs = append(rs, Result{check, Fail, "schema differs from schema/" + t + ".json: " + firstDiff(got, want), "update the table to schema/" + t + ".json (terraform apply)"})
		default:
			rs = append(rs, Result{check, OK, fmt.Sprintf("schema of schema/%s.json (%d columns)", t, len(want)), ""})
		}
	}
	return rs
}

func firstDiff(got, want []string) string {
	for i := 0; i < max(len(got), len(want)); i++ {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			return fmt.Sprintf("column %d is %q, want %q", i+1, g, w)
		}
	}
	return ""
}
