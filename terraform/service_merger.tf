# Mergers: compose each file's chunks into its final object, verify it,
# write the benchmark rows (staged in the bucket, appended to BigQuery with
# load jobs), publish the done event, clean up. Two at once are safe.

resource "google_service_account" "merger" {
  account_id   = "ferry-merger"
  display_name = "ferry merger"

  depends_on = [google_project_service.services]
}

locals {
  merger = {
    binary               = "merger"
    args                 = ""
    machine_type         = var.merger_machine_type
    service_account      = google_service_account.merger.email
    spot                 = false
    surge                = true
    autoscaled           = false
    instances            = var.mergers
    max_instances        = var.mergers
    nfs                  = false
    source_share         = ""
    stop_timeout_seconds = 60
    env = merge(local.common_env, {
      FERRY_BQ_DATASET       = google_bigquery_dataset.ferry.dataset_id
      FERRY_BQ_LOAD_DATASETS = join(",", var.bq_load_datasets)
      FERRY_BQ_PROJECT       = var.project
      FERRY_BQ_LOCATION      = google_bigquery_dataset.ferry.location
      FERRY_RESULTS_BUCKET   = google_storage_bucket.data.name
      FERRY_TRANSFER_TIMEOUT = var.transfer_timeout
      FERRY_DONE_RETENTION   = "${var.done_retention_days * 24}h"
      # The events and control subscriptions' dead-letter threshold: on
      # that delivery an event that still fails ends its transfer.
      FERRY_MERGER_MAX_DELIVERY_ATTEMPTS = local.subscriptions.events.max_delivery_attempts
      # BigQuery allows 1,500 load jobs per table a day, and every merger
      # runs a loader: at most one load per table each 2 minutes per merger
      # keeps all of them under 720 a day.
      FERRY_LOAD_MAX_AGE = "${max(1, var.mergers) * 2}m"
    })
  }
}

# The workers' events and what producers and submitters say (control).
resource "google_pubsub_subscription_iam_member" "merger" {
  for_each = {
    events  = google_pubsub_subscription.subscription["events"].name
    control = google_pubsub_subscription.subscription["control"].name
  }

  subscription = each.value
  role         = "roles/pubsub.subscriber"
  member       = google_service_account.merger.member
}

# Done events; an event that failed for good is copied to its topic's
# dead-letter topic.
resource "google_pubsub_topic_iam_member" "merger" {
  for_each = {
    done         = google_pubsub_topic.topic["done"].name
    events_dead  = google_pubsub_topic.dead_letter["events"].name
    control_dead = google_pubsub_topic.dead_letter["control"].name
  }

  topic  = each.value
  role   = "roles/pubsub.publisher"
  member = google_service_account.merger.member
}

# Compose, verify, staged rows, done markers, cleanup of staging.
resource "google_storage_bucket_iam_member" "merger" {
  bucket = google_storage_bucket.data.name
  role   = "roles/storage.objectUser"
  member = google_service_account.merger.member
}

resource "google_bigquery_dataset_iam_member" "merger" {
  dataset_id = google_bigquery_dataset.ferry.dataset_id
  role       = "roles/bigquery.dataEditor"
  member     = google_service_account.merger.member
}

# The tables transfers load their Parquet parts into (--bq-table): the
# datasets are the user's; the merger writes their tables.
resource "google_bigquery_dataset_iam_member" "loads" {
  for_each = toset(var.bq_load_datasets)

  project    = split(".", each.value)[0]
  dataset_id = split(".", each.value)[1]
  role       = "roles/bigquery.dataEditor"
  member     = google_service_account.merger.member
}

# Load jobs are created in the project; BigQuery has no narrower place.
resource "google_project_iam_member" "merger" {
  for_each = toset(concat(local.vm_project_roles, ["roles/bigquery.jobUser"]))

  project = var.project
  role    = each.value
  member  = google_service_account.merger.member
}
