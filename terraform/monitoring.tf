# What operators see of a running fleet: a dashboard and the alerts of
# docs/operations.md. The services' own metrics reach Cloud Monitoring
# through the Ops Agent's Prometheus receiver (startup.sh), as
# prometheus.googleapis.com/<name>/<kind> on resource prometheus_target;
# Pub/Sub and the instance groups report on their own.

locals {
  dead_letter_subscriptions = [for k, v in local.dead_letter_topics : "${v}-sub"]

  # A Cloud Monitoring filter matching any of names on label.
  any_of = {
    for what, names in {
      dead     = local.dead_letter_subscriptions
      fleet    = [for s in values(local.subscriptions) : s.name]
      backlogs = [local.subscriptions.chunks.name, local.subscriptions.events.name, local.subscriptions.control.name, local.subscriptions.requests.name]
    } : what => join(" OR ", [for n in names : "resource.label.subscription_id = \"${n}\""])
  }

  prometheus = "resource.type = \"prometheus_target\" AND metric.type = \"prometheus.googleapis.com"

  dashboard_tiles = concat([
    { title = "Backlog per subscription (undelivered messages)", filter = "resource.type = \"pubsub_subscription\" AND metric.type = \"pubsub.googleapis.com/subscription/num_undelivered_messages\" AND (${local.any_of.fleet})", aligner = "ALIGN_MEAN", group = ["resource.label.subscription_id"] },
    { title = "Oldest unacked message per subscription (s)", filter = "resource.type = \"pubsub_subscription\" AND metric.type = \"pubsub.googleapis.com/subscription/oldest_unacked_message_age\" AND (${local.any_of.fleet})", aligner = "ALIGN_MAX", group = ["resource.label.subscription_id"] },
    { title = "Chunks published per second", filter = "${local.prometheus}/ferry_chunks_published_total/counter\"", aligner = "ALIGN_RATE", group = [] },
    { title = "Bytes uploaded per second", filter = "${local.prometheus}/ferry_bytes_uploaded_total/counter\"", aligner = "ALIGN_RATE", group = [] },
    { title = "Upload latency (s, 95th percentile)", filter = "${local.prometheus}/ferry_upload_seconds/histogram\"", aligner = "ALIGN_DELTA", group = [], reducer = "REDUCE_PERCENTILE_95" },
    { title = "Transfers finished per second, by status", filter = "${local.prometheus}/ferry_transfers_total/counter\"", aligner = "ALIGN_RATE", group = ["metric.label.status"] },
    { title = "GCS slow-downs per second (429, 503 to uploads)", filter = "${local.prometheus}/ferry_gcs_throttled_total/counter\"", aligner = "ALIGN_RATE", group = [] },
    { title = "Workers' write pace since GCS pushed back (writes/s, fleet)", filter = "${local.prometheus}/ferry_gcs_write_rate_limit/gauge\"", aligner = "ALIGN_MEAN", group = [], reducer = "REDUCE_SUM" },
    { title = "Dead-letter depth", filter = "resource.type = \"pubsub_subscription\" AND metric.type = \"pubsub.googleapis.com/subscription/num_undelivered_messages\" AND (${local.any_of.dead})", aligner = "ALIGN_MAX", group = ["resource.label.subscription_id"] },
    { title = "Workers (autoscaler maximum: ${var.max_workers})", filter = "resource.type = \"instance_group\" AND metric.type = \"compute.googleapis.com/instance_group/size\" AND resource.label.instance_group_name = \"ferry-worker\"", aligner = "ALIGN_MAX", group = [] },
    ], [for tile in [
      { title = "Agents of the pool (autoscaler maximum: ${var.max_agents})", filter = "resource.type = \"instance_group\" AND metric.type = \"compute.googleapis.com/instance_group/size\" AND resource.label.instance_group_name = \"ferry-agent\"", aligner = "ALIGN_MAX", group = [] },
  ] : tile if var.pool])
}

resource "google_monitoring_dashboard" "ferry" {
  dashboard_json = jsonencode({
    displayName = "ferry"
    gridLayout = {
      columns = 2
      widgets = [for tile in local.dashboard_tiles : {
        title = tile.title
        xyChart = {
          dataSets = [{
            plotType = "LINE"
            timeSeriesQuery = {
              timeSeriesFilter = {
                filter = tile.filter
                aggregation = {
                  alignmentPeriod    = "60s"
                  perSeriesAligner   = tile.aligner
                  crossSeriesReducer = lookup(tile, "reducer", "REDUCE_SUM")
                  groupByFields      = tile.group
                }
              }
            }
          }]
        }
      }]
    }
  })

  depends_on = [google_project_service.services]
}

# The merger's "transfer failed" log line (internal/merger), as the Ops
# Agent ships it (startup.sh: log ferry, JSON parsed). Unlike the services'
# Prometheus metrics, it exists from the moment it is created.
resource "google_logging_metric" "failed_transfers" {
  name   = "ferry-transfers-failed"
  filter = "resource.type=\"gce_instance\" AND log_id(\"ferry\") AND jsonPayload.message=\"transfer failed\""

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"
  }

  depends_on = [google_project_service.services]
}

# Cloud Monitoring learns of a new log-based metric a little after it is
# created; a policy on it created at once can be refused.
resource "time_sleep" "metric_descriptors" {
  create_duration = "60s"

  depends_on = [google_logging_metric.failed_transfers]
}

# Each alert's runbook is in docs/operations.md, under the heading its
# documentation names.
locals {
  alerts = {
    dead_letter = {
      name      = "ferry: a message was dead-lettered"
      condition = "undelivered messages on a dead-letter subscription"
      filter    = "resource.type = \"pubsub_subscription\" AND metric.type = \"pubsub.googleapis.com/subscription/num_undelivered_messages\" AND (${local.any_of.dead})"
      threshold = 0
      duration  = "60s"
      period    = "60s"
      aligner   = "ALIGN_MAX"
      reducer   = null
      doc       = "A message ran out of delivery attempts and waits on a dead-letter subscription. Runbook: docs/operations.md, \"Dead-lettered messages\"."
    }
    backlog_age = {
      name      = "ferry: work waits longer than ${var.alert_backlog_age_minutes} minutes"
      condition = "oldest unacked message on a fleet subscription"
      filter    = "resource.type = \"pubsub_subscription\" AND metric.type = \"pubsub.googleapis.com/subscription/oldest_unacked_message_age\" AND (${local.any_of.backlogs})"
      threshold = var.alert_backlog_age_minutes * 60
      duration  = "300s"
      period    = "60s"
      aligner   = "ALIGN_MAX"
      reducer   = null
      doc       = "The oldest message on a subscription of the fleet has waited longer than the threshold: nothing is taking it, or too little. Runbook: docs/operations.md, \"Backlog growing\"."
    }
    # From a log-based metric, which this configuration creates: Cloud
    # Monitoring refuses a policy on a metric that does not exist yet, and
    # the services' Prometheus metrics exist only once the fleet has
    # written them.
    failed_transfers = {
      name      = "ferry: transfers are failing"
      condition = "failed transfers in the last 5 minutes"
      filter    = "resource.type = \"gce_instance\" AND metric.type = \"logging.googleapis.com/user/${google_logging_metric.failed_transfers.name}\""
      threshold = 0
      duration  = "0s"
      period    = "300s"
      aligner   = "ALIGN_SUM"
      reducer   = "REDUCE_SUM"
      doc       = "A transfer ended failed. Its done event, row and `producer status ID` say why. Runbook: docs/operations.md, \"Failed transfers\"."
    }
    workers_at_max = {
      name      = "ferry: the worker group is at its maximum"
      condition = "ferry-worker at max_workers for 30 minutes"
      filter    = "resource.type = \"instance_group\" AND metric.type = \"compute.googleapis.com/instance_group/size\" AND resource.label.instance_group_name = \"ferry-worker\""
      threshold = var.max_workers - 0.5
      duration  = "1800s"
      period    = "60s"
      aligner   = "ALIGN_MIN"
      reducer   = null
      doc       = "The autoscaler has run max_workers workers for half an hour: the backlog wants more. Runbook: docs/operations.md, \"Workers at their maximum\"."
    }
  }
}

resource "google_monitoring_alert_policy" "alert" {
  for_each = local.alerts

  display_name          = each.value.name
  combiner              = "OR"
  notification_channels = var.notification_channels

  conditions {
    display_name = each.value.condition
    condition_threshold {
      filter          = each.value.filter
      comparison      = "COMPARISON_GT"
      threshold_value = each.value.threshold
      duration        = each.value.duration
      aggregations {
        alignment_period     = each.value.period
        per_series_aligner   = each.value.aligner
        cross_series_reducer = each.value.reducer
      }
    }
  }

  documentation {
    content   = each.value.doc
    mime_type = "text/markdown"
  }

  depends_on = [time_sleep.metric_descriptors, google_project_service.services]
}
