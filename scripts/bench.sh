#!/usr/bin/env bash
# make bench: measure ferry beside its peers, in the same run on the same
# machine. Prints figures and ratios; asserts nothing about time.
#   1. compression: the producer's pipeline vs zstd -3 -T2 on the same file;
#   2. end to end on the local stack: producer submit --wait with 1 and 2
#      workers vs gcloud storage cp of the same file to the same
#      fake-gcs-server.
# BENCH_TIER=small|medium|large picks the file (default medium).
set -euo pipefail

TIER=${BENCH_TIER:-medium}
RUN=${RUN_DIR:-.run}/bench
BIN=${BIN:-bin}
BUCKET=ferry-local
source "$(dirname "$0")/stack.sh"
trap stack_cleanup EXIT
mkdir -p "$RUN/data"
src="$(pwd)/$RUN/data/${TIER}_upload.csv"
[ -s "$src" ] || "$BIN/datagen" --tier "$TIER" --out "$src"
size=$(stat -c %s "$src")

echo "== compression: producer pipeline vs zstd -3 -T2 on $src"
FERRY_BENCH_FILE="$src" go test -run '^$' -bench CompressVsZstdCLI -benchtime 3x ./internal/producer/ | grep -E '^Benchmark'

stack_up
now() { date +%s.%N; }
mbps() { awk -v b="$size" -v s="$1" 'BEGIN { printf "%.1f", b / 1e6 / s }'; }
rows=()
for w in 1 2; do
  fleet_up "$w" "${w}w"
  t0=$(now)
  FERRY_LOG_LEVEL=warn "$BIN/producer" submit --wait --method "bench-${w}w" "$src" "gs://$BUCKET/bench/ferry-${w}w" > /dev/null
  el=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }')
  rows+=("ferry, $w workers (zstd)|$el|$(mbps "$el")")
  fleet_down
done

if command -v gcloud >/dev/null; then
  export CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE="http://$STORAGE_EMULATOR_HOST/" CLOUDSDK_AUTH_DISABLE_CREDENTIALS=true \
    CLOUDSDK_CORE_PROJECT=ferry-local CLOUDSDK_CORE_DISABLE_PROMPTS=1 \
    CLOUDSDK_STORAGE_PARALLEL_COMPOSITE_UPLOAD_ENABLED=False # its composite uploads fail to clean up on the fake
  t0=$(now)
  gcloud storage cp "$src" "gs://$BUCKET/bench/gcloud/$(basename "$src")" > "$RUN/logs/gcloud.log" 2>&1 || { cat "$RUN/logs/gcloud.log" >&2; exit 1; }
  el=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }')
  rows+=("gcloud storage cp|$el|$(mbps "$el")")
fi

echo
echo "== end to end on the local stack: $(basename "$src"), $size bytes (wall time, process start to verified object)"
printf '  %-28s %9s %10s %8s\n' method seconds "raw MB/s" "vs gcloud"
base=""
for r in "${rows[@]}"; do
  IFS='|' read -r m s v <<< "$r"
  [ "$m" = "gcloud storage cp" ] && base=$v
done
for r in "${rows[@]}"; do
  IFS='|' read -r m s v <<< "$r"
  ratio="-"
  [ -n "$base" ] && ratio=$(awk -v a="$v" -v b="$base" 'BEGIN { printf "%.2fx", a / b }')
  printf '  %-28s %9.2f %10s %8s\n' "$m" "$s" "$v" "$ratio"
done
