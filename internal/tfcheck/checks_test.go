package tfcheck

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"net"
	"path"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/sethvargo/go-envconfig"
	"github.com/zclconf/go-cty/cty"

	"github.com/ferry-dev/ferry/internal/benchrow"
	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/loader"
	"github.com/ferry-dev/ferry/internal/localstack"
	"github.com/ferry-dev/ferry/internal/message"
)

// The checks. Each returns what is wrong, one sentence a problem; the
// mutation test in tfcheck_test.go proves each can fail.

// donePrefix is where done markers live: their own prefix, kept for
// FERRY_DONE_RETENTION, not under message.StagingRoot.
const donePrefix = message.DoneRoot

// binaries maps the ferry-binary metadata value to the configuration that
// binary reads.
var binaries = map[string]func() any{
	"worker":   func() any { return &config.Worker{} },
	"merger":   func() any { return &config.Merger{} },
	"producer": func() any { return &config.Producer{} },
	// The release's ferry, which the fleet runs only as `ferry agent`.
	"ferry-linux-amd64": func() any { return &config.Agent{} },
}

// pooled are the binaries that run only with pool = true.
var pooled = map[string]bool{"ferry-linux-amd64": true}

// unsetOnPurpose lists variables without a default that a deployment
// leaves unset, and why. Any other variable without a default must be set.
var unsetOnPurpose = map[string]map[string]string{
	"worker": {"FERRY_WORKER_ID": "the host name and process id are the name wanted"},
	"agent":  {"FERRY_AGENT_ID": "the host name is the name wanted"},
	"submitter": {"FERRY_SOURCE_ROOTS": "submit reads what its user can", "FERRY_SPOOL_DIR": "FERRY_TRANSPORT=pubsub: no spool",
		"FERRY_KEY_DIR":            "end keys go to the submitting user's own state directory",
		"FERRY_IDEMPOTENCY_SECRET": "a team's own secret, kept beside its credentials, never in an output every submitter reads (deploying.md)"},
	"producer": {"FERRY_KEY_DIR": "producer serve keeps end keys in memory; its requesters send end_key_sha256",
		"FERRY_IDEMPOTENCY_SECRET": "set by the operator beside the service's credentials if its requesters use one; a secret does not belong in instance metadata"},
	"*": {
		"PUBSUB_EMULATOR_HOST":  "the local emulators' variables: unset, the clients reach Google Cloud",
		"STORAGE_EMULATOR_HOST": "the local emulators' variables: unset, the clients reach Google Cloud",
	},
}

// localDefaults are variables whose defaults are the local stack's, so a
// deployment must set them although they have defaults.
var localDefaults = []string{"FERRY_PROJECT", "FERRY_TRANSPORT"}

func defaultPubSub() config.PubSub {
	var w config.Worker
	if err := config.Load(context.Background(), &w, envconfig.MapLookuper(nil)); err != nil {
		panic(err)
	}
	return w.PubSub
}

// get evaluates attribute name of body for in; problems are reported by
// the caller as missing or unknown.
func get(in *Instance, body *hclsyntax.Body, name string) cty.Value {
	if body == nil {
		return cty.NilVal
	}
	v, ok, err := in.Attr(body, name)
	if !ok || err != nil {
		return cty.NilVal
	}
	return v
}

func str(v cty.Value) (string, bool) {
	if v == cty.NilVal || !v.IsKnown() || v.IsNull() {
		return "", false
	}
	switch v.Type() {
	case cty.String:
		return v.AsString(), true
	case cty.Number:
		return v.AsBigFloat().Text('f', -1), true
	case cty.Bool:
		return strconv.FormatBool(v.True()), true
	}
	return "", false
}

func num(v cty.Value) (int64, bool) {
	s, ok := str(v)
	if !ok {
		return 0, false
	}
	f, _, err := big.ParseFloat(s, 10, 64, big.ToNearestEven)
	if err != nil {
		return 0, false
	}
	n, _ := f.Int64()
	return n, true
}

func block(body *hclsyntax.Body, typ string) *hclsyntax.Body {
	if bs := Blocks(body, typ); len(bs) > 0 {
		return bs[0]
	}
	return nil
}

// instances returns every instance of every resource of type typ.
func instances(ev *Eval, typ string) []*Instance {
	var out []*Instance
	for _, r := range ev.m.ResourcesOf(typ) {
		out = append(out, ev.Instances(r)...)
	}
	return out
}

// byName indexes instances of typ by their evaluated name attribute.
func byName(ev *Eval, typ string) map[string]*Instance {
	out := map[string]*Instance{}
	for _, in := range instances(ev, typ) {
		if n, ok := str(get(in, in.Res.Body, "name")); ok {
			out[n] = in
		}
	}
	return out
}

// nameOf resolves a reference (…topic["x"].id) to the name of what it points to.
func nameOf(ev *Eval, v cty.Value) string {
	if in, _, ok := ev.Resolve(v); ok {
		n, _ := str(get(in, in.Res.Body, "name"))
		return n
	}
	s, _ := str(v)
	return s
}

func parseEnv(s string) map[string]string {
	env := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	return env
}

// service is one deployed binary: its template and environment.
type service struct {
	name, binary string
	tmpl         *Instance
	env          map[string]string
	metadata     map[string]string
}

func services(ev *Eval) ([]service, []string) {
	var out []service
	var problems []string
	for _, in := range instances(ev, "google_compute_instance_template") {
		md := get(in, in.Res.Body, "metadata")
		if md == cty.NilVal || !md.IsKnown() || md.IsNull() {
			problems = append(problems, in.Addr()+": metadata is not known before apply")
			continue
		}
		m := map[string]string{}
		for k, v := range md.AsValueMap() {
			var ok bool
			if m[k], ok = str(v); !ok && k != "ferry-nfs" { // the share's address is known after apply
				problems = append(problems, in.Addr()+": metadata "+k+" is not known before apply")
			}
		}
		key, _ := str(in.Key)
		out = append(out, service{name: key, binary: m["ferry-binary"], tmpl: in, env: parseEnv(m["ferry-env"]), metadata: m})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, problems
}

func checkEnv(ev *Eval) []string {
	svcs, problems := services(ev)
	if len(svcs) == 0 {
		problems = append(problems, "no google_compute_instance_template: nothing runs ferry")
	}
	seen := map[string]bool{}
	for _, s := range svcs {
		seen[s.binary] = true
		problems = append(problems, checkVars(ev, s.tmpl.Addr(), s.binary, s.name, s.env)...)
	}
	pool := ev.Var("pool").RawEquals(cty.True)
	for bin := range binaries {
		if seen[bin] && pooled[bin] && !pool {
			problems = append(problems, "an instance template runs "+bin+" with pool = false")
		}
		if !seen[bin] && (pool || !pooled[bin]) {
			problems = append(problems, "no instance template runs "+bin)
		}
	}
	out, err := ev.Output("submitter_env")
	if s, ok := str(out); err != nil || !ok {
		problems = append(problems, fmt.Sprintf("output submitter_env is not a known string: %v", err))
	} else {
		env := parseEnv(s)
		problems = append(problems, checkVars(ev, "output.submitter_env", "producer", "submitter", env)...)
		if env["FERRY_TRANSPORT"] != config.TransportPubSub {
			problems = append(problems, "output.submitter_env: FERRY_TRANSPORT="+env["FERRY_TRANSPORT"]+", want pubsub: a submitter shares nothing with the workers")
		}
	}
	return problems
}

func checkVars(ev *Eval, where, binary, role string, env map[string]string) []string {
	mk, ok := binaries[binary]
	if !ok {
		return []string{fmt.Sprintf("%s: ferry-binary=%q is not a ferry binary", where, binary)}
	}
	var problems []string
	reads := map[string]config.Var{}
	for _, v := range config.Describe(mk()) {
		reads[v.Name] = v
	}
	for k := range env {
		if _, ok := reads[k]; !ok {
			problems = append(problems, fmt.Sprintf("%s: sets %s, which %s does not read", where, k, binary))
		}
	}
	for name, v := range reads {
		if _, set := env[name]; set {
			continue
		}
		if v.Default == "" {
			_, fine := unsetOnPurpose[role][name]
			if _, everywhere := unsetOnPurpose["*"][name]; !fine && !everywhere {
				problems = append(problems, fmt.Sprintf("%s: leaves %s unset, which %s reads and has no default", where, name, binary))
			}
		}
	}
	for _, name := range localDefaults {
		if _, read := reads[name]; read {
			if _, set := env[name]; !set {
				problems = append(problems, fmt.Sprintf("%s: leaves %s at the local stack's default %q", where, name, reads[name].Default))
			}
		}
	}
	for _, v := range config.Describe(&config.PubSub{}) {
		if got, set := env[v.Name]; set && v.Name != "FERRY_PROJECT" && got != v.Default {
			problems = append(problems, fmt.Sprintf("%s: %s=%s, but the code's topology names it %s", where, v.Name, got, v.Default))
		}
	}
	if p, _ := str(ev.Var("project")); env["FERRY_PROJECT"] != "" && env["FERRY_PROJECT"] != p {
		problems = append(problems, fmt.Sprintf("%s: FERRY_PROJECT=%s, not the project %s", where, env["FERRY_PROJECT"], p))
	}
	cfg := mk().(interface{ Validate() error })
	if err := config.Load(context.Background(), cfg, envconfig.MapLookuper(env)); err != nil {
		problems = append(problems, fmt.Sprintf("%s: %s refuses this environment: %v", where, binary, err))
	}
	return problems
}

// checkWorkers: the worker's settings agree with its subscription, its
// health check and the time a VM gets to shut down.
func checkWorkers(ev *Eval) []string {
	svcs, problems := services(ev)
	ps := defaultPubSub()
	subs := byName(ev, "google_pubsub_subscription")
	for _, s := range svcs {
		port := ""
		if _, p, err := net.SplitHostPort(s.env["FERRY_HTTP_ADDR"]); err == nil {
			port = p
		}
		mig := migOf(ev, s.tmpl)
		if mig == nil {
			problems = append(problems, s.tmpl.Addr()+": no instance group manager uses it")
			continue
		}
		ah := block(mig.Res.Body, "auto_healing_policies")
		if ah == nil {
			problems = append(problems, mig.Addr()+": no autohealing")
		} else if hc, _, ok := ev.Resolve(get(mig, ah, "health_check")); !ok {
			problems = append(problems, mig.Addr()+": autohealing names no health check of this configuration")
		} else if hb := block(hc.Res.Body, "http_health_check"); hb == nil {
			problems = append(problems, hc.Addr()+": not an HTTP health check")
		} else {
			if p, _ := str(get(hc, hb, "request_path")); p != "/healthz" {
				problems = append(problems, fmt.Sprintf("%s: request_path %q, want /healthz", hc.Addr(), p))
			}
			if p, _ := str(get(hc, hb, "port")); p != port {
				problems = append(problems, fmt.Sprintf("%s: port %s, but %s serves /healthz on FERRY_HTTP_ADDR=%s", hc.Addr(), p, s.name, s.env["FERRY_HTTP_ADDR"]))
			}
		}
		sh := block(s.tmpl.Res.Body, "shielded_instance_config")
		for _, a := range []string{"enable_secure_boot", "enable_vtpm", "enable_integrity_monitoring"} {
			if sh == nil || !get(s.tmpl, sh, a).RawEquals(cty.True) {
				problems = append(problems, fmt.Sprintf("%s: shielded_instance_config.%s is not true", s.tmpl.Addr(), a))
			}
		}
		for _, ni := range Blocks(s.tmpl.Res.Body, "network_interface") {
			if len(Blocks(ni, "access_config")) > 0 || len(Blocks(ni, "ipv6_access_config")) > 0 {
				problems = append(problems, s.tmpl.Addr()+": network_interface has an access_config: an external IP")
			}
		}
		if dyn := Blocks(s.tmpl.Res.Body, "dynamic"); len(dyn) > 0 {
			problems = append(problems, s.tmpl.Addr()+": dynamic blocks hide what the template holds")
		}
		sc, ok := scaled(ps)[s.binary]
		if !ok {
			continue
		}
		spot := ev.Var("spot").RawEquals(cty.True)
		sched := block(s.tmpl.Res.Body, "scheduling")
		model, _ := str(get(s.tmpl, sched, "provisioning_model"))
		if spot != (model == "SPOT") {
			problems = append(problems, fmt.Sprintf("%s: provisioning_model %q with spot = %v", s.tmpl.Addr(), model, spot))
		}
		// Compute Engine gives a preempted Spot VM 30 s, and an
		// on-demand VM 90 s, from the shutdown signal to power-off.
		limit := 90 * time.Second
		if spot {
			limit = 30 * time.Second
		}
		grace, err := time.ParseDuration(s.env["FERRY_SHUTDOWN_GRACE"])
		stop, _ := strconv.Atoi(s.metadata["ferry-stop-timeout"])
		stopT := time.Duration(stop) * time.Second
		if err != nil || grace <= 0 || stopT <= grace || stopT >= limit {
			problems = append(problems, fmt.Sprintf("%s: FERRY_SHUTDOWN_GRACE=%s and ferry-stop-timeout=%ss: want 0 < grace < stop timeout < %s", s.tmpl.Addr(), s.env["FERRY_SHUTDOWN_GRACE"], s.metadata["ferry-stop-timeout"], limit))
		}
		sub := subs[sc.subscription]
		if sub != nil {
			var attempts string
			if dlp := block(sub.Res.Body, "dead_letter_policy"); dlp != nil {
				attempts, _ = str(get(sub, dlp, "max_delivery_attempts"))
			}
			if attempts != s.env["FERRY_MAX_DELIVERY_ATTEMPTS"] {
				problems = append(problems, fmt.Sprintf("%s: FERRY_MAX_DELIVERY_ATTEMPTS=%s, but %s dead-letters after %s", s.tmpl.Addr(), s.env["FERRY_MAX_DELIVERY_ATTEMPTS"], sc.subscription, attempts))
			}
		}
		problems = append(problems, checkAutoscaler(ev, mig, sc)...)
	}
	return problems
}

func migOf(ev *Eval, tmpl *Instance) *Instance {
	for _, mig := range instances(ev, "google_compute_region_instance_group_manager") {
		for _, v := range Blocks(mig.Res.Body, "version") {
			if in, _, ok := ev.Resolve(get(mig, v, "instance_template")); ok && in == tmpl {
				return mig
			}
		}
	}
	return nil
}

// scaling is how an autoscaled group scales: on the backlog of its
// subscription, between two variables.
type scaling struct{ subscription, min, max string }

// scaled are the binaries that run in autoscaled groups, on Spot VMs when
// spot = true, and stop within a VM's shutdown notice.
func scaled(ps config.PubSub) map[string]scaling {
	return map[string]scaling{
		"worker":            {ps.ChunksSubscription, "min_workers", "max_workers"},
		"ferry-linux-amd64": {ps.ShardsSubscription, "min_agents", "max_agents"},
	}
}

func checkAutoscaler(ev *Eval, mig *Instance, sc scaling) []string {
	for _, as := range instances(ev, "google_compute_region_autoscaler") {
		if in, _, ok := ev.Resolve(get(as, as.Res.Body, "target")); !ok || in != mig {
			continue
		}
		var problems []string
		pol := block(as.Res.Body, "autoscaling_policy")
		if pol == nil {
			return []string{as.Addr() + ": no autoscaling_policy"}
		}
		for attr, v := range map[string]string{"min_replicas": sc.min, "max_replicas": sc.max} {
			got, _ := num(get(as, pol, attr))
			want, _ := num(ev.Var(v))
			if got != want {
				problems = append(problems, fmt.Sprintf("%s: %s = %d, want var.%s (%d)", as.Addr(), attr, got, v, want))
			}
		}
		met := block(pol, "metric")
		name, _ := str(get(as, met, "name"))
		filter, _ := str(get(as, met, "filter"))
		per, _ := num(get(as, met, "single_instance_assignment"))
		if name != "pubsub.googleapis.com/subscription/num_undelivered_messages" ||
			!strings.Contains(filter, `resource.labels.subscription_id = "`+sc.subscription+`"`) || per <= 0 {
			problems = append(problems, fmt.Sprintf("%s: scales on %s where %s (%d per instance), want num_undelivered_messages of %s", as.Addr(), name, filter, per, sc.subscription))
		}
		return problems
	}
	return []string{mig.Addr() + ": no autoscaler targets the group"}
}

func checkPubSub(ev *Eval) []string {
	var problems []string
	ps := defaultPubSub()
	topics, subs := localstack.Topology(ps)
	tfTopics := byName(ev, "google_pubsub_topic")
	tfSubs := byName(ev, "google_pubsub_subscription")
	for _, t := range topics {
		if tfTopics[t] == nil {
			problems = append(problems, "no topic "+t+" (the code's topology has it)")
		}
	}
	var workerAttempts string
	if svcs, _ := services(ev); len(svcs) > 0 {
		for _, s := range svcs {
			if s.binary == "worker" {
				workerAttempts = s.env["FERRY_MAX_DELIVERY_ATTEMPTS"]
			}
		}
	}
	deadLetter := map[string]bool{}
	for _, s := range subs {
		if s.DeadLetterTopic != "" {
			deadLetter[s.DeadLetterTopic] = true
		}
		in := tfSubs[s.ID]
		if in == nil {
			problems = append(problems, "no subscription "+s.ID+" (the code's topology has it)")
			continue
		}
		if got := nameOf(ev, get(in, in.Res.Body, "topic")); got != s.Topic {
			problems = append(problems, fmt.Sprintf("%s: subscribes to %q, the code to %q", s.ID, got, s.Topic))
		}
		if got, _ := num(get(in, in.Res.Body, "ack_deadline_seconds")); time.Duration(got)*time.Second != s.AckDeadline {
			problems = append(problems, fmt.Sprintf("%s: ack deadline %ds, the code's %s", s.ID, got, s.AckDeadline))
		}
		if s.DeadLetterTopic == "" {
			continue
		}
		dlp := block(in.Res.Body, "dead_letter_policy")
		if dlp == nil {
			continue // reported below for every subscription
		}
		if got := nameOf(ev, get(in, dlp, "dead_letter_topic")); got != s.DeadLetterTopic {
			problems = append(problems, fmt.Sprintf("%s: dead-letters to %q, the code to %q", s.ID, got, s.DeadLetterTopic))
		}
		want := strconv.Itoa(s.MaxAttempts)
		if s.ID == ps.ChunksSubscription {
			want = workerAttempts // what the worker reads (FERRY_MAX_DELIVERY_ATTEMPTS)
		}
		if got, _ := str(get(in, dlp, "max_delivery_attempts")); got != want {
			problems = append(problems, fmt.Sprintf("%s: max_delivery_attempts %s, want %s", s.ID, got, want))
		}
	}
	if d := varDefault(ev, "max_delivery_attempts"); d != describeDefault(&config.Worker{}, "FERRY_MAX_DELIVERY_ATTEMPTS") {
		problems = append(problems, fmt.Sprintf("var.max_delivery_attempts defaults to %s, FERRY_MAX_DELIVERY_ATTEMPTS to %s", d, describeDefault(&config.Worker{}, "FERRY_MAX_DELIVERY_ATTEMPTS")))
	}
	// Dead-letter topics of the configuration's own subscriptions.
	for name, in := range tfSubs {
		if dlp := block(in.Res.Body, "dead_letter_policy"); dlp != nil {
			deadLetter[nameOf(ev, get(in, dlp, "dead_letter_topic"))] = true
		}
		_ = name
	}
	agentPub, agentSub := map[string]bool{}, map[string]bool{}
	for _, b := range bindings(ev) {
		if b.principal != "pubsub-agent" {
			continue
		}
		switch b.role {
		case "roles/pubsub.publisher":
			agentPub[strings.TrimPrefix(b.target, "topic:")] = true
		case "roles/pubsub.subscriber":
			agentSub[strings.TrimPrefix(b.target, "subscription:")] = true
		}
	}
	for name, in := range tfSubs {
		topic := nameOf(ev, get(in, in.Res.Body, "topic"))
		if tfTopics[topic] == nil {
			problems = append(problems, fmt.Sprintf("%s: topic %q is not one of this configuration's", name, topic))
		}
		exp := block(in.Res.Body, "expiration_policy")
		if ttl, ok := str(get(in, exp, "ttl")); exp == nil || !ok || ttl != "" {
			problems = append(problems, name+": no expiration_policy with ttl = \"\": an idle subscription is deleted after 31 days")
		}
		if deadLetter[topic] {
			continue // a dead-letter topic's own subscription keeps what arrives
		}
		dlp := block(in.Res.Body, "dead_letter_policy")
		if dlp == nil {
			problems = append(problems, name+": no dead-letter policy")
			continue
		}
		rp := block(in.Res.Body, "retry_policy")
		minB, _ := str(get(in, rp, "minimum_backoff"))
		maxB, _ := str(get(in, rp, "maximum_backoff"))
		lo, err1 := time.ParseDuration(minB)
		hi, err2 := time.ParseDuration(maxB)
		if rp == nil || err1 != nil || err2 != nil || lo <= 0 || hi <= lo {
			problems = append(problems, name+": no exponential retry_policy (minimum_backoff < maximum_backoff)")
		}
		if !agentSub[name] {
			problems = append(problems, name+": Pub/Sub's service agent is not a subscriber, so it cannot dead-letter")
		}
		dl := nameOf(ev, get(in, dlp, "dead_letter_topic"))
		if !agentPub[dl] {
			problems = append(problems, dl+": Pub/Sub's service agent may not publish to this dead-letter topic")
		}
	}
	for name := range tfTopics {
		if !slicesContains(topics, name) && !deadLetter[name] {
			problems = append(problems, "topic "+name+" is neither in the code's topology nor a dead-letter topic")
		}
	}
	for name := range deadLetter {
		if tfSubs[localstack.DeadLetterSubscription(name)] == nil {
			problems = append(problems, fmt.Sprintf("dead-letter topic %s has no subscription %s: what lands there is lost", name, localstack.DeadLetterSubscription(name)))
		}
	}
	return problems
}

func slicesContains(s []string, x string) bool {
	for _, e := range s {
		if e == x {
			return true
		}
	}
	return false
}

func varDefault(ev *Eval, name string) string {
	b := ev.m.Variables[name]
	if b == nil {
		return ""
	}
	v, diags := b.Body.Attributes["default"].Expr.Value(nil)
	if diags.HasErrors() {
		return ""
	}
	s, _ := str(v)
	return s
}

func describeDefault(cfg any, name string) string {
	for _, v := range config.Describe(cfg) {
		if v.Name == name {
			return v.Default
		}
	}
	return ""
}

// binding is one IAM grant, normalised: principal ("sa:worker",
// "pubsub-agent", …), role (a custom role as its permissions) and target
// ("topic:ferry-events", "bucket:NAME if .ferry/ .ferry-done/", …).
type binding struct {
	addr, principal, role, target string
}

func (b binding) String() string { return b.role + " on " + b.target }

var iamTarget = map[string]struct{ attr, kind string }{
	"google_pubsub_topic_iam_member":        {"topic", "topic"},
	"google_pubsub_subscription_iam_member": {"subscription", "subscription"},
	"google_storage_bucket_iam_member":      {"bucket", "bucket"},
	"google_bigquery_dataset_iam_member":    {"dataset_id", "dataset"},
	"google_project_iam_member":             {"project", "project"},
	"google_kms_crypto_key_iam_member":      {"crypto_key_id", "kms"},
	"google_service_account_iam_member":     {"service_account_id", "service-account"},
}

var prefixCond = regexp.MustCompile(`resource\.name\.startsWith\("projects/_/buckets/([^/]+)/objects/([^"]*)"\)`)

func bindings(ev *Eval) []binding {
	var out []binding
	for _, r := range ev.m.Resources {
		t, ok := iamTarget[r.Type]
		if !ok {
			continue
		}
		for _, in := range ev.Instances(r) {
			b := binding{addr: in.Addr()}
			role := get(in, r.Body, "role")
			if cr, _, ok := ev.Resolve(role); ok && cr.Res.Type == "google_project_iam_custom_role" {
				var perms []string
				if p := get(cr, cr.Res.Body, "permissions"); p != cty.NilVal && p.IsWhollyKnown() {
					for _, e := range p.AsValueSlice() {
						perms = append(perms, e.AsString())
					}
				}
				sort.Strings(perms)
				b.role = "custom[" + strings.Join(perms, ",") + "]"
			} else {
				b.role, _ = str(role)
			}
			b.principal = principal(ev, get(in, r.Body, "member"))
			tv := get(in, r.Body, t.attr)
			switch target, _, ok := ev.Resolve(tv); {
			case ok && t.kind == "service-account":
				b.target = "service-account:" + target.Res.Name
			case ok && t.kind == "kms":
				b.target = "kms:" + target.Res.Name
			default:
				b.target = t.kind + ":" + nameOf(ev, tv)
			}
			if c := block(r.Body, "condition"); c != nil {
				expr, _ := str(get(in, c, "expression"))
				var prefixes []string
				for _, m := range prefixCond.FindAllStringSubmatch(expr, -1) {
					prefixes = append(prefixes, m[2])
				}
				b.target += " if " + strings.Join(prefixes, " ")
			}
			out = append(out, b)
		}
	}
	return out
}

func principal(ev *Eval, v cty.Value) string {
	s, ok := str(v)
	if !ok {
		return "unknown"
	}
	if in, attr, ok := ev.Resolve(cty.StringVal(strings.TrimPrefix(s, "serviceAccount:"))); ok && in.Res.Type == "google_service_account" && (attr == "member" || attr == "email") {
		return "sa:" + in.Res.Name
	}
	switch {
	case strings.HasSuffix(s, "@gcp-sa-pubsub.iam.gserviceaccount.com"):
		return "pubsub-agent"
	case strings.HasSuffix(s, "@compute-system.iam.gserviceaccount.com"):
		return "compute-agent"
	case strings.HasSuffix(s, "@cloud-filer.iam.gserviceaccount.com"):
		return "filestore-agent"
	case s == "serviceAccount:ref:data.google_storage_project_service_account.gcs.email_address":
		return "gcs-agent"
	case s == "serviceAccount:ref:data.google_bigquery_default_service_account.bq.email":
		return "bigquery-agent"
	}
	if imp := ev.Var("submitter_impersonators"); imp.IsWhollyKnown() {
		for it := imp.ElementIterator(); it.Next(); {
			if _, e := it.Element(); e.AsString() == s {
				return "impersonator"
			}
		}
	}
	return s
}

// wantBindings is what each principal needs, from what each binary does:
// which subscription it receives from (and whose dead-letter topic it
// copies permanent failures to), which topics it publishes to, what it
// stores.
func wantBindings(ev *Eval) map[string][]string {
	ps := defaultPubSub()
	bucket, _ := str(ev.Var("bucket"))
	release, _ := str(ev.Local("release_bucket"))
	project, _ := str(ev.Var("project"))
	sub := func(s string) string { return "roles/pubsub.subscriber on subscription:" + s }
	pub := func(t string) string { return "roles/pubsub.publisher on topic:" + t }
	objects := "roles/storage.objectUser on bucket:" + bucket
	releases := "roles/storage.objectViewer on bucket:" + release
	bucketGet := "custom[storage.buckets.get] on bucket:" + bucket
	vm := []string{"roles/logging.logWriter on project:" + project, "roles/monitoring.metricWriter on project:" + project}
	dataset, _ := str(ev.Var("bq_dataset"))
	want := map[string][]string{
		"sa:worker": append([]string{sub(ps.ChunksSubscription), pub(ps.EventsTopic), pub(ps.ChunksDeadLetter), objects, releases}, vm...),
		"sa:merger": append([]string{sub(ps.EventsSubscription), sub(ps.ControlSubscription), pub(ps.DoneTopic), pub(ps.EventsDeadLetter),
			pub(ps.ControlDeadLetter), objects, releases,
			"roles/bigquery.dataEditor on dataset:" + dataset, "roles/bigquery.jobUser on project:" + project}, vm...),
		// Producers and submitters say what they say on the control topic:
		// only workers may publish the workers' events (chunk reports).
		"sa:producer": append([]string{sub(ps.RequestsSubscription), pub(ps.ChunksTopic), pub(ps.ControlTopic), pub(ps.DoneTopic),
			pub(ps.RequestsDeadLetter), objects, bucketGet, releases}, vm...),
		// No subscription rights (it waits on its done marker), and list
		// on the bucket for -n and --skip-unchanged.
		"sa:submitter": {pub(ps.ChunksTopic), pub(ps.ControlTopic), bucketGet, "custom[storage.objects.list] on bucket:" + bucket,
			"roles/storage.objectUser on bucket:" + bucket + " if " + message.StagingRoot,
			// Done markers: read, never written (a forged one is
			// believed by the workers and the merger).
			"roles/storage.objectViewer on bucket:" + bucket + " if " + donePrefix,
			// Key objects: create, never replace (see message.Keys).
			"roles/storage.objectCreator on bucket:" + bucket + " if " + message.KeyRoot},
	}
	if ev.Var("pool").RawEquals(cty.True) {
		// An agent claims shards, reports chunks as a worker does, fails a
		// transfer no agent can read (control), dead-letters a shard that
		// failed for good; whoever walks a pooled transfer publishes its
		// shards.
		want["sa:agent"] = append([]string{sub(ps.ShardsSubscription), pub(ps.EventsTopic), pub(ps.ControlTopic), pub(ps.ShardsTopic), pub(ps.ShardsDeadLetter),
			objects, releases}, vm...)
		want["sa:producer"] = append(want["sa:producer"], pub(ps.ShardsTopic))
		want["sa:submitter"] = append(want["sa:submitter"], pub(ps.ShardsTopic))
	}
	if ev.Var("kms").RawEquals(cty.True) {
		// Every service that stores ferry's data encrypts it with the key
		// (an organization requiring CMEK refuses the rest).
		key := []string{"roles/cloudkms.cryptoKeyEncrypterDecrypter on kms:objects"}
		for _, agent := range []string{"gcs-agent", "pubsub-agent", "bigquery-agent", "compute-agent"} {
			want[agent] = append(want[agent], key...)
		}
		if ev.Var("filestore").RawEquals(cty.True) {
			want["filestore-agent"] = key
		}
	}
	if imp := ev.Var("submitter_impersonators"); imp.LengthInt() > 0 {
		want["impersonator"] = []string{"roles/iam.serviceAccountTokenCreator on service-account:submitter"}
	}
	return want
}

var primitive = regexp.MustCompile(`^roles/(owner|editor|viewer)$`)

func checkIAM(ev *Eval) []string {
	var problems []string
	for _, r := range ev.m.Resources {
		switch {
		case strings.HasSuffix(r.Type, "_iam_binding") || strings.HasSuffix(r.Type, "_iam_policy"):
			problems = append(problems, r.Addr()+": an authoritative IAM resource replaces grants it does not know; use _iam_member")
		case r.Type == "google_service_account_key":
			problems = append(problems, r.Addr()+": a service account key; VMs use their attached account, submitters impersonate")
		case strings.HasSuffix(r.Type, "_iam_member") && iamTarget[r.Type].attr == "":
			problems = append(problems, r.Addr()+": IAM on a resource type the check does not know; teach bindings() its target")
		}
	}
	got := map[string][]string{}
	for _, b := range bindings(ev) {
		if primitive.MatchString(b.role) {
			problems = append(problems, fmt.Sprintf("%s grants the basic role %s", b.addr, b.role))
		}
		if b.principal == "pubsub-agent" && !strings.HasPrefix(b.target, "kms:") {
			continue // checked with the subscriptions
		}
		got[b.principal] = append(got[b.principal], b.String())
	}
	want := wantBindings(ev)
	for p := range got {
		if _, ok := want[p]; !ok {
			problems = append(problems, fmt.Sprintf("%s is granted %v, and should be granted nothing", p, got[p]))
		}
	}
	for p, w := range want {
		g := map[string]int{}
		for _, s := range got[p] {
			g[s]++
		}
		for _, s := range w {
			if g[s] == 0 {
				problems = append(problems, fmt.Sprintf("%s lacks %s", p, s))
			}
			delete(g, s)
		}
		for s := range g {
			problems = append(problems, fmt.Sprintf("%s has %s, which it does not need", p, s))
		}
	}
	// Each VM runs as its own service account.
	svcs, _ := services(ev)
	for _, s := range svcs {
		sa := block(s.tmpl.Res.Body, "service_account")
		in, _, ok := ev.Resolve(get(s.tmpl, sa, "email"))
		if !ok || in.Res.Type != "google_service_account" || in.Res.Name != s.name {
			problems = append(problems, fmt.Sprintf("%s: runs as %v, want google_service_account.%s", s.tmpl.Addr(), get(s.tmpl, sa, "email").GoString(), s.name))
		}
	}
	return problems
}

// labeled are the resource types of the google provider that take labels;
// unlabeled those that take none. A type in neither list fails the check,
// so a new kind of resource gets a decision.
var (
	labeled = []string{"google_storage_bucket", "google_pubsub_topic", "google_pubsub_subscription", "google_bigquery_dataset",
		"google_bigquery_table", "google_compute_instance_template", "google_kms_crypto_key", "google_filestore_instance"}
	unlabeled = []string{"google_project_service", "google_logging_metric", "time_sleep", "google_service_account", "google_project_iam_custom_role", "google_kms_key_ring",
		"google_compute_network", "google_compute_subnetwork", "google_compute_router", "google_compute_router_nat",
		"google_compute_firewall", "google_compute_health_check", "google_compute_region_instance_group_manager",
		"google_compute_region_autoscaler", "google_monitoring_dashboard", "google_monitoring_alert_policy"}
)

func checkLabels(ev *Eval) []string {
	var problems []string
	common := ev.Local("labels")
	if common == cty.NilVal || !common.IsWhollyKnown() || common.LengthInt() == 0 {
		return []string{"local.labels: no common labels"}
	}
	for _, r := range ev.m.Resources {
		if r.Mode != "resource" || strings.HasSuffix(r.Type, "_iam_member") {
			continue
		}
		switch {
		case slicesContains(unlabeled, r.Type):
			continue
		case !slicesContains(labeled, r.Type):
			problems = append(problems, r.Addr()+": type "+r.Type+" is neither in labeled nor in unlabeled (internal/tfcheck)")
			continue
		}
		for _, in := range ev.Instances(r) {
			l := get(in, r.Body, "labels")
			if l == cty.NilVal || !l.IsWhollyKnown() || l.IsNull() {
				problems = append(problems, in.Addr()+": no labels")
				continue
			}
			for it := common.ElementIterator(); it.Next(); {
				k, v := it.Element()
				if !l.Type().IsObjectType() && !l.Type().IsMapType() {
					problems = append(problems, in.Addr()+": labels is not a map")
					break
				}
				if got, ok := label(l, k.AsString()); !ok || !got.RawEquals(v) {
					problems = append(problems, fmt.Sprintf("%s: lacks the common label %s", in.Addr(), k.AsString()))
				}
			}
		}
	}
	return problems
}

func label(v cty.Value, k string) (cty.Value, bool) {
	if v.Type().IsObjectType() {
		if !v.Type().HasAttribute(k) {
			return cty.NilVal, false
		}
		return v.GetAttr(k), true
	}
	if !v.HasIndex(cty.StringVal(k)).True() {
		return cty.NilVal, false
	}
	return v.Index(cty.StringVal(k)), true
}

func checkBucket(ev *Eval) []string {
	var problems []string
	bucket, _ := str(ev.Var("bucket"))
	var data *Instance
	for _, in := range instances(ev, "google_storage_bucket") {
		if n, _ := str(get(in, in.Res.Body, "name")); n == bucket {
			data = in
		}
	}
	if data == nil {
		return []string{"no bucket named var.bucket"}
	}
	if !get(data, data.Res.Body, "uniform_bucket_level_access").RawEquals(cty.True) {
		problems = append(problems, data.Addr()+": uniform_bucket_level_access is not true")
	}
	if p, _ := str(get(data, data.Res.Body, "public_access_prevention")); p != "enforced" {
		problems = append(problems, data.Addr()+": public_access_prevention is not enforced")
	}
	ages := map[string]int64{}
	for _, rule := range Blocks(data.Res.Body, "lifecycle_rule") {
		cond := block(rule, "condition")
		prefixes := get(data, cond, "matches_prefix")
		age, _ := num(get(data, cond, "age"))
		if prefixes == cty.NilVal || !prefixes.IsWhollyKnown() || prefixes.LengthInt() == 0 {
			problems = append(problems, data.Addr()+": a lifecycle rule without matches_prefix would delete final objects")
			continue
		}
		for _, p := range prefixes.AsValueSlice() {
			ages[p.AsString()] = age
		}
	}
	for p := range ages {
		if p != message.StagingRoot && p != donePrefix && p != message.KeyRoot {
			problems = append(problems, fmt.Sprintf("%s: a lifecycle rule on %q, which is neither staging (%s), key objects (%s) nor done markers (%s)",
				data.Addr(), p, message.StagingRoot, message.KeyRoot, donePrefix))
		}
	}
	if ages[message.KeyRoot] < 1 {
		problems = append(problems, data.Addr()+": no lifecycle rule on "+message.KeyRoot+" (message.KeyRoot): key objects would stay for ever")
	}
	if ages[message.StagingRoot] < 1 {
		problems = append(problems, data.Addr()+": no lifecycle rule on "+message.StagingRoot+" (message.StagingRoot), the backstop against orphans")
	}
	var retention string
	if svcs, _ := services(ev); len(svcs) > 0 {
		for _, s := range svcs {
			if s.binary == "merger" {
				retention = s.env["FERRY_DONE_RETENTION"]
			}
		}
	}
	if d, err := time.ParseDuration(retention); err != nil || time.Duration(ages[donePrefix])*24*time.Hour != d {
		problems = append(problems, fmt.Sprintf("%s: done markers (%s) expire after %d days, the merger's FERRY_DONE_RETENTION is %q", data.Addr(), donePrefix, ages[donePrefix], retention))
	}
	// The code must write done markers where the lifecycle keeps them.
	if dir := path.Dir(message.DoneMarker("t")) + "/"; dir != donePrefix {
		problems = append(problems, fmt.Sprintf("the code writes done markers under %s, the lifecycle keeps %s", dir, donePrefix))
	}
	return problems
}

func checkBigQuery(ev *Eval) []string {
	var problems []string
	tables := map[string]*Instance{}
	for _, in := range instances(ev, "google_bigquery_table") {
		id, _ := str(get(in, in.Res.Body, "table_id"))
		tables[id] = in
	}
	var datasetEnv string
	if svcs, _ := services(ev); len(svcs) > 0 {
		for _, s := range svcs {
			if s.binary == "merger" {
				datasetEnv = s.env["FERRY_BQ_DATASET"]
			}
		}
	}
	for name, schema := range map[string][]benchrow.Field{loader.TransfersTable: benchrow.TransfersSchema(), loader.ChunksTable: benchrow.ChunksSchema()} {
		in := tables[name]
		if in == nil {
			problems = append(problems, "no BigQuery table "+name+" (loader."+name+")")
			continue
		}
		if ds := nameOfDataset(ev, get(in, in.Res.Body, "dataset_id")); ds != datasetEnv {
			problems = append(problems, fmt.Sprintf("%s: in dataset %q, the merger loads into FERRY_BQ_DATASET=%q", in.Addr(), ds, datasetEnv))
		}
		s, _ := str(get(in, in.Res.Body, "schema"))
		var got []benchrow.Field
		if err := json.Unmarshal([]byte(s), &got); err != nil || !reflect.DeepEqual(got, schema) {
			problems = append(problems, fmt.Sprintf("%s: schema is not result's (schema/%s.json): %v", in.Addr(), name, err))
		}
		types := map[string]string{}
		for _, f := range schema {
			types[f.Name] = f.Type
		}
		tp := block(in.Res.Body, "time_partitioning")
		pt, _ := str(get(in, tp, "type"))
		pf, _ := str(get(in, tp, "field"))
		if tp == nil || pt != "DAY" || (types[pf] != "TIMESTAMP" && types[pf] != "DATE") {
			problems = append(problems, fmt.Sprintf("%s: not partitioned by day on a timestamp column (type %q, field %q)", in.Addr(), pt, pf))
		}
		cl := get(in, in.Res.Body, "clustering")
		if cl == cty.NilVal || !cl.IsWhollyKnown() || cl.LengthInt() == 0 {
			problems = append(problems, in.Addr()+": not clustered")
			continue
		}
		for i, c := range cl.AsValueSlice() {
			if _, ok := types[c.AsString()]; !ok {
				problems = append(problems, fmt.Sprintf("%s: clustered by %s, which is no column", in.Addr(), c.AsString()))
			}
			if name == loader.TransfersTable && i == 0 && c.AsString() != "method" {
				problems = append(problems, in.Addr()+": not clustered by method first")
			}
		}
	}
	return problems
}

func nameOfDataset(ev *Eval, v cty.Value) string {
	if in, _, ok := ev.Resolve(v); ok {
		s, _ := str(get(in, in.Res.Body, "dataset_id"))
		return s
	}
	s, _ := str(v)
	return s
}

// firewallRanges are the only sources a firewall rule may let in: Google's
// health-check probers and Identity-Aware Proxy's TCP forwarding.
var firewallRanges = map[string]bool{"35.191.0.0/16": true, "130.211.0.0/22": true, "35.235.240.0/20": true}

// bootstrap is what a fresh project must answer before Terraform can enable
// anything: the project itself (Cloud Resource Manager).
var bootstrap = map[string]bool{"data.google_project.project": true, "google_project_service.services": true}

// guardedVars are the variables a value outside the cloud's rules or one
// that loses data must be refused for, by a validation block.
var guardedVars = []string{"soft_delete_days", "staging_retention_days", "transfer_timeout", "done_retention_days", "max_delivery_attempts", "transport"}

// checkDeploy holds what `terraform validate` cannot see and a first deploy
// needs: firewall sources, Private Google Access, APIs before what needs
// them, Spot VMs that GCE accepts, and validation of the risky variables.
func checkDeploy(ev *Eval) []string {
	var problems []string
	for _, in := range instances(ev, "google_compute_firewall") {
		v := get(in, in.Res.Body, "source_ranges")
		if !v.IsKnown() || v.IsNull() || v.LengthInt() == 0 {
			problems = append(problems, in.Addr()+": no source_ranges")
			continue
		}
		for it := v.ElementIterator(); it.Next(); {
			_, r := it.Element()
			if s, _ := str(r); !firewallRanges[s] {
				problems = append(problems, fmt.Sprintf("%s: source range %s is neither Google's health checkers nor IAP", in.Addr(), s))
			}
		}
	}
	for _, in := range instances(ev, "google_compute_subnetwork") {
		if !get(in, in.Res.Body, "private_ip_google_access").RawEquals(cty.True) {
			problems = append(problems, in.Addr()+": private_ip_google_access is not true: VMs without external IPs cannot reach Google's APIs")
		}
	}
	// Every google resource, and every data source but the project, waits
	// for the APIs, by its depends_on or through what it refers to.
	for _, r := range ev.m.Resources {
		if strings.HasPrefix(r.Type, "google_") && !bootstrap[r.Addr()] && !ev.m.Reaches(r, "google_project_service.services") {
			problems = append(problems, r.Addr()+": does not depend on google_project_service.services: it races the enabling of its API on a fresh project")
		}
	}
	svcs, _ := services(ev)
	for _, s := range svcs {
		sch := block(s.tmpl.Res.Body, "scheduling")
		model, _ := str(get(s.tmpl, sch, "provisioning_model"))
		maint, _ := str(get(s.tmpl, sch, "on_host_maintenance"))
		restart := get(s.tmpl, sch, "automatic_restart")
		if model == "SPOT" && (maint != "TERMINATE" || !restart.RawEquals(cty.False)) {
			problems = append(problems, fmt.Sprintf("%s: a Spot VM with on_host_maintenance %q and automatic_restart %v; GCE wants TERMINATE and false", s.tmpl.Addr(), maint, restart.GoString()))
		}
	}
	for _, name := range guardedVars {
		v, ok := ev.m.Variables[name]
		if !ok {
			problems = append(problems, "var."+name+": gone; guardedVars lists it")
			continue
		}
		if len(Blocks(v.Body, "validation")) == 0 {
			problems = append(problems, "var."+name+": no validation block")
		}
	}
	return problems
}

// waitsFor reports whether r reaches a time_sleep that depends on grant:
// whether r is created only after grant had time to propagate.
func waitsFor(ev *Eval, r *Resource, grant string) bool {
	for _, s := range ev.m.ResourcesOf("time_sleep") {
		if ev.m.Needs(s)[grant] && ev.m.Reaches(r, s.Addr()) {
			return true
		}
	}
	return false
}

// checkGrants: IAM applies a grant minutes after it is made. Whatever runs
// as or relies on a principal waits for its grants: the instance groups for
// every grant to the VMs' accounts and to Pub/Sub's dead-lettering agent,
// and everything the CMEK key encrypts for the key's grants.
func checkGrants(ev *Eval) []string {
	var problems []string
	migs := ev.m.ResourcesOf("google_compute_region_instance_group_manager")
	for _, r := range ev.m.Resources {
		if r.Mode != "resource" || !strings.HasSuffix(r.Type, "_iam_member") {
			continue
		}
		for _, in := range ev.Instances(r) {
			who := principal(ev, get(in, r.Body, "member"))
			switch {
			case who == "sa:submitter" || who == "impersonator":
				continue // used by people, after apply
			case strings.HasSuffix(who, "-agent") && r.Type == "google_kms_crypto_key_iam_member":
				for _, typ := range cmekTypes {
					for _, u := range ev.m.ResourcesOf(typ) {
						if !waitsFor(ev, u, r.Addr()) {
							problems = append(problems, fmt.Sprintf("%s: created without waiting for %s (%s) to propagate: its first create answers 403", u.Addr(), r.Addr(), who))
						}
					}
				}
			}
			for _, mig := range migs {
				if !waitsFor(ev, mig, r.Addr()) {
					problems = append(problems, fmt.Sprintf("%s: starts VMs without waiting for %s (%s) to propagate", mig.Addr(), r.Addr(), who))
				}
			}
			break // every instance of r is the same resource to wait for
		}
	}
	return problems
}

// cmekTypes are the resource types here that store ferry's data and take a
// CMEK key; kmsKeyOf says where each keeps it. A project under
// constraints/gcp.restrictNonCmekServices refuses any of them without one.
var cmekTypes = []string{"google_storage_bucket", "google_pubsub_topic", "google_bigquery_dataset", "google_filestore_instance", "google_compute_instance_template"}

// mayTakeKey are the other resource types here that could hold data and
// were decided on: tables take their dataset's key; subscriptions hold their
// topic's messages under its key.
var mayTakeKey = []string{"google_bigquery_table", "google_pubsub_subscription"}

// kmsKeyOf returns the key a resource instance is encrypted with, or "".
func kmsKeyOf(in *Instance) string {
	b := in.Res.Body
	var v cty.Value
	switch in.Res.Type {
	case "google_storage_bucket":
		v = dynamicValue(in, b, "encryption")
	case "google_bigquery_dataset":
		v = dynamicValue(in, b, "default_encryption_configuration")
	case "google_compute_instance_template":
		v = dynamicValue(in, block(b, "disk"), "disk_encryption_key")
	default:
		v = get(in, b, "kms_key_name")
	}
	s, _ := str(v)
	return s
}

// dynamicValue returns the first element of the for_each of body's dynamic
// block typ, the value its content uses; cty.NilVal when there is none.
func dynamicValue(in *Instance, body *hclsyntax.Body, typ string) cty.Value {
	if body == nil {
		return cty.NilVal
	}
	for _, d := range body.Blocks {
		if d.Type != "dynamic" || len(d.Labels) != 1 || d.Labels[0] != typ {
			continue
		}
		fe := get(in, d.Body, "for_each")
		if fe == cty.NilVal || !fe.IsKnown() || fe.IsNull() || !fe.CanIterateElements() || fe.LengthInt() == 0 {
			return cty.NilVal
		}
		it := fe.ElementIterator()
		it.Next()
		_, v := it.Element()
		return v
	}
	return cty.NilVal
}

// checkCMEK: with kms, everything of ferry's that Google stores is
// encrypted with ferry's key; without, nothing names one.
func checkCMEK(ev *Eval) []string {
	var problems []string
	key, _ := str(ev.Local("kms_key"))
	kms := ev.Var("kms").RawEquals(cty.True)
	for _, r := range ev.m.Resources {
		if r.Mode != "resource" || !strings.HasPrefix(r.Type, "google_") {
			continue
		}
		if !slicesContains(cmekTypes, r.Type) {
			if (strings.Contains(r.Type, "bucket") || strings.Contains(r.Type, "topic") || strings.Contains(r.Type, "dataset") ||
				strings.Contains(r.Type, "table") || strings.Contains(r.Type, "disk") || strings.Contains(r.Type, "filestore") ||
				strings.Contains(r.Type, "subscription")) && !strings.HasSuffix(r.Type, "_iam_member") && !slicesContains(mayTakeKey, r.Type) {
				problems = append(problems, r.Addr()+": type "+r.Type+" may store data: add it to cmekTypes or mayTakeKey (internal/tfcheck)")
			}
			continue
		}
		for _, in := range ev.Instances(r) {
			got := kmsKeyOf(in)
			switch {
			case kms && got != key:
				problems = append(problems, fmt.Sprintf("%s: kms = true, but it is encrypted with %q, not ferry's key %s", in.Addr(), got, key))
			case !kms && got != "":
				problems = append(problems, fmt.Sprintf("%s: kms = false, but it names the key %q", in.Addr(), got))
			}
		}
	}
	return problems
}
