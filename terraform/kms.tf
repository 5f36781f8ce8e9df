# Optional CMEK: a key ring and key that encrypt every object ferry writes.
# Uploads and composes name the key (FERRY_KMS_KEY); Cloud Storage's service
# agent does the encrypting, so it alone is granted the key.

resource "google_kms_key_ring" "ferry" {
  count = var.kms ? 1 : 0

  name     = local.kms_ring
  location = var.region

  depends_on = [google_project_service.services]
}

resource "google_kms_crypto_key" "objects" {
  count = var.kms ? 1 : 0

  name            = local.kms_key_name
  key_ring        = google_kms_key_ring.ferry[0].id
  rotation_period = "7776000s"
  labels          = local.labels

  lifecycle {
    prevent_destroy = true
  }
}

data "google_storage_project_service_account" "gcs" {
  project = var.project
}

resource "google_kms_crypto_key_iam_member" "gcs_agent" {
  count = var.kms ? 1 : 0

  crypto_key_id = google_kms_crypto_key.objects[0].id
  role          = "roles/cloudkms.cryptoKeyEncrypterDecrypter"
  member        = "serviceAccount:${data.google_storage_project_service_account.gcs.email_address}"
}

locals {
  kms_ring     = "ferry"
  kms_key_name = "ferry-objects"

  # The key's resource name, as FERRY_KMS_KEY wants it (the key's id);
  # empty without CMEK.
  kms_key = var.kms ? "projects/${var.project}/locations/${var.region}/keyRings/${local.kms_ring}/cryptoKeys/${local.kms_key_name}" : ""
}
