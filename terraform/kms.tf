# Optional CMEK: a key ring and key that encrypt everything of ferry's that
# Google stores: objects (uploads and composes name the key, FERRY_KMS_KEY),
# messages on every topic, the BigQuery dataset, the Filestore spool and the
# VMs' boot disks. Each service's agent (agents.tf) does the encrypting, so
# the agents alone are granted the key, and what uses the key waits for
# those grants to propagate (time_sleep.kms_grants).

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

resource "google_kms_crypto_key_iam_member" "agent" {
  for_each = local.kms_agents

  crypto_key_id = google_kms_crypto_key.objects[0].id
  role          = "roles/cloudkms.cryptoKeyEncrypterDecrypter"
  member        = each.value
}

locals {
  kms_ring     = "ferry"
  kms_key_name = "ferry-objects"

  # The key's resource name, as FERRY_KMS_KEY wants it (the key's id);
  # empty without CMEK.
  kms_key = var.kms ? "projects/${var.project}/locations/${var.region}/keyRings/${local.kms_ring}/cryptoKeys/${local.kms_key_name}" : ""
}
