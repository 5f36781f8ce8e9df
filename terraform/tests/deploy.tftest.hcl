# terraform test with the real google provider's schema and validators, on a
# mocked API: `make tf-check` runs it wherever the provider is installed.
# Each run plans (or applies, against the mock) one variable set that
# internal/tfcheck also evaluates, and asserts what a first deploy needs.

mock_provider "google" {
  mock_data "google_project" {
    defaults = {
      number = "123456789012"
    }
  }
  mock_data "google_storage_project_service_account" {
    defaults = {
      email_address = "service-123456789012@gs-project-accounts.iam.gserviceaccount.com"
    }
  }
}

# time_sleep waits for IAM to propagate in a real project; here it only
# needs to be planned and applied.
mock_provider "time" {}

override_resource {
  target = google_service_account.worker
  values = {
    email  = "ferry-worker@ferry-prod.iam.gserviceaccount.com"
    member = "serviceAccount:ferry-worker@ferry-prod.iam.gserviceaccount.com"
  }
}

override_resource {
  target = google_service_account.merger
  values = {
    email  = "ferry-merger@ferry-prod.iam.gserviceaccount.com"
    member = "serviceAccount:ferry-merger@ferry-prod.iam.gserviceaccount.com"
  }
}

override_resource {
  target = google_service_account.producer
  values = {
    email  = "ferry-producer@ferry-prod.iam.gserviceaccount.com"
    member = "serviceAccount:ferry-producer@ferry-prod.iam.gserviceaccount.com"
  }
}

override_resource {
  target = google_service_account.submitter
  values = {
    email  = "ferry-submitter@ferry-prod.iam.gserviceaccount.com"
    member = "serviceAccount:ferry-submitter@ferry-prod.iam.gserviceaccount.com"
  }
}

variables {
  project         = "ferry-prod"
  bucket          = "ferry-prod-data"
  release_version = "v1.2.3"
}

run "defaults_apply_on_an_empty_project" {
  command = apply

  assert {
    condition     = google_compute_region_autoscaler.worker.autoscaling_policy[0].metric[0].name == "pubsub.googleapis.com/subscription/num_undelivered_messages"
    error_message = "The worker autoscaler must follow the chunks subscription's backlog."
  }
  assert {
    condition     = google_compute_region_autoscaler.worker.autoscaling_policy[0].metric[0].single_instance_assignment == 32
    error_message = "The autoscaler aims at worker_backlog_per_instance messages per worker."
  }
  assert {
    condition = alltrue([
      google_compute_instance_template.service["worker"].scheduling[0].provisioning_model == "SPOT",
      google_compute_instance_template.service["worker"].scheduling[0].on_host_maintenance == "TERMINATE",
      google_compute_instance_template.service["worker"].scheduling[0].automatic_restart == false,
    ])
    error_message = "Spot workers must terminate on host maintenance and not restart automatically (GCE refuses MIGRATE for Spot)."
  }
  assert {
    condition     = google_compute_instance_template.service["merger"].scheduling[0].provisioning_model == "STANDARD"
    error_message = "The merger runs on demand."
  }
  assert {
    condition     = alltrue([for s in google_pubsub_subscription.subscription : length(s.dead_letter_policy) == 1])
    error_message = "Every subscription of the fleet dead-letters."
  }
  assert {
    condition     = alltrue([for m in google_project_iam_member.worker : m.member != google_service_account.submitter.member])
    error_message = "The submitter must have no project-wide grant."
  }
  assert {
    condition     = length([for k, v in google_pubsub_topic_iam_member.submitter : k if v.role != "roles/pubsub.publisher"]) == 0
    error_message = "The submitter only publishes; it has no subscription rights."
  }
  assert {
    condition     = contains(keys(google_project_service.services), "serviceusage.googleapis.com") && contains(keys(google_project_service.services), "cloudresourcemanager.googleapis.com")
    error_message = "A fresh project needs Service Usage and Cloud Resource Manager enabled."
  }
  assert {
    condition     = strcontains(google_compute_instance_template.service["merger"].metadata["ferry-env"], "FERRY_BQ_LOCATION=us-central1")
    error_message = "The merger must know the dataset's location (FERRY_BQ_LOCATION)."
  }
  assert {
    condition     = google_compute_instance_template.service["worker"].metadata["ferry-ops-agent"] == "true"
    error_message = "The VMs configure the Ops Agent by default."
  }
  assert {
    condition     = length(google_monitoring_alert_policy.alert["dead_letter"].conditions) == 1 && google_monitoring_alert_policy.alert["backlog_age"].conditions[0].condition_threshold[0].threshold_value == 3600
    error_message = "The dead-letter and backlog alerts exist, the backlog one at an hour by default."
  }
  assert {
    condition     = google_storage_bucket.data.soft_delete_policy[0].retention_duration_seconds == 604800 && one([for c in google_storage_bucket.data.lifecycle_rule[0].condition : c.age]) == 3
    error_message = "The bucket keeps Cloud Storage's 7 days of soft delete (the user's safety net), and staging expires after staging_retention_days."
  }
  assert {
    condition     = time_sleep.grants.create_duration == "120s" && length(time_sleep.kms_grants) == 0
    error_message = "The instance groups wait two minutes for their grants to propagate; without kms there is no key grant to wait for."
  }
  assert {
    condition     = length(google_kms_crypto_key_iam_member.agent) == 0 && google_pubsub_topic.topic["chunks"].kms_key_name == null && length(google_bigquery_dataset.ferry.default_encryption_configuration) == 0
    error_message = "Without kms nothing names a key."
  }
  assert {
    condition = alltrue([
      google_compute_region_instance_group_manager.service["producer"].update_policy[0].max_surge_fixed == 0,
      google_compute_region_instance_group_manager.service["producer"].update_policy[0].max_unavailable_fixed == 3,
      google_compute_region_instance_group_manager.service["worker"].update_policy[0].max_surge_fixed == 3,
    ])
    error_message = "The producer (8 vCPUs) is replaced in place, so a first update fits a new project's CPU quota; the others surge."
  }
  assert {
    condition     = output.peak_vcpus.on_demand == 8 + 2 * 4 && output.peak_vcpus.spot == 4 * 23
    error_message = "peak_vcpus counts the producer (8, in place), the merger (2, plus a surge of 3) and 20 Spot workers plus 3 surging."
  }
  assert {
    condition     = strcontains(google_monitoring_alert_policy.alert["failed_transfers"].conditions[0].condition_threshold[0].filter, "logging.googleapis.com/user/ferry-transfers-failed") && google_logging_metric.failed_transfers.filter == "resource.type=\"gce_instance\" AND log_id(\"ferry\") AND jsonPayload.message=\"transfer failed\""
    error_message = "The failed-transfers alert reads a log-based metric this configuration creates, not a Prometheus metric that exists only once written."
  }
  assert {
    condition     = alltrue([for a in google_monitoring_alert_policy.alert : alltrue([for c in a.conditions : !strcontains(c.condition_threshold[0].filter, "prometheus.googleapis.com")])])
    error_message = "No alert may name a metric that does not exist on a new project."
  }
}

# A plan: the key's prevent_destroy would keep an applied run's state from
# being torn down.
run "kms_everywhere_on_a_fresh_project" {
  command = plan

  variables {
    transport      = "spool"
    filestore      = true
    filestore_tier = "ZONAL"
    kms            = true
  }

  assert {
    condition = alltrue(concat(
      [for t in google_pubsub_topic.topic : t.kms_key_name == local.kms_key],
      [for t in google_pubsub_topic.dead_letter : t.kms_key_name == local.kms_key],
      [google_bigquery_dataset.ferry.default_encryption_configuration[0].kms_key_name == local.kms_key],
      [google_filestore_instance.spool[0].kms_key_name == local.kms_key],
      [for t in google_compute_instance_template.service : t.disk[0].disk_encryption_key[0].kms_key_self_link == local.kms_key],
      [google_storage_bucket.data.encryption[0].default_kms_key_name == local.kms_key],
      [google_storage_bucket.releases[0].encryption[0].default_kms_key_name == local.kms_key],
    ))
    error_message = "Under constraints/gcp.restrictNonCmekServices every topic, the dataset, the spool share, the boot disks and the buckets need the key."
  }
  assert {
    condition     = toset(keys(google_kms_crypto_key_iam_member.agent)) == toset(["storage", "pubsub", "bigquery", "compute", "filestore"])
    error_message = "Each service agent that encrypts with the key is granted it."
  }
  assert {
    condition     = google_kms_crypto_key_iam_member.agent["pubsub"].member == "serviceAccount:service-123456789012@gcp-sa-pubsub.iam.gserviceaccount.com" && google_kms_crypto_key_iam_member.agent["compute"].member == "serviceAccount:service-123456789012@compute-system.iam.gserviceaccount.com"
    error_message = "The agents are the project's own."
  }
  assert {
    condition     = length(time_sleep.kms_grants) == 1
    error_message = "What the key encrypts waits for the key's grants."
  }
}

run "kms_with_a_basic_filestore_is_refused" {
  command = plan
  variables {
    transport = "spool"
    filestore = true
    kms       = true
  }
  expect_failures = [google_filestore_instance.spool]
}

run "no_nat_on_a_stock_image_is_refused" {
  command = plan
  variables {
    nat = false
  }
  expect_failures = [google_compute_region_instance_group_manager.service]
}

run "no_nat_with_an_image_that_has_the_packages" {
  command = plan
  variables {
    nat                = false
    image              = "projects/ferry-prod/global/images/ferry-debian-12"
    image_has_packages = true
  }
  assert {
    condition     = length(google_compute_router_nat.ferry) == 0 && google_compute_subnetwork.ferry.private_ip_google_access
    error_message = "Without NAT the VMs reach Google's APIs through Private Google Access."
  }
}

run "a_dataset_that_cannot_load_from_the_bucket_is_refused" {
  command = plan
  variables {
    bq_location = "asia-northeast1"
  }
  expect_failures = [google_bigquery_dataset.ferry]
}

run "a_us_dataset_loads_from_a_us_bucket" {
  command = plan
  variables {
    bq_location = "US"
  }
  assert {
    condition     = google_bigquery_dataset.ferry.location == "US"
    error_message = "The US multi-region loads from any US bucket."
  }
}

run "kms_with_a_dataset_elsewhere_is_refused" {
  command = plan
  variables {
    kms         = true
    bq_location = "US"
  }
  expect_failures = [google_bigquery_dataset.ferry]
}

run "soft_delete_off_is_refused" {
  command = plan
  variables {
    soft_delete_days = 0
  }
  expect_failures = [var.soft_delete_days]
}

run "spool_filestore_kms_on_demand" {
  command = plan

  variables {
    transport        = "spool"
    filestore        = true
    kms              = true
    spot             = false
    release_location = "gs://ferry-releases/builds"
    filestore_tier   = "REGIONAL"
  }

  assert {
    condition     = google_storage_bucket.data.encryption[0].default_kms_key_name == "projects/ferry-prod/locations/us-central1/keyRings/ferry/cryptoKeys/ferry-objects"
    error_message = "With kms, the bucket encrypts with the key created here."
  }
  assert {
    condition     = google_filestore_instance.spool[0].location == "us-central1"
    error_message = "A REGIONAL Filestore share lives in the region, not a zone."
  }
  assert {
    condition = alltrue([
      google_compute_instance_template.service["worker"].scheduling[0].provisioning_model == "STANDARD",
      google_compute_instance_template.service["worker"].scheduling[0].on_host_maintenance == "MIGRATE",
    ])
    error_message = "On-demand workers migrate on host maintenance."
  }
  assert {
    condition     = length(google_storage_bucket.releases) == 0
    error_message = "With release_location set, no release bucket is created."
  }
}

run "zonal_filestore_in_a_chosen_zone" {
  command = plan

  variables {
    transport      = "spool"
    filestore      = true
    filestore_zone = "us-central1-c"
  }

  assert {
    condition     = google_filestore_instance.spool[0].location == "us-central1-c"
    error_message = "A zonal share goes where filestore_zone says."
  }
}

run "soft_delete_of_three_days_is_refused" {
  command = plan
  variables {
    soft_delete_days = 3
  }
  expect_failures = [var.soft_delete_days]
}

run "staging_retention_of_zero_is_refused" {
  command = plan
  variables {
    staging_retention_days = 0
  }
  expect_failures = [var.staging_retention_days]
}

run "staging_retention_shorter_than_the_transfer_timeout_is_refused" {
  command = plan
  variables {
    staging_retention_days = 3
    transfer_timeout       = "100h"
  }
  expect_failures = [google_storage_bucket.data]
}

run "a_bad_transfer_timeout_is_refused" {
  command = plan
  variables {
    transfer_timeout = "six hours"
  }
  expect_failures = [var.transfer_timeout]
}

run "spool_without_filestore_is_refused" {
  command = plan
  variables {
    transport = "spool"
  }
  expect_failures = [google_compute_region_instance_group_manager.service]
}

run "load_datasets_reach_producer_and_merger_with_data_editor" {
  command = plan
  variables {
    bq_load_datasets = ["analytics-prod.landing", "ferry-prod.exports"]
  }
  assert {
    condition     = length(google_bigquery_dataset_iam_member.loads) == 2 && google_bigquery_dataset_iam_member.loads["analytics-prod.landing"].project == "analytics-prod" && google_bigquery_dataset_iam_member.loads["analytics-prod.landing"].dataset_id == "landing" && google_bigquery_dataset_iam_member.loads["analytics-prod.landing"].role == "roles/bigquery.dataEditor"
    error_message = "The merger writes the tables of each dataset transfers may load into, and no other."
  }
}

run "a_load_dataset_that_is_not_project_dot_dataset_is_refused" {
  command = plan
  variables {
    bq_load_datasets = ["landing"]
  }
  expect_failures = [var.bq_load_datasets]
}

run "the_pool_scales_agents_on_the_shards_backlog" {
  command = plan

  variables {
    pool         = true
    source_share = "10.0.0.2:/exports/data"
    source_roots = ["/srv/nfs-data"]
    max_agents   = 40
  }

  assert {
    condition     = google_compute_region_autoscaler.agent[0].autoscaling_policy[0].max_replicas == 40 && strcontains(google_compute_region_autoscaler.agent[0].autoscaling_policy[0].metric[0].filter, "\"ferry-shards-agents\"")
    error_message = "The agents scale on the shards subscription's backlog, up to max_agents."
  }
  assert {
    condition     = google_compute_instance_template.service["agent"].metadata["ferry-binary"] == "ferry-linux-amd64" && google_compute_instance_template.service["agent"].metadata["ferry-args"] == "agent"
    error_message = "An agent's VM runs `ferry agent` from the release's ferry."
  }
  assert {
    condition = alltrue([for s in ["agent", "producer"] :
      google_compute_instance_template.service[s].metadata["ferry-source-share"] == "10.0.0.2:/exports/data" && google_compute_instance_template.service[s].metadata["ferry-source-dir"] == "/srv/nfs-data"
    ]) && google_compute_instance_template.service["worker"].metadata["ferry-source-share"] == ""
    error_message = "The producer (which walks) and the agents (which read) mount the source share at the first source root; workers do not."
  }
  assert {
    condition     = output.peak_vcpus.spot == 4 * 23 + 8 * 43
    error_message = "peak_vcpus counts 40 Spot agents of 8 vCPUs plus 3 surging."
  }
  assert {
    condition     = length([for w in jsondecode(google_monitoring_dashboard.ferry.dashboard_json).gridLayout.widgets : w if strcontains(w.title, "Agents of the pool")]) == 1
    error_message = "The dashboard shows the agents' group beside the workers'."
  }
}

run "a_pool_without_a_share_is_refused" {
  command = plan
  variables {
    pool = true
  }
  expect_failures = [google_compute_region_instance_group_manager.service]
}
