# Custom roles where no predefined role is narrow enough. Each service's own
# bindings are in its service_<bin>.tf; nothing here grants a basic role, and
# no service account key is ever created (the VMs use their attached
# account, submitters impersonate theirs).

resource "google_project_iam_custom_role" "bucket_get" {
  role_id     = "ferryBucketGet"
  title       = "ferry: read bucket metadata"
  description = "What a producer needs to check that the destination bucket exists."
  permissions = ["storage.buckets.get"]
}

resource "google_project_iam_custom_role" "submitter_wait" {
  role_id     = "ferrySubmitterWait"
  title       = "ferry: temporary subscriptions of a submitter"
  description = "producer submit --wait and its progress bar create, read and delete a subscription of their own."
  permissions = [
    "pubsub.subscriptions.consume",
    "pubsub.subscriptions.create",
    "pubsub.subscriptions.delete",
    "pubsub.subscriptions.get",
  ]
}
