# `producer serve`: runs the transfer requests batch systems publish to the
# requests topic, reading sources under source_roots on its own VM.

resource "google_service_account" "producer" {
  account_id   = "ferry-producer"
  display_name = "ferry producer (serve)"

  depends_on = [google_project_service.services]
}

locals {
  producer = {
    binary          = "producer"
    args            = "serve"
    machine_type    = var.producer_machine_type
    service_account = google_service_account.producer.email
    spot            = false
    surge           = false
    autoscaled      = false
    instances       = var.producers
    max_instances   = var.producers
    nfs             = var.transport == "spool"
    # The walker of a pooled transfer stats what the agents read.
    source_share         = var.source_share
    stop_timeout_seconds = 60
    env = merge(local.common_env, local.spool_env, {
      FERRY_SOURCE_ROOTS      = join(",", var.source_roots)
      FERRY_BQ_LOAD_DATASETS  = join(",", var.bq_load_datasets)
      FERRY_PRODUCER_REQUESTS = var.producer_requests
    })
  }
}

resource "google_pubsub_subscription_iam_member" "producer" {
  subscription = google_pubsub_subscription.subscription["requests"].name
  role         = "roles/pubsub.subscriber"
  member       = google_service_account.producer.member
}

# Chunk messages, sealed and failed events (on the control topic: the
# workers' events topic is the workers' alone), the done event of a request
# that cannot start, and malformed requests copied to their dead-letter
# topic.
resource "google_pubsub_topic_iam_member" "producer" {
  for_each = {
    chunks        = google_pubsub_topic.topic["chunks"].name
    control       = google_pubsub_topic.topic["control"].name
    done          = google_pubsub_topic.topic["done"].name
    requests_dead = google_pubsub_topic.dead_letter["requests"].name
  }

  topic  = each.value
  role   = "roles/pubsub.publisher"
  member = google_service_account.producer.member
}

# Manifests (rewritten when a request is resubmitted) and done markers.
resource "google_storage_bucket_iam_member" "producer" {
  bucket = google_storage_bucket.data.name
  role   = "roles/storage.objectUser"
  member = google_service_account.producer.member
}

# The producer checks that the destination bucket exists before it starts.
resource "google_storage_bucket_iam_member" "producer_bucket_get" {
  bucket = google_storage_bucket.data.name
  role   = google_project_iam_custom_role.bucket_get.id
  member = google_service_account.producer.member
}

resource "google_project_iam_member" "producer" {
  for_each = toset(local.vm_project_roles)

  project = var.project
  role    = each.value
  member  = google_service_account.producer.member
}
