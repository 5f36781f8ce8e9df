#!/usr/bin/env bash
# make run: start the local stack, generate a seed-like data set, transfer it
# with the producer, WORKERS workers and the merger, prove it intact with Go
# and the stock zstd CLI, and print the stage table.
set -euo pipefail

WORKERS=${WORKERS:-2}
TIER=${TIER:-medium}
SMALL_FILES=${SMALL_FILES:-200}
RUN=${RUN_DIR:-.run}
BIN=${BIN:-bin}
BUCKET=ferry-local

mkdir -p "$RUN/logs" "$RUN/data"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

# Data: the seeds' tier file, a directory of small files and a 0-byte file.
data="$RUN/data"
if [ ! -s "$data/${TIER}_upload.csv" ]; then
  "$BIN/datagen" --tier "$TIER" --out "$data/${TIER}_upload.csv"
fi
if [ ! -d "$data/small_files" ]; then
  "$BIN/datagen" --many "$SMALL_FILES" --dir "$data/small_files"
  : > "$data/small_files/empty.csv"
fi

# The local stack: Pub/Sub emulator and fake-gcs-server, with ferry's topology.
rm -f "$RUN/env"
"$BIN/localstack" --dir "$RUN/pubsub" --env-file "$RUN/env" > "$RUN/logs/localstack.out" 2> "$RUN/logs/localstack.log" &
pids+=($!)
for _ in $(seq 1 300); do
  [ -s "$RUN/env" ] && break
  if ! kill -0 "${pids[0]}" 2>/dev/null; then cat "$RUN/logs/localstack.log" >&2; exit 1; fi
  sleep 0.2
done
[ -s "$RUN/env" ] || { echo "run: the local stack did not come up; see $RUN/logs/localstack.log" >&2; exit 1; }
# shellcheck disable=SC1091
source "$RUN/env"
export FERRY_SPOOL_DIR="$RUN/spool" FERRY_RESULTS_FILE="$RUN/results.ndjson" FERRY_LOG_FORMAT=json
echo "run: local stack up (PUBSUB_EMULATOR_HOST=$PUBSUB_EMULATOR_HOST STORAGE_EMULATOR_HOST=$STORAGE_EMULATOR_HOST)"

for i in $(seq 1 "$WORKERS"); do
  FERRY_WORKER_ID="worker-$i" "$BIN/worker" 2> "$RUN/logs/worker-$i.log" &
  pids+=($!)
done
"$BIN/merger" 2> "$RUN/logs/merger.log" &
pids+=($!)

dest="gs://$BUCKET/run-$(date -u +%Y%m%dT%H%M%S)"
echo "run: transferring $data/${TIER}_upload.csv and $data/small_files/ ($SMALL_FILES files and a 0-byte file) to $dest with $WORKERS workers"
FERRY_LOG_FORMAT=text "$BIN/producer" submit --wait --timeout 10m --method "ferry-${WORKERS}w" --label "workers=$WORKERS" \
  "$data/${TIER}_upload.csv" "$data/small_files" "$dest" > "$RUN/submit.out"
tid=$(head -n 1 "$RUN/submit.out")

"$BIN/verify" --results "$RUN/results.ndjson" --transfer "$tid" "$data/${TIER}_upload.csv" "$data/small_files" "$dest"
