# Topics and subscriptions: the names and settings the code uses
# (config.PubSub's defaults and localstack.Topology; tf-check keeps them
# equal). Every subscription dead-letters into a topic of its own, and every
# dead-letter topic has a subscription that keeps what arrives there.

locals {
  topics = {
    requests = "ferry-requests"
    chunks   = "ferry-chunks"
    events   = "ferry-events"
    control  = "ferry-control"
    done     = "ferry-done"
    shards   = "ferry-shards"
  }

  dead_letter_topics = {
    requests = "ferry-requests-dead"
    chunks   = "ferry-chunks-dead"
    events   = "ferry-events-dead"
    control  = "ferry-control-dead"
    done     = "ferry-done-dead"
    shards   = "ferry-shards-dead"
  }

  # A short ack deadline brings a crashed worker's message back soon; the
  # client extends it while a handler runs.
  subscriptions = {
    requests = { name = "ferry-requests-producer", topic = "requests", ack_deadline_seconds = 60, max_delivery_attempts = 5 }
    chunks   = { name = "ferry-chunks-workers", topic = "chunks", ack_deadline_seconds = 20, max_delivery_attempts = var.max_delivery_attempts }
    events   = { name = "ferry-events-merger", topic = "events", ack_deadline_seconds = 20, max_delivery_attempts = 10 }
    control  = { name = "ferry-control-merger", topic = "control", ack_deadline_seconds = 20, max_delivery_attempts = 10 }
    # The pool's agents (ferry agent): a killed agent's shard is claimed
    # again once its lease lapses.
    shards = { name = "ferry-shards-agents", topic = "shards", ack_deadline_seconds = 20, max_delivery_attempts = 5 }
  }

  # Batch systems read done events here.
  done_subscriptions = {
    for name in var.done_subscriptions : name => { name = name, topic = "done", ack_deadline_seconds = 60, max_delivery_attempts = 5 }
  }

  # Kept a week: a backlog outlives a weekend with no worker.
  message_retention = "604800s"
}

resource "google_pubsub_topic" "topic" {
  for_each = local.topics

  name         = each.value
  labels       = local.labels
  kms_key_name = var.kms ? local.kms_key : null

  depends_on = [time_sleep.kms_grants, google_project_service.services]
}

resource "google_pubsub_topic" "dead_letter" {
  for_each = local.dead_letter_topics

  name                       = each.value
  message_retention_duration = local.message_retention
  labels                     = local.labels
  kms_key_name               = var.kms ? local.kms_key : null

  depends_on = [time_sleep.kms_grants, google_project_service.services]
}

# What reaches a dead-letter topic stays here for operators to inspect
# (localstack.DeadLetterSubscription names it).
resource "google_pubsub_subscription" "dead_letter" {
  for_each = local.dead_letter_topics

  name                       = "${each.value}-sub"
  topic                      = google_pubsub_topic.dead_letter[each.key].id
  ack_deadline_seconds       = 60
  message_retention_duration = local.message_retention
  labels                     = local.labels

  expiration_policy {
    ttl = ""
  }
}

resource "google_pubsub_subscription" "subscription" {
  for_each = merge(local.subscriptions, local.done_subscriptions)

  name                       = each.value.name
  topic                      = google_pubsub_topic.topic[each.value.topic].id
  ack_deadline_seconds       = each.value.ack_deadline_seconds
  message_retention_duration = local.message_retention
  labels                     = local.labels

  expiration_policy {
    ttl = ""
  }

  retry_policy {
    minimum_backoff = "1s"
    maximum_backoff = "60s"
  }

  dead_letter_policy {
    dead_letter_topic     = google_pubsub_topic.dead_letter[each.value.topic].id
    max_delivery_attempts = each.value.max_delivery_attempts
  }
}

# Pub/Sub's service agent moves a message that ran out of attempts: it must
# publish to the dead-letter topics and acknowledge on the subscriptions.
resource "google_pubsub_topic_iam_member" "dead_letter_publisher" {
  for_each = local.dead_letter_topics

  topic  = google_pubsub_topic.dead_letter[each.key].name
  role   = "roles/pubsub.publisher"
  member = local.pubsub_agent
}

resource "google_pubsub_subscription_iam_member" "dead_letter_subscriber" {
  for_each = google_pubsub_subscription.subscription

  subscription = each.value.name
  role         = "roles/pubsub.subscriber"
  member       = local.pubsub_agent
}
