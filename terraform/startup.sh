#!/bin/bash
# ferry's VM start-up script (instance metadata startup-script), run as root
# at every boot. It reads the instance metadata Terraform set:
#
#   ferry-binary        worker, merger, producer, or ferry-linux-amd64 (the
#                       pool's agents run `ferry agent`)
#   ferry-args          arguments (producer: serve; ferry: agent)
#   ferry-release       gs://BUCKET/PATH/VERSION holding the binaries and SHA256SUMS
#   ferry-env           FERRY_* settings, one KEY=VALUE a line
#   ferry-stop-timeout  seconds systemd waits after SIGTERM before it kills
#   ferry-nfs           HOST:/SHARE mounted at /mnt/ferry (the spool), or empty
#   ferry-source-share  HOST:/EXPORT holding the sources, mounted read-only at
#   ferry-source-dir    this directory (source_roots[0]), or both empty
#   ferry-ops-agent     true: the Ops Agent (installed from Google's repository
#                       the way Google documents, where the image lacks it)
#                       ships the service's JSON logs with their severity and
#                       scrapes its /metrics
#   ferry-metrics-port  where the service serves /metrics (FERRY_HTTP_ADDR)
#
# On a first deploy the release may not be uploaded yet (terraform creates
# the release bucket; `make release` fills it): the script then waits,
# looking again with backoff up to every 5 minutes and saying so on the
# serial console. A step that cannot reach its source (no NAT: no package
# mirror; the agent's repository) is tried a bounded number of times and
# then said in one line. Until ferry.service runs, ferry-startup.service
# answers the health port: /healthz 200, so autohealing does not recreate a
# VM that waits or cannot start (a new one would fail the same way), and
# everything else 503 with what the script is doing or why it stopped.
#
# downloads the binary with the VM's own service account, refuses it unless
# its SHA-256 is the one SHA256SUMS lists, and runs it as the systemd unit
# ferry.service. Nothing on the VM is configured by hand.
#
# FERRY_METADATA_URL, FERRY_STORAGE_URL and FERRY_ROOT exist for the test
# (internal/tfcheck): with FERRY_ROOT set, files are written under it and the
# commands that change the system are only recorded in $FERRY_ROOT/commands.
set -euo pipefail

metadata=${FERRY_METADATA_URL:-http://metadata.google.internal/computeMetadata/v1}
storage=${FERRY_STORAGE_URL:-https://storage.googleapis.com}
root=${FERRY_ROOT:-}

log() { echo "ferry-startup: $*" >&2; }
die() { log "$*"; exit 1; }

md() { curl -fsS --retry 10 --retry-connrefused --max-time 30 -H 'Metadata-Flavor: Google' "$metadata/$1"; }
attr() { md "instance/attributes/$1" || die "instance metadata $1 is missing"; }

# run executes a command that changes the system, or records it under test.
run() {
  if [[ -n $root ]]; then
    echo "$*" >>"$root/commands"
  else
    "$@"
  fi
}

bin=$(attr ferry-binary)
case $bin in
worker | merger | producer | ferry-linux-amd64) ;;
*) die "ferry-binary=$bin: want worker, merger, producer or ferry-linux-amd64" ;;
esac
args=$(md instance/attributes/ferry-args || true)
release=$(attr ferry-release)
[[ $release =~ ^gs://([a-z0-9][a-z0-9._-]*[a-z0-9])/(.+[^/])/?$ ]] || die "ferry-release=$release: want gs://BUCKET/PATH"
release_bucket=${BASH_REMATCH[1]}
release_path=${BASH_REMATCH[2]}
stop_timeout=$(attr ferry-stop-timeout)
[[ $stop_timeout =~ ^[0-9]+$ ]] || die "ferry-stop-timeout=$stop_timeout: want seconds"
nfs=$(md instance/attributes/ferry-nfs || true)
source_share=$(md instance/attributes/ferry-source-share || true)
source_dir=$(md instance/attributes/ferry-source-dir || true)
if [[ -n $source_share || -n $source_dir ]]; then
  [[ $source_share =~ ^[A-Za-z0-9][A-Za-z0-9.-]*:/[A-Za-z0-9_./-]*$ ]] || die "ferry-source-share=$source_share: want HOST:/EXPORT"
  [[ $source_dir =~ ^(/[A-Za-z0-9_][A-Za-z0-9_.-]*)+$ ]] || die "ferry-source-dir=$source_dir: want an absolute path of letters, digits, '_', '.' and '-'"
fi
env_file=$(attr ferry-env)
while IFS= read -r line; do
  [[ -z $line || $line =~ ^FERRY_[A-Z0-9_]+= ]] || die "ferry-env line \"$line\": want FERRY_NAME=VALUE"
done <<<"$env_file"

# token prints a fresh access token of the VM's account. The metadata
# server hands out one that lives at least 5 more minutes, so a token is
# asked for at each attempt and never outlives a wait.
token() {
  local t
  t=$(md instance/service-accounts/default/token | sed -n 's/.*"access_token" *: *"\([^"]*\)".*/\1/p')
  [[ -n $t ]] || die "no access token from the metadata server"
  printf '%s' "$t"
}

metrics_port=$(md instance/attributes/ferry-metrics-port || echo 8080)
[[ $metrics_port =~ ^[0-9]+$ ]] || die "ferry-metrics-port=$metrics_port: want a port"

# status says on the health port, and in the serial console, what the
# script is doing; fail says why it stopped, there and with exit 1.
mkdir -p "$root/opt/ferry" "$root/etc/ferry" "$root/etc/systemd/system" "$root/var/lib/ferry"
status() { printf '%s\n' "$*" >"$root/etc/ferry/startup-status"; }
fail() {
  status "ferry did not start: $*"
  die "FAILED: $*"
}
cat >"$root/opt/ferry/startup-status" <<'STATUS'
#!/bin/sh
# One HTTP exchange on stdin/stdout (systemd-socket-activate --inetd):
# /healthz 200, so that autohealing leaves the VM alone; anything else 503
# with what startup.sh is doing or why it stopped.
IFS=' ' read -r _ path _ || exit 0
cr=$(printf '\r')
while IFS= read -r line && [ "${line%"$cr"}" != "" ]; do :; done
case $path in
/healthz) code="200 OK" ;;
*) code="503 Service Unavailable" ;;
esac
printf 'HTTP/1.0 %s\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n' "$code"
cat /etc/ferry/startup-status
STATUS
chmod 0755 "$root/opt/ferry/startup-status"
cat >"$root/etc/systemd/system/ferry-startup.service" <<UNIT
[Unit]
Description=ferry start-up status on the health port, until ferry.service takes it
Conflicts=ferry.service

[Service]
ExecStart=/usr/bin/systemd-socket-activate --inetd --accept --listen=$metrics_port /opt/ferry/startup-status
DynamicUser=yes
UNIT
status "ferry is starting: fetching release $release"
# At a reboot ferry.service starts on its own; the status answer is for a VM
# where it does not run yet.
if [[ -n $root ]] || ! systemctl is-active --quiet ferry.service; then
  run systemctl daemon-reload
  run systemctl start ferry-startup.service
fi

# fetch OBJECT FILE downloads gs://$release_bucket/$release_path/OBJECT. A
# missing object (404: the release is not uploaded yet) is waited for.
fetch() {
  local object="$release_path/$1" code delay=${FERRY_RELEASE_RETRY_SECONDS:-5}
  while :; do
    code=$(curl -sS --retry 10 --retry-connrefused --max-time 300 -H "Authorization: Bearer $(token)" -w '%{http_code}' \
      -o "$2" "$storage/storage/v1/b/$release_bucket/o/${object//\//%2F}?alt=media") || code=000
    case $code in
    200) return 0 ;;
    404)
      log "gs://$release_bucket/$object is not there yet: upload release ${release_path##*/} with make release (RELEASE_LOCATION=gs://$release_bucket/${release_path%/*}); looking again in ${delay}s"
      status "ferry is starting: waiting for gs://$release_bucket/$object (make release)"
      ;;
    *) fail "download gs://$release_bucket/$object failed (HTTP $code)" ;;
    esac
    sleep "$delay"
    delay=$((delay * 2 > 300 ? 300 : delay * 2))
  done
}

# retry WHAT CMD... runs a step that reaches outside the VM a bounded number
# of times (FERRY_STARTUP_ATTEMPTS, 3), waiting longer each time.
retry() {
  local what=$1 n=1 attempts=${FERRY_STARTUP_ATTEMPTS:-3} delay=${FERRY_STARTUP_RETRY_SECONDS:-10}
  shift
  until "$@"; do
    if ((n >= attempts)); then
      return 1
    fi
    log "$what failed (attempt $n of $attempts); trying again in ${delay}s"
    sleep "$delay"
    n=$((n + 1))
    delay=$((delay * 2))
  done
}

# apt_install PACKAGE... with short network timeouts: without NAT no mirror
# answers, and each attempt should say so within a minute.
apt_install() {
  run timeout 600 env DEBIAN_FRONTEND=noninteractive apt-get -q -o Acquire::Retries=1 -o Acquire::http::Timeout=20 update &&
    run timeout 600 env DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o Acquire::Retries=1 -o Acquire::http::Timeout=20 "$@"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fetch SHA256SUMS "$tmp/SHA256SUMS"
fetch "$bin" "$tmp/$bin"
want=$(awk -v f="$bin" '$2 == f || $2 == "*" f { print $1 }' "$tmp/SHA256SUMS")
[[ -n $want ]] || fail "SHA256SUMS of $release lists no $bin"
got=$(sha256sum "$tmp/$bin" | cut -d' ' -f1)
[[ $got == "$want" ]] || fail "$bin from $release has SHA-256 $got, SHA256SUMS says $want: refusing it"
install -m 0755 "$tmp/$bin" "$root/opt/ferry/$bin"
printf '%s\n' "$env_file" >"$root/etc/ferry/env"
chmod 0644 "$root/etc/ferry/env"

# One fixed uid and gid on every VM, so that files on a shared spool agree
# (--user-group alone would take the next free system gid).
if ! getent group ferry >/dev/null || [[ -n $root ]]; then
  run groupadd --system --gid 2000 ferry
fi
if ! getent passwd ferry >/dev/null || [[ -n $root ]]; then
  run useradd --system --uid 2000 --gid 2000 --home-dir /var/lib/ferry --shell /usr/sbin/nologin ferry
fi
run chown ferry:ferry /var/lib/ferry

# need_nfs WHAT installs the NFS client that stock Debian lacks.
need_nfs() {
  if [[ -n $root ]] || ! command -v mount.nfs >/dev/null; then
    log "installing nfs-common for $1"
    status "ferry is starting: installing nfs-common for $1"
    retry "installing nfs-common" apt_install nfs-common ||
      fail "cannot install nfs-common from the image's package mirror (with nat = false use an image that has it and set image_has_packages = true): $1 cannot be mounted, so $bin does not run"
  fi
}

# mount_nfs WHAT WHERE OPTIONS ABOUT mounts the NFS share WHAT at WHERE
# with a mount unit, not a mount: after a reboot systemd mounts the share
# before it starts ferry.service, and never starts the service without it
# (RequiresMountsFor). systemd names the unit after the path: '/' becomes
# '-', and a '-' of the path \x2d.
mount_nfs() {
  local what=$1 where=$2 options=$3 about=$4 unit
  need_nfs "$about $what"
  unit=${where#/}
  unit=${unit//-/\\x2d}
  unit=${unit//\//-}.mount
  mkdir -p "$root$where"
  cat >"$root/etc/systemd/system/$unit" <<UNIT
[Unit]
Description=ferry $about $what
Wants=network-online.target
After=network-online.target

[Mount]
What=$what
Where=$where
Type=nfs
Options=$options
TimeoutSec=120

[Install]
WantedBy=remote-fs.target
UNIT
  run systemctl daemon-reload
  run systemctl enable "$unit"
  run systemctl start "$unit" || fail "cannot mount $about $what at $where (systemctl status $unit)"
  mount_deps="$mount_deps
RequiresMountsFor=$where"
}

rw_paths=/var/lib/ferry
mount_deps=""
if [[ -n $nfs ]]; then
  [[ $nfs =~ ^[0-9.]+:/[A-Za-z0-9_-]+$ ]] || fail "ferry-nfs=$nfs: want IP:/SHARE"
  # Without the share the producer would spool to the boot disk.
  mount_nfs "$nfs" /mnt/ferry rw,hard,noatime,_netdev "the spool share"
  run install -d -o ferry -g ferry /mnt/ferry/spool
  rw_paths="$rw_paths /mnt/ferry"
fi
if [[ -n $source_share ]]; then
  # Read-only: the sources are read, never written; hard, so that a share
  # that stops answering makes reads wait (an agent leaves a shard it cannot
  # send in time to another) rather than fail as if files were gone.
  mount_nfs "$source_share" "$source_dir" ro,hard,noatime,_netdev "the source share"
fi

cat >"$root/etc/systemd/system/ferry.service" <<UNIT
[Unit]
Description=ferry $bin
Wants=network-online.target
After=network-online.target remote-fs.target
$mount_deps

[Service]
User=ferry
Group=ferry
EnvironmentFile=/etc/ferry/env
WorkingDirectory=/var/lib/ferry
ExecStart=/opt/ferry/$bin $args
# The JSON log lines go to a file the Ops Agent reads (and to nowhere else).
StandardOutput=append:/var/log/ferry/ferry.log
StandardError=append:/var/log/ferry/ferry.log
Restart=always
RestartSec=5
# SIGTERM starts the service's own orderly shutdown (FERRY_SHUTDOWN_GRACE
# for a worker's uploads); systemd kills only after ferry-stop-timeout.
KillSignal=SIGTERM
TimeoutStopSec=$stop_timeout
NoNewPrivileges=yes
ProtectSystem=strict
ProtectHome=read-only
PrivateTmp=yes
ReadWritePaths=$rw_paths /var/log/ferry
LimitNOFILE=65536

[Install]
WantedBy=multi-user.target
UNIT

mkdir -p "$root/var/log/ferry" "$root/etc/logrotate.d"
run chown ferry:ferry /var/log/ferry
cat >"$root/etc/logrotate.d/ferry" <<'ROTATE'
/var/log/ferry/ferry.log {
  daily
  rotate 7
  maxsize 100M
  compress
  missingok
  copytruncate
}
ROTATE

ops_agent=$(md instance/attributes/ferry-ops-agent || true)
agent_script=${FERRY_OPS_AGENT_SCRIPT_URL:-https://dl.google.com/cloudagents/add-google-cloud-ops-agent-repo.sh}
# install_agent: Google's documented install: its script adds the agent's
# package repository and installs the agent.
install_agent() {
  curl -fsS --max-time 60 -o "$tmp/add-ops-agent-repo.sh" "$agent_script" &&
    run timeout 600 bash "$tmp/add-ops-agent-repo.sh" --also-install
}
if [[ $ops_agent == true ]]; then
  if [[ -n $root ]] || ! dpkg-query -W -f '${Status}' google-cloud-ops-agent 2>/dev/null | grep -q 'install ok installed'; then
    log "installing the Ops Agent"
    status "ferry is starting: installing the Ops Agent"
    retry "installing the Ops Agent" install_agent ||
      log "FAILED: cannot install the Ops Agent from $agent_script (no NAT? with nat = false use an image that has it and set image_has_packages = true): $bin runs, but its logs stay in /var/log/ferry/ferry.log on this VM, /metrics is not scraped, and the dashboard's ferry tiles and the failed-transfers alert see nothing of it"
  fi
  mkdir -p "$root/etc/google-cloud-ops-agent"
  cat >"$root/etc/google-cloud-ops-agent/config.yaml" <<AGENT
# Written by ferry's startup.sh: the service's JSON log lines, with their
# severity, to Cloud Logging; its Prometheus metrics to Cloud Monitoring
# (prometheus.googleapis.com/ferry_.../...).
logging:
  receivers:
    ferry:
      type: files
      include_paths: [/var/log/ferry/ferry.log]
  processors:
    ferry_json:
      type: parse_json
    ferry_severity:
      type: modify_fields
      fields:
        severity:
          move_from: jsonPayload.severity
  service:
    pipelines:
      ferry:
        receivers: [ferry]
        processors: [ferry_json, ferry_severity]
metrics:
  receivers:
    ferry:
      type: prometheus
      config:
        scrape_configs:
          - job_name: ferry
            scrape_interval: 30s
            metrics_path: /metrics
            static_configs:
              - targets: ["localhost:$metrics_port"]
  service:
    pipelines:
      ferry:
        receivers: [ferry]
AGENT
  run systemctl restart google-cloud-ops-agent || log "could not restart the Ops Agent"
fi

run systemctl daemon-reload
run systemctl enable ferry.service
status "ferry is starting: $bin"
# ferry.service conflicts with ferry-startup.service: starting it stops the
# status answer and frees the health port.
run systemctl restart ferry.service
log "running $bin ($release)"
