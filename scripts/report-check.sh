#!/usr/bin/env bash
# make report-check: build cmd/report, write its HTML page from sample
# benchmark rows (or from the results files given as arguments), and take a
# headless Chromium screenshot of it to look at. Installs Debian's chromium
# with apt-get when it is missing. Prints the PNG's path.
#   scripts/report-check.sh                      # sample rows
#   scripts/report-check.sh .run/results.ndjson  # real rows
# REPORT_DIR (default $RUN_DIR/report, i.e. .run/report) holds the output;
# REPORT_WINDOW (default 1280,3000) is the screenshot's width,height.
set -euo pipefail

RUN=${RUN_DIR:-.run}
OUT=${REPORT_DIR:-$RUN/report}
BIN=${BIN:-bin}
mkdir -p "$OUT" "$BIN"
OUT=$(cd "$OUT" && pwd)

go build -o "$BIN/report" ./cmd/report

# Sample rows: three runs of each method on each tier, made-up figures for
# the local stack, jittered deterministically, plus one failed transfer. The
# page's title says they are a sample.
sample_rows() {
  awk -v seed=42 '
  BEGIN {
    srand(seed)
    split("small medium large", tiers, " ")
    size["small"] = 10000000; size["medium"] = 200000000; size["large"] = 1200000000
    #          method          codec level workers ratio compress upload (MB/s)
    n = split("ferry-1w zstd 3 1 2.87 75 40|" \
              "ferry-2w zstd 3 2 2.87 140 70|" \
              "ferry-2w-zstd1 zstd 1 2 2.55 190 70|" \
              "ferry-2w-gzip gzip 6 2 2.93 55 70|" \
              "ferry-2w-raw none 0 2 1.00 900 70|" \
              "gcloud none 0 1 1.00 0 60", spec, "|")
    t0 = 1764450000  # 2025-11-29T21:00:00Z
    id = 0
    for (i = 1; i <= n; i++) {
      split(spec[i], f, " ")
      for (ti = 1; ti <= 3; ti++) {
        tier = tiers[ti]; sz = size[tier]
        for (run = 1; run <= 3; run++) {
          j = 0.92 + 0.16 * rand()
          wire = int(sz / f[5])
          chunks = int((wire + 33554431) / 33554432)
          if (f[1] == "gcloud") {
            c = 0; up = int(wire / (f[7] * 1000) * j); co = 0; ve = 0
            total = up + int(1100 * j)
          } else {
            c = int(sz / (f[6] * 1000) * j)
            up = int(wire / (f[7] * 1000) * (0.92 + 0.16 * rand()))
            co = int((120 + 6 * chunks) * j); ve = int((40 + wire / 4000000) * j)
            hi = (c > up) ? c : up; lo = (c > up) ? up : c
            total = int(250 * j + hi + 0.15 * lo + co + ve)
          }
          id++; t0 += 60
          started = strftime("%Y-%m-%dT%H:%M:%SZ", t0, 1)
          finished = strftime("%Y-%m-%dT%H:%M:%SZ", t0 + int(total / 1000) + 1, 1)
          printf "{\"transfer_id\":\"sample-%03d\",\"method\":\"%s\",\"tier\":\"%s\",\"source\":\"%s_upload.csv\",", id, f[1], tier, tier
          printf "\"destination\":\"gs://ferry-local/sample/%03d\",\"files\":1,\"size_bytes\":%d,\"wire_bytes\":%d,\"ratio\":%.4f,", id, sz, wire, sz / wire
          printf "\"codec\":\"%s\",\"level\":%d,\"chunk_size\":33554432,\"chunks\":%d,\"workers\":%d,", f[2], f[3], chunks, f[4]
          printf "\"compress_ms\":%d,\"upload_ms\":%d,\"compose_ms\":%d,\"verify_ms\":%d,\"total_ms\":%d,", c, up, co, ve, total
          printf "\"raw_mbps\":%.3f,\"wire_mbps\":%.3f,\"status\":\"ok\",", sz / 1000 / total, (up > 0 ? wire / 1000 / up : 0)
          printf "\"started_at\":\"%s\",\"finished_at\":\"%s\",\"ferry_version\":\"sample\"}\n", started, finished
        }
      }
    }
    started = strftime("%Y-%m-%dT%H:%M:%SZ", t0 + 60, 1)
    printf "{\"transfer_id\":\"sample-failed\",\"method\":\"ferry-1w\",\"tier\":\"large\",\"source\":\"large_upload.csv\",\"destination\":\"gs://ferry-local/sample/failed\",\"files\":1,\"size_bytes\":1200000000,\"wire_bytes\":0,\"ratio\":0,\"codec\":\"zstd\",\"level\":3,\"chunk_size\":33554432,\"chunks\":0,\"workers\":1,\"compress_ms\":0,\"upload_ms\":0,\"compose_ms\":0,\"verify_ms\":0,\"total_ms\":0,\"raw_mbps\":0,\"wire_mbps\":0,\"status\":\"failed\",\"error\":\"upload chunk 17 of large_upload.csv: googleapi: Error 503: backend unavailable\",\"started_at\":\"%s\",\"finished_at\":\"%s\",\"ferry_version\":\"sample\"}\n", started, started
  }'
}

if [ $# -gt 0 ]; then
  inputs=("$@")
  title="ferry benchmark report"
else
  sample="$OUT/sample.ndjson"
  sample_rows > "$sample"
  inputs=("$sample")
  title="SAMPLE: made-up rows, not measured (ferry benchmark report)"
fi

page="$OUT/report.html"
png="$OUT/report.png"
"$BIN/report" --html "$page" --title "$title" "${inputs[@]}" > "$OUT/tables.txt"

if ! command -v chromium >/dev/null; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    echo "report-check: installing chromium (apt-get)" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "report-check: chromium is missing; install it (apt-get install chromium) and run again" >&2
    exit 1
  fi
fi

profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
rm -f "$png"
if ! chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$profile" --window-size="${REPORT_WINDOW:-1280,3000}" --screenshot="$png" \
    "file://$page" > "$OUT/chromium.log" 2>&1 || [ ! -s "$png" ]; then
  echo "report-check: chromium took no screenshot; see $OUT/chromium.log" >&2
  exit 1
fi
echo "report-check: tables in $OUT/tables.txt, page $page" >&2
echo "$png"
