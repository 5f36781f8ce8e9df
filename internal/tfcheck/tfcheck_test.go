package tfcheck

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
)

// scenarios are terraform.tfvars files a deployment might have: the
// defaults, and every option turned the other way.
var scenarios = map[string]map[string]cty.Value{
	"defaults": {
		"project": cty.StringVal("ferry-prod"), "bucket": cty.StringVal("ferry-prod-data"), "release_version": cty.StringVal("v1.2.3"),
	},
	"spool, filestore, kms, on-demand": {
		"project": cty.StringVal("ferry-prod"), "bucket": cty.StringVal("ferry-prod-data"), "release_version": cty.StringVal("v1.2.3"),
		"transport": cty.StringVal("spool"), "filestore": cty.True, "kms": cty.True, "spot": cty.False,
		"max_delivery_attempts": cty.NumberIntVal(7), "release_location": cty.StringVal("gs://ferry-releases/builds"),
		"submitter_impersonators": cty.TupleVal([]cty.Value{cty.StringVal("user:alice@example.com")}),
		"done_retention_days":     cty.NumberIntVal(90), "min_workers": cty.NumberIntVal(0),
	},
	"pool": {
		"project": cty.StringVal("ferry-prod"), "bucket": cty.StringVal("ferry-prod-data"), "release_version": cty.StringVal("v1.2.3"),
		"pool": cty.True, "source_share": cty.StringVal("10.0.0.2:/exports/data"), "max_agents": cty.NumberIntVal(40),
		"source_roots": cty.TupleVal([]cty.Value{cty.StringVal("/srv/nfs-data")}),
	},
}

var checks = map[string]func(*Eval) []string{
	"env":      checkEnv,
	"workers":  checkWorkers,
	"pubsub":   checkPubSub,
	"iam":      checkIAM,
	"labels":   checkLabels,
	"bucket":   checkBucket,
	"bigquery": checkBigQuery,
	"deploy":   checkDeploy,
	"grants":   checkGrants,
	"cmek":     checkCMEK,
}

func evaluate(t *testing.T, dir string, vars map[string]cty.Value) *Eval {
	t.Helper()
	m, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := m.Evaluate(vars)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// TestTerraformAgreesWithTheCode is tf-check: every check, in every scenario.
func TestTerraformAgreesWithTheCode(t *testing.T) {
	for name, vars := range scenarios {
		t.Run(name, func(t *testing.T) {
			ev := evaluate(t, "../../terraform", vars)
			for _, e := range ev.Errors {
				t.Errorf("does not evaluate: %s", e)
			}
			names := make([]string, 0, len(checks))
			for n := range checks {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				for _, p := range checks[n](ev) {
					t.Errorf("%s: %s", n, p)
				}
			}
		})
	}
}

// copyConfig copies terraform/ and schema/ into a temporary tree (the
// tables read ../schema) and returns the copy of terraform/.
func copyConfig(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"terraform", "schema"} {
		src := filepath.Join("../..", d)
		entries, err := os.ReadDir(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.IsDir() {
				continue
			}
			b, err := os.ReadFile(filepath.Join(src, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, d, e.Name()), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return filepath.Join(root, "terraform")
}

// TestEachCheckCanFail breaks terraform/ one way at a time and requires the
// check responsible to say so: a check that cannot fail proves nothing.
func TestEachCheckCanFail(t *testing.T) {
	type edit struct{ file, old, new string }
	tests := []struct {
		name     string
		edits    []edit
		scenario string
		check    string
		want     string
	}{
		{"agents scaled on the chunks backlog", []edit{{"service_agent.tf", `subscription_id = \"${local.subscriptions.shards.name}\"`, `subscription_id = \"${local.subscriptions.chunks.name}\"`}}, "pool", "workers", "want num_undelivered_messages of ferry-shards-agents"},
		{"agents capped at the workers' maximum", []edit{{"service_agent.tf", `max_replicas    = var.max_agents`, `max_replicas    = var.max_workers`}}, "pool", "workers", "max_replicas = 20, want var.max_agents (40)"},
		{"agents without their shards", []edit{{"service_agent.tf", `subscription = google_pubsub_subscription.subscription["shards"].name`, `subscription = google_pubsub_subscription.subscription["chunks"].name`}}, "pool", "iam", "sa:agent lacks roles/pubsub.subscriber on subscription:ferry-shards-agents"},
		{"a producer that cannot publish shards", []edit{{"service_agent.tf", `    producer  = google_service_account.producer.member
`, ""}}, "pool", "iam", "sa:producer lacks roles/pubsub.publisher on topic:ferry-shards"},
		{"agents outside the pool", []edit{{"service_agent.tf", `{ agent = local.agent } : k => v if var.pool }`, `{ agent = local.agent } : k => v }`}}, "defaults", "env", "runs ferry-linux-amd64 with pool = false"},
		{"agents' shutdown longer than a Spot VM's notice", []edit{{"service_agent.tf", `agent_grace_seconds = var.spot ? 25 : 80`, `agent_grace_seconds = 80`}}, "pool", "workers", "want 0 < grace < stop timeout < 30s"},
		{"agents' attempts not the shards subscription's", []edit{{"service_agent.tf", `FERRY_MAX_DELIVERY_ATTEMPTS = local.subscriptions.shards.max_delivery_attempts`, `FERRY_MAX_DELIVERY_ATTEMPTS = 9`}}, "pool", "workers", "FERRY_MAX_DELIVERY_ATTEMPTS=9, but ferry-shards-agents dead-letters after 5"},
		{"agents without their roots", []edit{{"service_agent.tf", `      FERRY_SOURCE_ROOTS          = join(",", var.source_roots)
`, ""}}, "pool", "env", "ferry-linux-amd64 refuses this environment"},
		{"a variable the worker does not read", []edit{{"service_worker.tf", `FERRY_SHUTDOWN_GRACE        = "${local.worker_grace_seconds}s"`, `FERRY_SHUTDOWN_GRACE        = "${local.worker_grace_seconds}s"
      FERRY_COMPOSE_CONCURRENCY   = 4`}}, "defaults", "env", "sets FERRY_COMPOSE_CONCURRENCY, which worker does not read"},
		{"a needed variable left unset", []edit{{"service_merger.tf", `      FERRY_RESULTS_BUCKET   = google_storage_bucket.data.name
`, ""}}, "defaults", "env", "leaves FERRY_RESULTS_BUCKET unset"},
		{"a value the binary refuses", []edit{{"service_merger.tf", `"${var.done_retention_days * 24}h"`, `"${var.done_retention_days} days"`}}, "defaults", "env", "merger refuses this environment: config: FERRY_DONE_RETENTION"},
		{"the local stack's project", []edit{{"main.tf", `    FERRY_PROJECT                    = var.project
`, ""}}, "defaults", "env", "leaves FERRY_PROJECT at the local stack's default"},
		{"a submitter with a spool", []edit{{"service_submitter.tf", `FERRY_TRANSPORT        = "pubsub"`, `FERRY_TRANSPORT        = "spool"`}}, "defaults", "env", "want pubsub"},
		{"a topic the code does not know", []edit{{"pubsub.tf", `chunks   = "ferry-chunks"`, `chunks   = "ferry-chunk"`}}, "defaults", "pubsub", "no topic ferry-chunks"},
		{"a topic renamed in the environment only", []edit{{"main.tf", `FERRY_DONE_TOPIC                 = local.topics.done`, `FERRY_DONE_TOPIC                 = "ferry-finished"`}}, "defaults", "env", "FERRY_DONE_TOPIC=ferry-finished, but the code's topology names it ferry-done"},
		{"other delivery attempts than the code's", []edit{{"pubsub.tf", `topic = "events", ack_deadline_seconds = 20, max_delivery_attempts = 10 }`, `topic = "events", ack_deadline_seconds = 20, max_delivery_attempts = 9 }`}}, "defaults", "pubsub", "ferry-events-merger: max_delivery_attempts 9, want 10"},
		{"chunk attempts not the worker's", []edit{{"service_worker.tf", `FERRY_MAX_DELIVERY_ATTEMPTS = local.subscriptions.chunks.max_delivery_attempts`, `FERRY_MAX_DELIVERY_ATTEMPTS = 6`}}, "spool, filestore, kms, on-demand", "workers", "FERRY_MAX_DELIVERY_ATTEMPTS=6, but ferry-chunks-workers dead-letters after 7"},
		{"chunk attempts not the code's", []edit{{"variables.tf", `  default     = 5
  description = "Dead-letter threshold`, `  default     = 6
  description = "Dead-letter threshold`}}, "defaults", "pubsub", "var.max_delivery_attempts defaults to 6, FERRY_MAX_DELIVERY_ATTEMPTS to 5"},
		{"another ack deadline", []edit{{"pubsub.tf", `name = "ferry-chunks-workers", topic = "chunks", ack_deadline_seconds = 20`, `name = "ferry-chunks-workers", topic = "chunks", ack_deadline_seconds = 600`}}, "defaults", "pubsub", "ferry-chunks-workers: ack deadline 600s"},
		{"no dead-letter policy", []edit{{"pubsub.tf", `  dead_letter_policy {
    dead_letter_topic     = google_pubsub_topic.dead_letter[each.value.topic].id
    max_delivery_attempts = each.value.max_delivery_attempts
  }
`, ""}}, "defaults", "pubsub", "no dead-letter policy"},
		{"a subscription that expires", []edit{{"pubsub.tf", `  expiration_policy {
    ttl = ""
  }

  retry_policy`, `  retry_policy`}}, "defaults", "pubsub", "no expiration_policy"},
		{"the service agent cannot dead-letter", []edit{{"pubsub.tf", `  role         = "roles/pubsub.subscriber"
  member       = local.pubsub_agent`, `  role         = "roles/pubsub.viewer"
  member       = local.pubsub_agent`}}, "defaults", "pubsub", "service agent is not a subscriber"},
		{"a basic role", []edit{{"service_worker.tf", `  role   = "roles/storage.objectUser"
  member = google_service_account.worker.member`, `  role   = "roles/editor"
  member = google_service_account.worker.member`}}, "defaults", "iam", "grants the basic role roles/editor"},
		{"a submitter publishing the workers' events", []edit{{"service_submitter.tf", `control = google_pubsub_topic.topic["control"].name`, `control = google_pubsub_topic.topic["events"].name`}}, "defaults", "iam", "sa:submitter has roles/pubsub.publisher on topic:ferry-events, which it does not need"},
		{"a worker reading the merger's events", []edit{{"service_worker.tf", `subscription = google_pubsub_subscription.subscription["chunks"].name`, `subscription = google_pubsub_subscription.subscription["events"].name`}}, "defaults", "iam", "sa:worker has roles/pubsub.subscriber on subscription:ferry-events-merger, which it does not need"},
		{"a merger running as the worker", []edit{{"service_merger.tf", `service_account      = google_service_account.merger.email`, `service_account      = google_service_account.worker.email`}}, "defaults", "iam", "runs as"},
		{"a submitter writing final objects", []edit{{"service_submitter.tf", `  condition {
    title      = "ferry-prefixes"`, `  dynamic "x" {
    for_each = []
  }
  dummy {
    title      = "ferry-prefixes"`}}, "defaults", "iam", "sa:submitter lacks roles/storage.objectUser on bucket:ferry-prod-data if .ferry/"},
		{"a key", []edit{{"iam.tf", `resource "google_project_iam_custom_role" "bucket_get" {`, `resource "google_service_account_key" "worker" {
  service_account_id = google_service_account.worker.name
}

resource "google_project_iam_custom_role" "bucket_get" {`}}, "defaults", "iam", "a service account key"},
		{"no labels on a topic", []edit{{"pubsub.tf", `  name         = each.value
  labels       = local.labels
`, `  name         = each.value
`}}, "defaults", "labels", `google_pubsub_topic.topic["chunks"]: no labels`},
		{"labels without the common ones", []edit{{"bigquery.tf", `  dataset_id = var.bq_dataset
  location   = local.bq_location
  labels     = local.labels`, `  dataset_id = var.bq_dataset
  location   = local.bq_location
  labels     = { team = "data" }`}}, "defaults", "labels", "google_bigquery_dataset.ferry: lacks the common label app"},
		{"a resource type nobody decided on", []edit{{"network.tf", `resource "google_compute_firewall" "iap_ssh" {`, `resource "google_compute_address" "nat" {
  name = "ferry-nat"
}

resource "google_compute_firewall" "iap_ssh" {`}}, "defaults", "labels", "google_compute_address.nat: type google_compute_address is neither"},
		{"the chunks schema for transfers", []edit{{"bigquery.tf", `file("${path.module}/../schema/transfers.json")`, `file("${path.module}/../schema/chunks.json")`}}, "defaults", "bigquery", "google_bigquery_table.transfers: schema is not result's"},
		{"another table name", []edit{{"bigquery.tf", `table_id            = "chunks"`, `table_id            = "chunk_rows"`}}, "defaults", "bigquery", "no BigQuery table chunks"},
		{"not clustered by method", []edit{{"bigquery.tf", `clustering          = ["method"]`, `clustering          = ["tier"]`}}, "defaults", "bigquery", "not clustered by method first"},
		{"a lifecycle rule on the whole bucket", []edit{{"storage.tf", `      matches_prefix = [local.staging_prefix]
`, ""}}, "defaults", "bucket", "without matches_prefix would delete final objects"},
		{"done markers kept shorter than the merger thinks", []edit{{"storage.tf", `      age            = var.done_retention_days
`, `      age            = 7
`}}, "defaults", "bucket", "done markers (.ferry-done/) expire after 7 days"},
		{"public access allowed", []edit{{"storage.tf", `public_access_prevention    = "enforced"
  labels                      = local.labels

  # The user's`, `public_access_prevention    = "inherited"
  labels                      = local.labels

  # The user's`}}, "defaults", "bucket", "public_access_prevention is not enforced"},
		{"an external IP", []edit{{"compute.tf", `    subnetwork = google_compute_subnetwork.ferry.id
  }`, `    subnetwork = google_compute_subnetwork.ferry.id
    access_config {}
  }`}}, "defaults", "workers", "an external IP"},
		{"no secure boot", []edit{{"compute.tf", `enable_secure_boot          = true`, `enable_secure_boot          = false`}}, "defaults", "workers", "enable_secure_boot is not true"},
		{"health checks on another port", []edit{{"compute.tf", `    port         = local.health_port`, `    port         = 9090`}}, "defaults", "workers", "port 9090"},
		{"a grace longer than preemption allows", []edit{{"service_worker.tf", `worker_grace_seconds = var.spot ? 25 : 80`, `worker_grace_seconds = var.spot ? 30 : 80`}}, "defaults", "workers", "want 0 < grace < stop timeout < 30s"},
		{"scaling on another subscription", []edit{{"service_worker.tf", `resource.labels.subscription_id = \"${local.subscriptions.chunks.name}\"`, `resource.labels.subscription_id = \"${local.subscriptions.events.name}\"`}}, "defaults", "workers", "want num_undelivered_messages of ferry-chunks-workers"},
		{"a firewall open to the world", []edit{{"network.tf", `source_ranges = ["35.235.240.0/20"]`, `source_ranges = ["0.0.0.0/0"]`}}, "defaults", "deploy", "source range 0.0.0.0/0"},
		{"no Private Google Access", []edit{{"network.tf", `private_ip_google_access = true`, `private_ip_google_access = false`}}, "defaults", "deploy", "private_ip_google_access is not true"},
		{"an account racing its API", []edit{{"service_worker.tf", `  display_name = "ferry worker"

  depends_on = [google_project_service.services]`, `  display_name = "ferry worker"`}}, "defaults", "deploy", "google_service_account.worker: does not depend on google_project_service.services"},
		{"Spot that migrates", []edit{{"compute.tf", `on_host_maintenance         = each.value.spot ? "TERMINATE" : "MIGRATE"`, `on_host_maintenance         = "MIGRATE"`}}, "defaults", "deploy", "a Spot VM with on_host_maintenance \"MIGRATE\""},
		{"soft delete unchecked", []edit{{"variables.tf", `
  validation {
    condition     = var.soft_delete_days >= 7 && var.soft_delete_days <= 90
    error_message = "soft_delete_days must be 7 to 90 days: ferry does not turn off the protection of your data."
  }`, ``}}, "defaults", "deploy", "var.soft_delete_days: no validation block"},
		{"a bucket racing its key's grants", []edit{{"storage.tf", `  depends_on = [time_sleep.kms_grants, google_project_service.services]
}

resource "google_storage_bucket" "releases" {`, `  depends_on = [google_project_service.services]
}

resource "google_storage_bucket" "releases" {`}}, "spool, filestore, kms, on-demand", "grants", "google_storage_bucket.data: created without waiting for google_kms_crypto_key_iam_member.agent"},
		{"VMs racing their grants", []edit{{"compute.tf", `  depends_on = [time_sleep.grants]`, ``}}, "defaults", "grants", "starts VMs without waiting for google_storage_bucket_iam_member.worker"},
		{"a grant nobody waits for", []edit{{"agents.tf", `    google_bigquery_dataset_iam_member.merger,
`, ``}}, "defaults", "grants", "without waiting for google_bigquery_dataset_iam_member.merger"},
		{"a topic without the key", []edit{{"pubsub.tf", `  name         = each.value
  labels       = local.labels
  kms_key_name = var.kms ? local.kms_key : null`, `  name         = each.value
  labels       = local.labels`}}, "spool, filestore, kms, on-demand", "cmek", `google_pubsub_topic.topic["chunks"]: kms = true, but it is encrypted with ""`},
		{"boot disks without the key", []edit{{"compute.tf", `      for_each = var.kms ? [local.kms_key] : []
      content {
        kms_key_self_link = disk_encryption_key.value`, `      for_each = []
      content {
        kms_key_self_link = disk_encryption_key.value`}}, "spool, filestore, kms, on-demand", "cmek", `google_compute_instance_template.service["worker"]: kms = true`},
		{"a data source racing its API", []edit{{"agents.tf", `data "google_bigquery_default_service_account" "bq" {
  project = var.project

  depends_on = [google_project_service.services]
}`, `data "google_bigquery_default_service_account" "bq" {
  project = var.project
}`}}, "defaults", "deploy", "data.google_bigquery_default_service_account.bq: does not depend on google_project_service.services"},
		{"a new kind of store nobody decided on", []edit{{"bigquery.tf", `resource "google_bigquery_table" "chunks" {`, `resource "google_compute_disk" "scratch" {
  name = "scratch"
}

resource "google_bigquery_table" "chunks" {`}}, "defaults", "cmek", "google_compute_disk.scratch: type google_compute_disk may store data"},
		{"a fixed worker count", []edit{{"service_worker.tf", `min_replicas    = var.min_workers`, `min_replicas    = 2`}}, "defaults", "workers", "min_replicas = 2, want var.min_workers"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyConfig(t)
			for _, e := range tc.edits {
				p := filepath.Join(dir, e.file)
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				if strings.Count(string(b), e.old) != 1 {
					t.Fatalf("%s: the text to break is not there once (did the file change?): %q", e.file, e.old)
				}
				if err := os.WriteFile(p, []byte(strings.Replace(string(b), e.old, e.new, 1)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			ev := evaluate(t, dir, scenarios[tc.scenario])
			problems := checks[tc.check](ev)
			for _, p := range problems {
				if strings.Contains(p, tc.want) {
					return
				}
			}
			t.Fatalf("check %s did not catch it; want a problem containing %q, got %q", tc.check, tc.want, problems)
		})
	}
}

// deployerRoles maps each resource type terraform/ creates to the
// predefined role that lets whoever runs Terraform create it. A type not in
// the map fails the test, so a new kind of resource gets a decision.
var deployerRoles = map[string][]string{
	"google_project_service":                       {"roles/serviceusage.serviceUsageAdmin"},
	"google_project_iam_custom_role":               {"roles/iam.roleAdmin"},
	"google_project_iam_member":                    {"roles/resourcemanager.projectIamAdmin"},
	"google_service_account":                       {"roles/iam.serviceAccountAdmin"},
	"google_service_account_iam_member":            {"roles/iam.serviceAccountAdmin"},
	"google_storage_bucket":                        {"roles/storage.admin"},
	"google_storage_bucket_iam_member":             {"roles/storage.admin"},
	"google_pubsub_topic":                          {"roles/pubsub.admin"},
	"google_pubsub_subscription":                   {"roles/pubsub.admin"},
	"google_pubsub_topic_iam_member":               {"roles/pubsub.admin"},
	"google_pubsub_subscription_iam_member":        {"roles/pubsub.admin"},
	"google_bigquery_dataset":                      {"roles/bigquery.admin"},
	"google_bigquery_table":                        {"roles/bigquery.admin"},
	"google_bigquery_dataset_iam_member":           {"roles/bigquery.admin"},
	"google_kms_key_ring":                          {"roles/cloudkms.admin"},
	"google_kms_crypto_key":                        {"roles/cloudkms.admin"},
	"google_kms_crypto_key_iam_member":             {"roles/cloudkms.admin"},
	"google_filestore_instance":                    {"roles/file.editor"},
	"google_compute_network":                       {"roles/compute.admin"},
	"google_compute_subnetwork":                    {"roles/compute.admin"},
	"google_compute_router":                        {"roles/compute.admin"},
	"google_compute_router_nat":                    {"roles/compute.admin"},
	"google_compute_firewall":                      {"roles/compute.admin"},
	"google_compute_health_check":                  {"roles/compute.admin"},
	"google_compute_region_autoscaler":             {"roles/compute.admin"},
	"google_compute_region_instance_group_manager": {"roles/compute.admin"},
	// A template whose VMs run as a service account needs actAs on it.
	"google_compute_instance_template": {"roles/compute.admin", "roles/iam.serviceAccountUser"},
	"google_monitoring_dashboard":      {"roles/monitoring.editor"},
	"google_monitoring_alert_policy":   {"roles/monitoring.editor"},
	"google_logging_metric":            {"roles/logging.configWriter"},
	"time_sleep":                       {},
}

// TestDeployerRolesCoverTheConfiguration: the least-privilege role list in
// docs/deploying.md is what a first apply needs (issue 28 §2: it lacked
// actAs on the VMs' accounts).
func TestDeployerRolesCoverTheConfiguration(t *testing.T) {
	doc, err := os.ReadFile("../../docs/deploying.md")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile(`roles/[a-zA-Z.]+`).FindAllString(string(doc), -1) {
		listed[m] = true
	}
	m, err := Load("../../terraform")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range m.Resources {
		if r.Mode != "resource" {
			continue
		}
		roles, ok := deployerRoles[r.Type]
		if !ok {
			t.Errorf("%s: no deployer role decided for %s (deployerRoles)", r.Addr(), r.Type)
		}
		for _, role := range roles {
			if !listed[role] {
				t.Errorf("%s needs %s to create, and docs/deploying.md does not list it", r.Addr(), role)
			}
		}
	}
}
