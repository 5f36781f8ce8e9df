# Google's service agents act for ferry: Cloud Storage, Pub/Sub, BigQuery,
# Compute Engine and Filestore encrypt with the CMEK key, and Pub/Sub moves
# messages to the dead-letter topics. A grant, to an agent or to one of
# ferry's own accounts, takes effect only once IAM has propagated it
# (usually within two minutes, at times up to seven): what uses a grant waits
# here, so that a first apply on a fresh project does not fail with 403.

# Reading these creates the agents where they do not exist yet.
data "google_storage_project_service_account" "gcs" {
  project = var.project

  depends_on = [google_project_service.services]
}

data "google_bigquery_default_service_account" "bq" {
  project = var.project

  depends_on = [google_project_service.services]
}

locals {
  # The GA provider cannot ask for the Pub/Sub, Compute Engine and Filestore
  # agents (google_project_service_identity is in google-beta only); each
  # service creates its agent when its API is enabled, at the address its
  # documentation gives, service-PROJECT_NUMBER@<service's domain>.
  agents = {
    storage   = "serviceAccount:${data.google_storage_project_service_account.gcs.email_address}"
    bigquery  = "serviceAccount:${data.google_bigquery_default_service_account.bq.email}"
    pubsub    = "serviceAccount:service-${data.google_project.project.number}@gcp-sa-pubsub.iam.gserviceaccount.com"
    compute   = "serviceAccount:service-${data.google_project.project.number}@compute-system.iam.gserviceaccount.com"
    filestore = "serviceAccount:service-${data.google_project.project.number}@cloud-filer.iam.gserviceaccount.com"
  }
  pubsub_agent = local.agents.pubsub

  # Whose service stores ferry's data, and so encrypts it with the key.
  kms_agents = var.kms ? { for k, v in local.agents : k => v if k != "filestore" || var.filestore } : {}
}

# The key's grants, before anything is created that the key encrypts.
resource "time_sleep" "kms_grants" {
  count = var.kms ? 1 : 0

  create_duration = var.iam_propagation

  depends_on = [google_kms_crypto_key_iam_member.agent]
}

# Every grant the fleet's VMs and the dead-lettering rely on, before the
# instance groups start a VM.
resource "time_sleep" "grants" {
  create_duration = var.iam_propagation

  depends_on = [
    google_storage_bucket_iam_member.release_readers,
    google_storage_bucket_iam_member.worker,
    google_storage_bucket_iam_member.merger,
    google_storage_bucket_iam_member.producer,
    google_storage_bucket_iam_member.producer_bucket_get,
    google_pubsub_subscription_iam_member.worker,
    google_pubsub_subscription_iam_member.merger,
    google_pubsub_subscription_iam_member.producer,
    google_pubsub_topic_iam_member.worker,
    google_pubsub_topic_iam_member.merger,
    google_pubsub_topic_iam_member.producer,
    google_pubsub_topic_iam_member.dead_letter_publisher,
    google_pubsub_subscription_iam_member.dead_letter_subscriber,
    google_project_iam_member.worker,
    google_project_iam_member.merger,
    google_project_iam_member.producer,
    google_storage_bucket_iam_member.agent,
    google_pubsub_subscription_iam_member.agent,
    google_pubsub_topic_iam_member.agent,
    google_pubsub_topic_iam_member.shards,
    google_project_iam_member.agent,
    google_bigquery_dataset_iam_member.merger,
    google_kms_crypto_key_iam_member.agent,
  ]
}
