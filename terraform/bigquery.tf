# The benchmark rows: one per transfer in `transfers`, one per chunk in
# `chunks`. The schemas are the files in schema/ (benchrow.Row and
# benchrow.ChunkRow; tf-check keeps them the same). The merger appends with
# load jobs.

resource "google_bigquery_dataset" "ferry" {
  dataset_id = var.bq_dataset
  location   = local.bq_location
  labels     = local.labels

  # Tables created in the dataset take its key.
  dynamic "default_encryption_configuration" {
    for_each = var.kms ? [local.kms_key] : []
    content {
      kms_key_name = default_encryption_configuration.value
    }
  }

  lifecycle {
    # A load job reads the bucket from the dataset's location: BigQuery
    # refuses a bucket in another region unless the dataset is in the US
    # multi-region, or in the multi-region that holds the bucket's region.
    precondition {
      condition     = local.bq_reads_bucket
      error_message = "bq_location ${local.bq_location} cannot load from the bucket in ${var.region}: use the bucket's region, US, or the multi-region that holds it (EU for europe-*)."
    }
    # A CMEK key must be in the dataset's location; the key ring is in the region.
    precondition {
      condition     = !var.kms || lower(local.bq_location) == lower(var.region)
      error_message = "kms = true puts the key in ${var.region}, and BigQuery wants a dataset's key in the dataset's location (${local.bq_location}): leave bq_location empty or set it to the region."
    }
  }

  depends_on = [time_sleep.kms_grants, google_project_service.services]
}

locals {
  bq_location = var.bq_location != "" ? var.bq_location : var.region
  bq_reads_bucket = anytrue([
    lower(local.bq_location) == lower(var.region),
    upper(local.bq_location) == "US",
    upper(local.bq_location) == "EU" && startswith(var.region, "europe-"),
  ])
}

resource "google_bigquery_table" "transfers" {
  dataset_id          = google_bigquery_dataset.ferry.dataset_id
  table_id            = "transfers"
  schema              = file("${path.module}/../schema/transfers.json")
  clustering          = ["method"]
  deletion_protection = true
  labels              = local.labels

  time_partitioning {
    type  = "DAY"
    field = "started_at"
  }
}

# A chunk row has no method: chunks cluster by transfer, the column every
# question about stragglers starts from.
resource "google_bigquery_table" "chunks" {
  dataset_id          = google_bigquery_dataset.ferry.dataset_id
  table_id            = "chunks"
  schema              = file("${path.module}/../schema/chunks.json")
  clustering          = ["transfer_id"]
  deletion_protection = true
  labels              = local.labels

  time_partitioning {
    type  = "DAY"
    field = "uploaded_at"
  }
}
