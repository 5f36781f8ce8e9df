# The submitter: `producer submit` run where the data is (an on-premises
# machine, a batch job) with FERRY_TRANSPORT=pubsub. It publishes chunk
# messages and events, writes manifests under the staging prefix, reads (never
# writes) done markers (which is how --wait learns that its transfer ended), and lists
# the destination for -n and --skip-unchanged. No key is created: principals in
# submitter_impersonators act as it (gcloud's --impersonate-service-account,
# or a workload identity pool).

resource "google_service_account" "submitter" {
  account_id   = "ferry-submitter"
  display_name = "ferry submitter (on-premises producer submit)"

  depends_on = [google_project_service.services]
}

resource "google_service_account_iam_member" "submitter_impersonators" {
  for_each = toset(var.submitter_impersonators)

  service_account_id = google_service_account.submitter.name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = each.value
}

resource "google_pubsub_topic_iam_member" "submitter" {
  for_each = {
    chunks  = google_pubsub_topic.topic["chunks"].name
    control = google_pubsub_topic.topic["control"].name
  }

  topic  = each.value
  role   = "roles/pubsub.publisher"
  member = google_service_account.submitter.member
}

# No subscription rights at all: Pub/Sub cannot confine them by name, so a
# grant that lets the submitter create its own would let it drain or delete
# the fleet's. `producer submit --wait` polls its done marker instead
# (FERRY_SUBMIT_WAIT=marker, in submitter_env).

# Only ferry's own prefix: manifests and staging under .ferry/. Final
# objects are the workers' and the merger's.
resource "google_storage_bucket_iam_member" "submitter" {
  bucket = google_storage_bucket.data.name
  role   = "roles/storage.objectUser"
  member = google_service_account.submitter.member

  condition {
    title      = "ferry-prefixes"
    expression = "resource.name.startsWith(\"projects/_/buckets/${var.bucket}/objects/${local.staging_prefix}\")"
  }
}

# Done markers under .ferry-done/: read only. A marker is the merger's word
# that a transfer ended; a submitter that could write one could end another
# submitter's wait, or have workers drop its chunks (issue 42 §3).
resource "google_storage_bucket_iam_member" "submitter_done" {
  bucket = google_storage_bucket.data.name
  role   = "roles/storage.objectViewer"
  member = google_service_account.submitter.member

  condition {
    title      = "ferry-done-markers"
    expression = "resource.name.startsWith(\"projects/_/buckets/${var.bucket}/objects/${local.done_prefix}\")"
  }
}

# Key objects (message.KeyRoot): the submitter creates its transfer's and
# may neither replace nor delete one (objectCreator has no
# storage.objects.delete, which overwriting needs), so it cannot put its
# key into another transfer's and end it. The producer service, the merger
# and operators may (objectUser).
resource "google_storage_bucket_iam_member" "submitter_keys" {
  bucket = google_storage_bucket.data.name
  role   = "roles/storage.objectCreator"
  member = google_service_account.submitter.member

  condition {
    title      = "ferry-keys"
    expression = "resource.name.startsWith(\"projects/_/buckets/${var.bucket}/objects/${local.keys_prefix}\")"
  }
}

resource "google_storage_bucket_iam_member" "submitter_bucket_get" {
  bucket = google_storage_bucket.data.name
  role   = google_project_iam_custom_role.bucket_get.id
  member = google_service_account.submitter.member
}

# -n and --skip-unchanged list the destination. storage.objects.list is
# checked on the bucket, so the prefix condition above cannot grant it: the
# submitter may list the names and metadata of the whole bucket, and read
# and write only under ferry's prefixes.
resource "google_storage_bucket_iam_member" "submitter_list" {
  bucket = google_storage_bucket.data.name
  role   = google_project_iam_custom_role.objects_list.id
  member = google_service_account.submitter.member
}

locals {
  # The environment of an on-premises submitter (terraform output
  # submitter_env writes it as a .env file for FERRY_ENV_FILE).
  submitter_env = {
    FERRY_PROJECT          = var.project
    FERRY_CHUNKS_TOPIC     = local.topics.chunks
    FERRY_EVENTS_TOPIC     = local.topics.events
    FERRY_CONTROL_TOPIC    = local.topics.control
    FERRY_DONE_TOPIC       = local.topics.done
    FERRY_TRANSPORT        = "pubsub"
    FERRY_SUBMIT_WAIT      = "marker"
    FERRY_BUCKETS          = google_storage_bucket.data.name
    FERRY_KMS_KEY          = local.kms_key
    FERRY_BQ_LOAD_DATASETS = join(",", var.bq_load_datasets)
  }
}
