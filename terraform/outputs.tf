output "bucket" {
  value       = google_storage_bucket.data.name
  description = "The bucket ferry writes to."
}

output "release_location" {
  value       = local.release_location
  description = "Where `make release` uploads the binaries (RELEASE_LOCATION)."
}

output "submitter_service_account" {
  value       = google_service_account.submitter.email
  description = "Service account an on-premises `producer submit` impersonates."
}

output "submitter_env" {
  value       = join("\n", [for k, v in local.submitter_env : "${k}=${v}"])
  description = "The .env file of an on-premises submitter (FERRY_ENV_FILE)."
}

output "done_subscriptions" {
  value       = [for s in local.done_subscriptions : s.name]
  description = "Subscriptions batch systems read done events from (deduplicate by transfer_id)."
}

output "bigquery_dataset" {
  value       = google_bigquery_dataset.ferry.dataset_id
  description = "Dataset of the transfers and chunks tables."
}

output "peak_vcpus" {
  value = {
    on_demand = local.peak_vcpus.on_demand
    spot      = local.peak_vcpus.spot
  }
  description = "The most vCPUs the fleet runs at once in the region (every group at its largest, during a rolling update): the CPUS (on_demand) and PREEMPTIBLE_CPUS (spot) quotas must allow them (docs/deploying.md)."
}
