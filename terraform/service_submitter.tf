# The submitter: `producer submit` run where the data is (an on-premises
# machine, a batch job) with FERRY_TRANSPORT=pubsub. It publishes chunk
# messages and events, writes manifests under the staging prefix, reads done
# markers, and (with submitter_wait) waits for its done event on a temporary
# subscription of its own. No key is created: principals in
# submitter_impersonators act as it (gcloud's --impersonate-service-account,
# or a workload identity pool).

resource "google_service_account" "submitter" {
  account_id   = "ferry-submitter"
  display_name = "ferry submitter (on-premises producer submit)"
}

resource "google_service_account_iam_member" "submitter_impersonators" {
  for_each = toset(var.submitter_impersonators)

  service_account_id = google_service_account.submitter.name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = each.value
}

resource "google_pubsub_topic_iam_member" "submitter" {
  for_each = {
    chunks = google_pubsub_topic.topic["chunks"].name
    events = google_pubsub_topic.topic["events"].name
  }

  topic  = each.value
  role   = "roles/pubsub.publisher"
  member = google_service_account.submitter.member
}

# Attaching a temporary subscription to the done topic (--wait) and to the
# events topic (the progress bar).
resource "google_pubsub_topic_iam_member" "submitter_attach" {
  for_each = {
    for k, v in {
      done   = google_pubsub_topic.topic["done"].name
      events = google_pubsub_topic.topic["events"].name
    } : k => v if var.submitter_wait
  }

  topic  = each.value
  role   = "roles/pubsub.subscriber"
  member = google_service_account.submitter.member
}

# Creating, reading and deleting those subscriptions is granted on the
# project: IAM Conditions cannot name Pub/Sub resources, so this grant
# covers every subscription of the project. Turn it off with
# submitter_wait = false (submit without --wait then needs none of it).
resource "google_project_iam_member" "submitter_wait" {
  count = var.submitter_wait ? 1 : 0

  project = var.project
  role    = google_project_iam_custom_role.submitter_wait.id
  member  = google_service_account.submitter.member
}

# Only ferry's own prefixes: manifests and staging under .ferry/, done
# markers under .ferry-done/. Final objects are the workers' and the merger's.
resource "google_storage_bucket_iam_member" "submitter" {
  bucket = google_storage_bucket.data.name
  role   = "roles/storage.objectUser"
  member = google_service_account.submitter.member

  condition {
    title      = "ferry-prefixes"
    expression = "resource.name.startsWith(\"projects/_/buckets/${var.bucket}/objects/${local.staging_prefix}\") || resource.name.startsWith(\"projects/_/buckets/${var.bucket}/objects/${local.done_prefix}\")"
  }
}

resource "google_storage_bucket_iam_member" "submitter_bucket_get" {
  bucket = google_storage_bucket.data.name
  role   = google_project_iam_custom_role.bucket_get.id
  member = google_service_account.submitter.member
}

locals {
  # The environment of an on-premises submitter (terraform output
  # submitter_env writes it as a .env file for FERRY_ENV_FILE).
  submitter_env = {
    FERRY_PROJECT      = var.project
    FERRY_CHUNKS_TOPIC = local.topics.chunks
    FERRY_EVENTS_TOPIC = local.topics.events
    FERRY_DONE_TOPIC   = local.topics.done
    FERRY_TRANSPORT    = "pubsub"
    FERRY_BUCKETS      = google_storage_bucket.data.name
    FERRY_KMS_KEY      = local.kms_key
  }
}
