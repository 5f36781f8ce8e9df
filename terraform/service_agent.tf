# The pool (pool = true): `ferry agent` on every VM of an autoscaled group
# that mounts source_share read-only where the producer mounts it. An agent
# claims a shard of a pooled transfer from ferry-shards-agents, reads,
# compresses and uploads its files itself, and reports its chunks on the
# events topic as a worker does: no chunk byte crosses Pub/Sub. Scaled on the
# shards backlog. Every agent writes a heartbeat under .ferry/agents/, which
# `producer doctor --pool` reads.

resource "google_service_account" "agent" {
  count = var.pool ? 1 : 0

  account_id   = "ferry-agent"
  display_name = "ferry agent (the pool)"

  depends_on = [google_project_service.services]
}

locals {
  # A shard an agent has not sent when it is told to stop is left to
  # another agent (its claim lapses); a little more than that for systemd.
  agent_grace_seconds = var.spot ? 25 : 80

  agent = {
    # The release's ferry for this platform: `ferry agent` is one of its
    # commands.
    binary               = "ferry-linux-amd64"
    args                 = "agent"
    machine_type         = var.agent_machine_type
    service_account      = one(google_service_account.agent[*].email)
    spot                 = var.spot
    surge                = true
    autoscaled           = true
    instances            = var.min_agents
    max_instances        = var.max_agents
    nfs                  = false
    source_share         = var.source_share
    stop_timeout_seconds = local.agent_grace_seconds + 3
    env = merge(local.common_env, {
      FERRY_SOURCE_ROOTS          = join(",", var.source_roots)
      FERRY_MAX_DELIVERY_ATTEMPTS = local.subscriptions.shards.max_delivery_attempts
      FERRY_SHUTDOWN_GRACE        = "${local.agent_grace_seconds}s"
    })
  }

  # The pool's group, in compute.tf's services, only with pool = true.
  pool_services = { for k, v in { agent = local.agent } : k => v if var.pool }
}

resource "google_pubsub_subscription_iam_member" "agent" {
  count = var.pool ? 1 : 0

  subscription = google_pubsub_subscription.subscription["shards"].name
  role         = "roles/pubsub.subscriber"
  member       = google_service_account.agent[0].member
}

# Chunk-uploaded events (the merger's, as a worker's), a transfer's failure
# when no agent can read a file (control), a shard this agent cannot read
# published again once its deliveries ran out while other agents have not
# tried it (shards), and a shard that failed for good copied to the shards
# dead-letter topic.
resource "google_pubsub_topic_iam_member" "agent" {
  for_each = { for k, v in {
    events      = google_pubsub_topic.topic["events"].name
    control     = google_pubsub_topic.topic["control"].name
    shards      = google_pubsub_topic.topic["shards"].name
    shards_dead = google_pubsub_topic.dead_letter["shards"].name
  } : k => v if var.pool }

  topic  = each.value
  role   = "roles/pubsub.publisher"
  member = google_service_account.agent[0].member
}

# Chunk objects, one-chunk final objects, shard claims and done objects,
# heartbeats.
resource "google_storage_bucket_iam_member" "agent" {
  count = var.pool ? 1 : 0

  bucket = google_storage_bucket.data.name
  role   = "roles/storage.objectUser"
  member = google_service_account.agent[0].member
}

resource "google_project_iam_member" "agent" {
  for_each = var.pool ? toset(local.vm_project_roles) : toset([])

  project = var.project
  role    = each.value
  member  = google_service_account.agent[0].member
}

# Who publishes a pooled transfer's shards: producer serve, and on-premises
# submitters (`producer submit --pool`).
resource "google_pubsub_topic_iam_member" "shards" {
  for_each = { for k, v in {
    producer  = google_service_account.producer.member
    submitter = google_service_account.submitter.member
  } : k => v if var.pool }

  topic  = google_pubsub_topic.topic["shards"].name
  role   = "roles/pubsub.publisher"
  member = each.value
}

# Scale on the backlog: one agent per agent_backlog_per_instance shards
# waiting, between min_agents and max_agents.
resource "google_compute_region_autoscaler" "agent" {
  count = var.pool ? 1 : 0

  name   = "ferry-agent"
  region = var.region
  target = google_compute_region_instance_group_manager.service["agent"].id

  autoscaling_policy {
    min_replicas    = var.min_agents
    max_replicas    = var.max_agents
    cooldown_period = 120

    metric {
      name                       = "pubsub.googleapis.com/subscription/num_undelivered_messages"
      filter                     = "resource.type = pubsub_subscription AND resource.labels.subscription_id = \"${local.subscriptions.shards.name}\""
      single_instance_assignment = var.agent_backlog_per_instance
    }
  }
}
