# Optional: a Filestore share for FERRY_TRANSPORT=spool across VMs. The
# producer writes compressed chunks to /mnt/ferry/spool; workers read and
# remove them there. With transport = pubsub nothing is shared.

resource "google_filestore_instance" "spool" {
  count = var.filestore ? 1 : 0

  name     = "ferry-spool"
  location = contains(["REGIONAL", "ENTERPRISE"], var.filestore_tier) ? var.region : (var.filestore_zone != "" ? var.filestore_zone : "${var.region}-b")
  tier     = var.filestore_tier
  labels   = local.labels
  # Filestore takes a key on its ZONAL, REGIONAL and ENTERPRISE tiers.
  kms_key_name = var.kms ? local.kms_key : null

  file_shares {
    name        = "ferry"
    capacity_gb = var.filestore_capacity_gb
  }

  networks {
    network = google_compute_network.ferry.name
    modes   = ["MODE_IPV4"]
  }

  lifecycle {
    precondition {
      condition     = !var.kms || contains(["ZONAL", "REGIONAL", "ENTERPRISE"], var.filestore_tier)
      error_message = "kms = true needs a filestore_tier that takes a CMEK key (ZONAL, REGIONAL or ENTERPRISE); ${var.filestore_tier} does not, and an organization that requires CMEK refuses it."
    }
  }

  depends_on = [time_sleep.kms_grants, google_project_service.services]
}

locals {
  # host:/share for the start-up script's NFS mount; empty without Filestore.
  nfs_share = var.filestore ? "${google_filestore_instance.spool[0].networks[0].ip_addresses[0]}:/ferry" : ""
}
