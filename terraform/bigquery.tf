# The benchmark rows: one per transfer in `transfers`, one per chunk in
# `chunks`. The schemas are the files in schema/ (result.Row and
# result.ChunkRow; tf-check keeps them the same). The merger appends with
# load jobs.

resource "google_bigquery_dataset" "ferry" {
  dataset_id = var.bq_dataset
  location   = var.bq_location != "" ? var.bq_location : var.region
  labels     = local.labels

  depends_on = [google_project_service.services]
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
