# ferry on Google Cloud: the bucket, the topics, the service accounts, the
# worker, merger and producer instance groups and the BigQuery dataset.
# One service_<bin>.tf per binary; the shared parts in the files beside it.
# `make tf-check` checks this configuration against the Go code.

terraform {
  required_version = ">= 1.9"

  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 6.0, < 8.0"
    }
    # time_sleep: the waits for IAM to propagate (agents.tf).
    time = {
      source  = "hashicorp/time"
      version = ">= 0.9"
    }
  }
}

provider "google" {
  project        = var.project
  region         = var.region
  default_labels = local.labels
}

data "google_project" "project" {
  project_id = var.project
}

resource "google_project_service" "services" {
  for_each = toset(concat(
    [
      "bigquery.googleapis.com",
      "cloudresourcemanager.googleapis.com",
      "compute.googleapis.com",
      "iam.googleapis.com",
      "iamcredentials.googleapis.com",
      "logging.googleapis.com",
      "monitoring.googleapis.com",
      "pubsub.googleapis.com",
      "serviceusage.googleapis.com",
      "storage.googleapis.com",
    ],
    var.kms ? ["cloudkms.googleapis.com"] : [],
    var.filestore ? ["file.googleapis.com"] : [],
  ))

  project            = var.project
  service            = each.value
  disable_on_destroy = false
}

locals {
  labels = merge({ app = "ferry", managed-by = "terraform" }, var.labels)

  # Where the services listen for /healthz (FERRY_HTTP_ADDR).
  health_port = 8080

  # The variables every service reads (config.PubSub, Log, HTTP, Buckets).
  common_env = {
    FERRY_PROJECT                    = var.project
    FERRY_REQUESTS_TOPIC             = local.topics.requests
    FERRY_REQUESTS_SUBSCRIPTION      = local.subscriptions.requests.name
    FERRY_REQUESTS_DEAD_LETTER_TOPIC = local.dead_letter_topics.requests
    FERRY_CHUNKS_TOPIC               = local.topics.chunks
    FERRY_CHUNKS_SUBSCRIPTION        = local.subscriptions.chunks.name
    FERRY_CHUNKS_DEAD_LETTER_TOPIC   = local.dead_letter_topics.chunks
    FERRY_EVENTS_TOPIC               = local.topics.events
    FERRY_EVENTS_SUBSCRIPTION        = local.subscriptions.events.name
    FERRY_EVENTS_DEAD_LETTER_TOPIC   = local.dead_letter_topics.events
    FERRY_CONTROL_TOPIC              = local.topics.control
    FERRY_CONTROL_SUBSCRIPTION       = local.subscriptions.control.name
    FERRY_CONTROL_DEAD_LETTER_TOPIC  = local.dead_letter_topics.control
    FERRY_DONE_TOPIC                 = local.topics.done
    FERRY_LOG_LEVEL                  = var.log_level
    FERRY_LOG_FORMAT                 = "json"
    FERRY_HTTP_ADDR                  = ":${local.health_port}"
    FERRY_BUCKETS                    = google_storage_bucket.data.name
    FERRY_KMS_KEY                    = local.kms_key
  }

  # What the producer and the workers read about the transport.
  spool_env = {
    FERRY_TRANSPORT = var.transport
    FERRY_SPOOL_DIR = var.transport == "spool" ? "/mnt/ferry/spool" : "/var/lib/ferry/spool"
  }
}
