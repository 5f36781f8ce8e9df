# Every service runs the same way: a Debian VM whose start-up script
# (startup.sh) fetches the release binary named in metadata, checks its
# SHA-256 and runs it as a systemd unit with the FERRY_* variables from
# metadata. Shielded VM, no external IP, a regional managed instance group
# that replaces a VM whose /healthz stops answering.

locals {
  services = merge({
    worker   = local.worker
    merger   = local.merger
    producer = local.producer
  }, local.pool_services)

  # vCPUs of a predefined machine type (n2-standard-8: 8); 2 for the
  # shared-core and small ones (e2-medium).
  vcpus = { for k, v in local.services : k => try(tonumber(regex("-([0-9]+)$", v.machine_type)[0]), 2) }
  # Each group at its largest, plus the VMs a rolling update adds.
  peak_vms = { for k, v in local.services : k => v.max_instances + (v.surge ? 3 : 0) }
  peak_vcpus = {
    on_demand = sum([for k, v in local.services : v.spot ? 0 : local.vcpus[k] * local.peak_vms[k]])
    spot      = sum([for k, v in local.services : v.spot ? local.vcpus[k] * local.peak_vms[k] : 0])
  }

  # Roles a VM's account needs to ship its logs and metrics through the Ops
  # Agent, when the image carries one.
  vm_project_roles = ["roles/logging.logWriter", "roles/monitoring.metricWriter"]
}

resource "google_compute_health_check" "healthz" {
  name                = "ferry-healthz"
  check_interval_sec  = 10
  timeout_sec         = 5
  healthy_threshold   = 2
  unhealthy_threshold = 3

  http_health_check {
    port         = local.health_port
    request_path = "/healthz"
  }

  depends_on = [google_project_service.services]
}

resource "google_compute_instance_template" "service" {
  for_each = local.services

  name_prefix  = "ferry-${each.key}-"
  machine_type = each.value.machine_type
  tags         = ["ferry"]
  labels       = merge(local.labels, { service = each.key })

  metadata = {
    startup-script         = file("${path.module}/startup.sh")
    ferry-binary           = each.value.binary
    ferry-args             = each.value.args
    ferry-release          = local.release_url
    ferry-env              = join("\n", [for k, v in each.value.env : "${k}=${v}"])
    ferry-stop-timeout     = each.value.stop_timeout_seconds
    ferry-nfs              = each.value.nfs ? local.nfs_share : ""
    ferry-source-share     = each.value.source_share
    ferry-source-dir       = each.value.source_share != "" ? var.source_roots[0] : ""
    ferry-ops-agent        = var.ops_agent ? "true" : "false"
    ferry-metrics-port     = local.health_port
    block-project-ssh-keys = "TRUE"
    enable-oslogin         = "TRUE"
  }

  disk {
    source_image = var.image
    boot         = true
    auto_delete  = true
    disk_type    = "pd-balanced"
    disk_size_gb = 20

    dynamic "disk_encryption_key" {
      for_each = var.kms ? [local.kms_key] : []
      content {
        kms_key_self_link = disk_encryption_key.value
      }
    }
  }

  # No access_config: no external IP.
  network_interface {
    subnetwork = google_compute_subnetwork.ferry.id
  }

  service_account {
    email  = each.value.service_account
    scopes = ["cloud-platform"]
  }

  shielded_instance_config {
    enable_secure_boot          = true
    enable_vtpm                 = true
    enable_integrity_monitoring = true
  }

  scheduling {
    provisioning_model          = each.value.spot ? "SPOT" : "STANDARD"
    preemptible                 = each.value.spot
    automatic_restart           = !each.value.spot
    on_host_maintenance         = each.value.spot ? "TERMINATE" : "MIGRATE"
    instance_termination_action = each.value.spot ? "DELETE" : null
  }

  lifecycle {
    create_before_destroy = true
  }

  depends_on = [time_sleep.kms_grants]
}

resource "google_compute_region_instance_group_manager" "service" {
  for_each = local.services

  name               = "ferry-${each.key}"
  base_instance_name = "ferry-${each.key}"
  region             = var.region
  target_size        = each.value.autoscaled ? null : each.value.instances

  version {
    instance_template = google_compute_instance_template.service[each.key].id
  }

  auto_healing_policies {
    health_check      = google_compute_health_check.healthz.id
    initial_delay_sec = 300
  }

  # A regional group takes 0 or at least one VM per zone (3) for each.
  # Workers and mergers start the new VMs before they stop old ones (two
  # mergers at once are safe); the producer, the largest VM, is replaced in
  # place, so that an update never needs more vCPUs than the group's own
  # (a new project's regional CPU quota is small; outputs.peak_vcpus).
  update_policy {
    type                  = "PROACTIVE"
    minimal_action        = "REPLACE"
    max_surge_fixed       = each.value.surge ? 3 : 0
    max_unavailable_fixed = each.value.surge ? 0 : 3
  }

  lifecycle {
    precondition {
      condition     = var.transport == "pubsub" || var.filestore
      error_message = "transport = spool needs filestore = true: producer and workers must share the spool."
    }
    precondition {
      condition     = !var.pool || var.source_share != ""
      error_message = "pool = true needs source_share (HOST:/EXPORT): every agent reads the sources from the share, mounted where the producer mounts it."
    }
    # Without NAT a VM reaches Google's APIs only: neither Debian's mirrors
    # (nfs-common) nor, on a stock image, the Ops Agent's repository.
    precondition {
      condition     = var.nat || var.image_has_packages || (!var.ops_agent && !(each.value.nfs && var.filestore) && each.value.source_share == "")
      error_message = "nat = false: the ${each.key} VMs could not install ${join(" and ", compact([var.ops_agent ? "the Ops Agent" : "", (each.value.nfs && var.filestore) || each.value.source_share != "" ? "nfs-common" : ""]))} at boot. Use an image that has them and set image_has_packages = true, or turn nat on."
    }
  }

  # The VMs need their roles, propagated, before they start.
  depends_on = [time_sleep.grants]
}
