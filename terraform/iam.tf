# Custom roles where no predefined role is narrow enough. Each service's own
# bindings are in its service_<bin>.tf; nothing here grants a basic role, and
# no service account key is ever created (the VMs use their attached
# account, submitters impersonate theirs).

resource "google_project_iam_custom_role" "bucket_get" {
  role_id     = "ferryBucketGet"
  title       = "ferry: read bucket metadata"
  description = "What a producer needs to check that the destination bucket exists."
  permissions = ["storage.buckets.get"]

  depends_on = [google_project_service.services]
}

resource "google_project_iam_custom_role" "objects_list" {
  role_id     = "ferryObjectsList"
  title       = "ferry: list objects"
  description = "What producer submit -n and --skip-unchanged need to find the final objects that exist."
  permissions = ["storage.objects.list"]

  depends_on = [google_project_service.services]
}
