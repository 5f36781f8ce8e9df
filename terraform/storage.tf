# The bucket ferry writes to, and the one the VMs fetch release binaries from.

resource "google_storage_bucket" "data" {
  name                        = var.bucket
  location                    = var.region
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  labels                      = local.labels

  # The user's protection against deleting their own data by mistake stays
  # on. ferry's staging parts mostly skip it: a file's final compose deletes
  # its sources as part of the call (deleteSourceObjects, a hard delete).
  # The chunks of files of more than 32 chunks (composed through
  # intermediate composites) and the small manifest objects are deleted at
  # the end of the transfer and kept soft-deleted for soft_delete_days;
  # docs/capacity.md says what that costs.
  soft_delete_policy {
    retention_duration_seconds = var.soft_delete_days * 86400
  }

  dynamic "encryption" {
    for_each = var.kms ? [local.kms_key] : []
    content {
      default_kms_key_name = encryption.value
    }
  }

  # Staging (chunks, intermediate composites, manifests, rows waiting for
  # a load job) is deleted when a transfer ends; this is the backstop for
  # what a crash left behind. It covers message.StagingRoot only.
  lifecycle_rule {
    condition {
      age            = var.staging_retention_days
      matches_prefix = [local.staging_prefix]
    }
    action {
      type = "Delete"
    }
  }

  # Key objects (message.KeyRoot) prove who may end a transfer; a transfer
  # ends long before staging expires, and its key with it.
  lifecycle_rule {
    condition {
      age            = var.staging_retention_days
      matches_prefix = [local.keys_prefix]
    }
    action {
      type = "Delete"
    }
  }

  # Done markers answer a repeated idempotency key; they live under their
  # own prefix and are kept for FERRY_DONE_RETENTION.
  lifecycle_rule {
    condition {
      age            = var.done_retention_days
      matches_prefix = [local.done_prefix]
    }
    action {
      type = "Delete"
    }
  }

  lifecycle {
    precondition {
      condition     = var.staging_retention_days * 24 > local.transfer_timeout_hours
      error_message = "staging_retention_days (${var.staging_retention_days} days) must be longer than transfer_timeout (${var.transfer_timeout}): the lifecycle rule would delete the chunks and the manifest of a transfer that is still allowed to run."
    }
  }

  depends_on = [time_sleep.kms_grants, google_project_service.services]
}

resource "google_storage_bucket" "releases" {
  count = var.release_location == "" ? 1 : 0

  name                        = "${var.bucket}-releases"
  location                    = var.region
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  labels                      = local.labels

  versioning {
    enabled = true
  }

  dynamic "encryption" {
    for_each = var.kms ? [local.kms_key] : []
    content {
      default_kms_key_name = encryption.value
    }
  }

  depends_on = [time_sleep.kms_grants, google_project_service.services]
}

locals {
  # transfer_timeout in hours, for the staging retention's precondition.
  timeout_parts          = regex("^(?:(?P<h>[0-9]+)h)?(?:(?P<m>[0-9]+)m)?(?:(?P<s>[0-9]+)s)?$", var.transfer_timeout)
  transfer_timeout_hours = tonumber(coalesce(local.timeout_parts.h, "0")) + tonumber(coalesce(local.timeout_parts.m, "0")) / 60 + tonumber(coalesce(local.timeout_parts.s, "0")) / 3600

  staging_prefix = ".ferry/"
  done_prefix    = ".ferry-done/"
  keys_prefix    = ".ferry-keys/"

  release_location = var.release_location != "" ? trimsuffix(var.release_location, "/") : "gs://${var.bucket}-releases/ferry"
  release_bucket   = split("/", trimprefix(local.release_location, "gs://"))[0]
  release_url      = "${local.release_location}/${var.release_version}"
}

# Reading the release binaries is all any VM may do in the release bucket.
resource "google_storage_bucket_iam_member" "release_readers" {
  for_each = merge({
    worker   = google_service_account.worker.member
    merger   = google_service_account.merger.member
    producer = google_service_account.producer.member
  }, { for k, v in { agent = one(google_service_account.agent[*].member) } : k => v if var.pool })

  bucket = local.release_bucket
  role   = "roles/storage.objectViewer"
  member = each.value

  depends_on = [google_storage_bucket.releases]
}
