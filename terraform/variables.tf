# The settings of one ferry deployment. Only project, bucket and
# release_version have no default; terraform.tfvars.example shows a start.

variable "project" {
  type        = string
  description = "Google Cloud project that holds the whole fleet (topics, bucket, VMs, dataset)."
}

variable "region" {
  type        = string
  default     = "us-central1"
  description = "Region of the bucket, the subnetwork, the instance groups and the dataset."
}

variable "bucket" {
  type        = string
  description = "Name of the bucket ferry writes to (created here). The fleet may write to no other (FERRY_BUCKETS)."
}

variable "labels" {
  type        = map(string)
  default     = {}
  description = "Labels added to the common ones (app = ferry, managed-by = terraform) on every resource that takes labels."
}

variable "transport" {
  type        = string
  default     = "pubsub"
  description = "How chunk bytes reach the workers (FERRY_TRANSPORT): pubsub (inside each message; nothing shared) or spool (a Filestore share mounted by producer and workers)."

  validation {
    condition     = contains(["pubsub", "spool"], var.transport)
    error_message = "The transport must be pubsub or spool."
  }
}

variable "filestore" {
  type        = bool
  default     = false
  description = "Create a Filestore share and mount it on the producer and the workers at /mnt/ferry (required by transport = spool)."
}

variable "filestore_tier" {
  type        = string
  default     = "BASIC_SSD"
  description = "Filestore tier of the spool share."
}

variable "filestore_zone" {
  type        = string
  default     = ""
  description = "Zone of a BASIC_HDD, BASIC_SSD or ZONAL spool share; empty: the region's zone b. REGIONAL and ENTERPRISE shares live in the region."
}

variable "filestore_capacity_gb" {
  type        = number
  default     = 2560
  description = "Size of the spool share in GB (BASIC_SSD starts at 2560)."
}

variable "kms" {
  type        = bool
  default     = false
  description = "Encrypt every object ferry writes with a Cloud KMS key created here (FERRY_KMS_KEY); the Cloud Storage service agent gets encrypter/decrypter on it."
}

variable "release_location" {
  type        = string
  default     = ""
  description = "gs://BUCKET/PATH where `make release` put the binaries (one folder per version). Empty: a bucket named <bucket>-releases is created here, and releases go under gs://<bucket>-releases/ferry."

  validation {
    condition     = var.release_location == "" || can(regex("^gs://[a-z0-9][a-z0-9._-]+[a-z0-9](/.*)?$", var.release_location))
    error_message = "The release location must be gs://BUCKET or gs://BUCKET/PATH."
  }
}

variable "release_version" {
  type        = string
  description = "Version folder under release_location the VMs run (what `make release` printed, e.g. v0.3.0)."
}

variable "image" {
  type        = string
  default     = "debian-cloud/debian-12"
  description = "Boot image of every VM: Debian 12 (or an image built from it) with systemd and curl. startup.sh installs nfs-common and the Ops Agent where they are missing (see image_has_packages for nat = false)."
}

variable "image_has_packages" {
  type        = bool
  default     = false
  description = "The image already has what startup.sh would install (nfs-common for the spool share; the Ops Agent with ops_agent): needed with nat = false, where a VM cannot reach package repositories."
}

variable "ops_agent" {
  type        = bool
  default     = true
  description = "The Ops Agent on every VM (startup.sh installs it from Google's repository the way Google documents, when the image lacks it): the services' JSON logs reach Cloud Logging with their severity, and /metrics is scraped into Cloud Monitoring, which the dashboard and alerts read."
}

variable "spot" {
  type        = bool
  default     = true
  description = "Run workers as Spot VMs (preempted with 30 s notice; their chunks are redelivered) instead of on-demand."
}

variable "worker_machine_type" {
  type        = string
  default     = "n2-standard-4"
  description = "Machine type of a worker."
}

variable "min_workers" {
  type        = number
  default     = 1
  description = "Fewest workers the autoscaler keeps."
}

variable "max_workers" {
  type        = number
  default     = 20
  description = "Most workers the autoscaler starts."

  validation {
    condition     = var.max_workers >= 1
    error_message = "max_workers must be at least 1."
  }
}

variable "worker_backlog_per_instance" {
  type        = number
  default     = 32
  description = "Undelivered chunk messages per worker the autoscaler aims at (num_undelivered_messages / workers)."
}

variable "worker_concurrency" {
  type        = number
  default     = 8
  description = "Chunks one worker uploads at once (FERRY_WORKER_CONCURRENCY)."
}

variable "max_delivery_attempts" {
  type        = number
  default     = 5
  description = "Dead-letter threshold of the chunks subscription, and the worker's FERRY_MAX_DELIVERY_ATTEMPTS: the two must be equal."

  validation {
    condition     = var.max_delivery_attempts >= 5 && var.max_delivery_attempts <= 100
    error_message = "Pub/Sub allows 5 to 100 delivery attempts."
  }
}

variable "merger_machine_type" {
  type        = string
  default     = "e2-standard-2"
  description = "Machine type of a merger (it composes; GCS does the byte work)."
}

variable "mergers" {
  type        = number
  default     = 1
  description = "Mergers running at once. Two or more are safe: one final object and one row per transfer; done events may repeat."
}

variable "producer_machine_type" {
  type        = string
  default     = "n2-standard-8"
  description = "Machine type of `producer serve` (compression is CPU-bound: one zstd encoder per core)."
}

variable "producers" {
  type        = number
  default     = 1
  description = "`producer serve` VMs (0 when only on-premises submitters transfer)."
}

variable "producer_requests" {
  type        = number
  default     = 1
  description = "Requests one `producer serve` runs at once (FERRY_PRODUCER_REQUESTS)."
}

variable "source_roots" {
  type        = list(string)
  default     = ["/srv/ferry/sources"]
  description = "Directories `producer serve` and the pool's agents may read (FERRY_SOURCE_ROOTS); source_share is mounted at the first."

  validation {
    condition     = length(var.source_roots) >= 1 && alltrue([for r in var.source_roots : can(regex("^(/[A-Za-z0-9_][A-Za-z0-9_.-]*)+$", r))])
    error_message = "source_roots: want one or more absolute paths of letters, digits, '_', '.' and '-' (each component starting with a letter, digit or '_')."
  }
}

variable "source_share" {
  type        = string
  default     = ""
  description = "HOST:/EXPORT of the NFS share that holds the sources, mounted read-only at source_roots[0] on the producer and on every agent; empty: nothing is mounted (the image or the operator provides the sources). Required with pool = true."

  validation {
    condition     = var.source_share == "" || can(regex("^[A-Za-z0-9][A-Za-z0-9.-]*:/[A-Za-z0-9_./-]*$", var.source_share))
    error_message = "source_share: want HOST:/EXPORT (for example 10.0.0.2:/data), or empty."
  }
}

variable "pool" {
  type        = bool
  default     = false
  description = "Run the pool: `ferry agent` on an autoscaled group that mounts source_share, reads, compresses and uploads the shards of pooled transfers (`producer submit --pool`, \"pool\": true in a request) itself. No chunk byte crosses Pub/Sub."
}

variable "agent_machine_type" {
  type        = string
  default     = "n2-standard-8"
  description = "Machine type of an agent (it reads and compresses: one zstd encoder per core)."
}

variable "min_agents" {
  type        = number
  default     = 1
  description = "Fewest agents the autoscaler keeps with pool = true (0 lets the pool scale to nothing between transfers; a pooled transfer then waits for the first agent)."
}

variable "max_agents" {
  type        = number
  default     = 20
  description = "Most agents the autoscaler starts with pool = true."

  validation {
    condition     = var.max_agents >= 1 && var.max_agents >= var.min_agents
    error_message = "max_agents must be at least 1 and at least min_agents."
  }
}

variable "agent_backlog_per_instance" {
  type        = number
  default     = 2
  description = "Undelivered shards per agent the autoscaler aims at (num_undelivered_messages / agents). An agent sends one shard at a time (FERRY_AGENT_SHARDS), of at most 250 files or 64 MiB."
}

variable "staging_retention_days" {
  type        = number
  default     = 3
  description = "Age after which the lifecycle rule deletes staging objects under .ferry/ (a backstop against orphans; keep it above any BigQuery outage you expect to ride out). It must be longer than transfer_timeout, or the rule deletes the chunks and manifest of a transfer still running."

  validation {
    condition     = var.staging_retention_days >= 1 && floor(var.staging_retention_days) == var.staging_retention_days
    error_message = "staging_retention_days must be a whole number of days, at least 1: 0 would delete in-flight chunks and manifests at once."
  }
}

variable "done_retention_days" {
  type        = number
  default     = 30
  description = "How long done markers under .ferry-done/ are kept (FERRY_DONE_RETENTION, and the lifecycle rule of that prefix)."

  validation {
    condition     = var.done_retention_days >= 1
    error_message = "Done markers must be kept at least one day."
  }
}

variable "soft_delete_days" {
  type        = number
  default     = 7
  description = "Soft-delete retention of the bucket: Cloud Storage's default, 7 days, protects the data ferry writes against an accidental delete. Most staging parts are hard-deleted by their final compose and never kept; docs/capacity.md says what the rest costs."

  validation {
    condition     = var.soft_delete_days >= 7 && var.soft_delete_days <= 90
    error_message = "soft_delete_days must be 7 to 90 days: ferry does not turn off the protection of your data."
  }
}

variable "iam_propagation" {
  type        = string
  default     = "120s"
  description = "How long what uses a new IAM grant waits for it (time_sleep): IAM applies most grants within two minutes and some within seven. On a 403 in a first apply, apply again."

  validation {
    condition     = can(regex("^[0-9]+[sm]$", var.iam_propagation))
    error_message = "iam_propagation must be a duration in seconds or minutes, such as 120s or 3m."
  }
}

variable "done_subscriptions" {
  type        = list(string)
  default     = ["ferry-done-batch"]
  description = "Subscriptions on the done topic for batch systems (each deduplicates done events by transfer_id)."
}

variable "bq_dataset" {
  type        = string
  default     = "ferry"
  description = "BigQuery dataset of the transfers and chunks tables (FERRY_BQ_DATASET)."
}

variable "bq_location" {
  type        = string
  default     = ""
  description = "Location of the dataset; empty: the region."
}

variable "transfer_timeout" {
  type        = string
  default     = "6h"
  description = "FERRY_TRANSFER_TIMEOUT: a transfer with no progress for this long ends failed (hours, minutes and seconds, e.g. 6h or 90m)."

  validation {
    condition     = can(regex("^([0-9]+h)?([0-9]+m)?([0-9]+s)?$", var.transfer_timeout)) && var.transfer_timeout != ""
    error_message = "transfer_timeout must be a duration of hours, minutes and seconds, such as 6h, 90m or 1h30m."
  }
}

variable "log_level" {
  type        = string
  default     = "info"
  description = "FERRY_LOG_LEVEL of every service."
}

variable "submitter_impersonators" {
  type        = list(string)
  default     = []
  description = "Principals (user:…, group:…, principal://… of a workload identity pool) that may act as the submitter service account for on-premises `producer submit`."
}

variable "subnet_cidr" {
  type        = string
  default     = "10.20.0.0/20"
  description = "Range of the fleet's subnetwork."
}

variable "nat" {
  type        = bool
  default     = true
  description = "Cloud NAT for OS updates; Google APIs are reached through Private Google Access either way."
}

variable "notification_channels" {
  type        = list(string)
  default     = []
  description = "Cloud Monitoring notification channels (projects/P/notificationChannels/ID) the alerts notify; empty: the alerts only show in the console."
}

variable "alert_backlog_age_minutes" {
  type        = number
  default     = 60
  description = "The backlog alert fires when the oldest unacked message of a fleet subscription is older than this for 5 minutes. An hour: long past a normal transfer's queueing, short of the FERRY_TRANSFER_TIMEOUT that would fail it."

  validation {
    condition     = var.alert_backlog_age_minutes >= 5
    error_message = "alert_backlog_age_minutes must be at least 5."
  }
}

variable "bq_load_datasets" {
  type        = list(string)
  default     = []
  description = "PROJECT.DATASET that transfers may load Parquet parts into (producer submit --bq-table; FERRY_BQ_LOAD_DATASETS). The merger gets BigQuery Data Editor on each; the datasets must exist, in the location of bq_location, and are not managed here."

  validation {
    condition     = alltrue([for d in var.bq_load_datasets : can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]\\.[A-Za-z0-9_]+$", d))])
    error_message = "bq_load_datasets entries must be PROJECT.DATASET."
  }
}
