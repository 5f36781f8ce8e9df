# The fleet's network: no VM has an external IP. Google APIs (Pub/Sub, GCS,
# BigQuery) are reached through Private Google Access; Cloud NAT is only for
# OS updates.

resource "google_compute_network" "ferry" {
  name                    = "ferry"
  auto_create_subnetworks = false

  depends_on = [google_project_service.services]
}

resource "google_compute_subnetwork" "ferry" {
  name                     = "ferry-${var.region}"
  region                   = var.region
  network                  = google_compute_network.ferry.id
  ip_cidr_range            = var.subnet_cidr
  private_ip_google_access = true
}

resource "google_compute_router" "ferry" {
  count = var.nat ? 1 : 0

  name    = "ferry-${var.region}"
  region  = var.region
  network = google_compute_network.ferry.id
}

resource "google_compute_router_nat" "ferry" {
  count = var.nat ? 1 : 0

  name                               = "ferry-${var.region}"
  router                             = google_compute_router.ferry[0].name
  region                             = var.region
  nat_ip_allocate_option             = "AUTO_ONLY"
  source_subnetwork_ip_ranges_to_nat = "ALL_SUBNETWORKS_ALL_IP_RANGES"
}

# Health checks come from Google's probers; nothing else may reach the VMs.
resource "google_compute_firewall" "health_checks" {
  name          = "ferry-allow-health-checks"
  network       = google_compute_network.ferry.id
  direction     = "INGRESS"
  source_ranges = ["35.191.0.0/16", "130.211.0.0/22"]
  target_tags   = ["ferry"]

  allow {
    protocol = "tcp"
    ports    = [tostring(local.health_port)]
  }
}

# SSH only through Identity-Aware Proxy's TCP forwarding.
resource "google_compute_firewall" "iap_ssh" {
  name          = "ferry-allow-iap-ssh"
  network       = google_compute_network.ferry.id
  direction     = "INGRESS"
  source_ranges = ["35.235.240.0/20"]
  target_tags   = ["ferry"]

  allow {
    protocol = "tcp"
    ports    = ["22"]
  }
}
