# Workers: receive chunk messages, upload each chunk with its CRC32C, verify,
# announce it on the events topic. Autoscaled on the chunks backlog.

resource "google_service_account" "worker" {
  account_id   = "ferry-worker"
  display_name = "ferry worker"

  depends_on = [google_project_service.services]
}

locals {
  # Spot VMs get 30 s from preemption to power-off, on-demand VMs 90 s
  # (Compute Engine, "Running shutdown scripts"): in-flight uploads get most
  # of it, systemd a little more before it kills the process.
  worker_grace_seconds = var.spot ? 25 : 80

  worker = {
    binary               = "worker"
    args                 = ""
    machine_type         = var.worker_machine_type
    service_account      = google_service_account.worker.email
    spot                 = var.spot
    surge                = true
    autoscaled           = true
    instances            = var.min_workers
    max_instances        = var.max_workers
    nfs                  = var.transport == "spool"
    source_share         = ""
    stop_timeout_seconds = local.worker_grace_seconds + 3
    env = merge(local.common_env, local.spool_env, {
      FERRY_WORKER_CONCURRENCY    = var.worker_concurrency
      FERRY_MAX_DELIVERY_ATTEMPTS = local.subscriptions.chunks.max_delivery_attempts
      FERRY_SHUTDOWN_GRACE        = "${local.worker_grace_seconds}s"
    })
  }
}

resource "google_pubsub_subscription_iam_member" "worker" {
  subscription = google_pubsub_subscription.subscription["chunks"].name
  role         = "roles/pubsub.subscriber"
  member       = google_service_account.worker.member
}

# Chunk-uploaded and failed events; a chunk that failed for good is copied
# to the chunks dead-letter topic.
resource "google_pubsub_topic_iam_member" "worker" {
  for_each = {
    events      = google_pubsub_topic.topic["events"].name
    chunks_dead = google_pubsub_topic.dead_letter["chunks"].name
  }

  topic  = each.value
  role   = "roles/pubsub.publisher"
  member = google_service_account.worker.member
}

# Chunk objects and one-chunk final objects (replaced with overwrite).
resource "google_storage_bucket_iam_member" "worker" {
  bucket = google_storage_bucket.data.name
  role   = "roles/storage.objectUser"
  member = google_service_account.worker.member
}

resource "google_project_iam_member" "worker" {
  for_each = toset(local.vm_project_roles)

  project = var.project
  role    = each.value
  member  = google_service_account.worker.member
}

# Scale on the backlog: one worker per worker_backlog_per_instance chunk
# messages waiting, between min_workers and max_workers.
resource "google_compute_region_autoscaler" "worker" {
  name   = "ferry-worker"
  region = var.region
  target = google_compute_region_instance_group_manager.service["worker"].id

  autoscaling_policy {
    min_replicas    = var.min_workers
    max_replicas    = var.max_workers
    cooldown_period = 120

    metric {
      name                       = "pubsub.googleapis.com/subscription/num_undelivered_messages"
      filter                     = "resource.type = pubsub_subscription AND resource.labels.subscription_id = \"${local.subscriptions.chunks.name}\""
      single_instance_assignment = var.worker_backlog_per_instance
    }
  }
}
