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
    condition     = google_storage_bucket.data.soft_delete_policy[0].retention_duration_seconds == 0 && one([for c in google_storage_bucket.data.lifecycle_rule[0].condition : c.age]) == 3
    error_message = "Soft delete is off and staging expires after staging_retention_days."
  }
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
