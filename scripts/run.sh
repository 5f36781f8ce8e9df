#!/usr/bin/env bash
# make run: start the local stack, generate a seed-like data set, transfer it
# with the producer, WORKERS workers and the merger (real processes), prove it
# intact with Go and the stock zstd CLI, and print the stage table; then
# the same data with ferry cp, the engine in one process.
#
# TRANSPORT=spool (default): producer and workers share one spool directory.
# TRANSPORT=pubsub: every chunk travels inside its Pub/Sub message, and each
# process gets a spool directory of its own, as on separate VMs; the default
# data set grows to the large tier and 1,000 small files.
set -euo pipefail

TRANSPORT=${TRANSPORT:-spool}
WORKERS=${WORKERS:-2}
if [ "$TRANSPORT" = pubsub ]; then
  TIER=${TIER:-large}
  SMALL_FILES=${SMALL_FILES:-1000}
else
  TIER=${TIER:-medium}
  SMALL_FILES=${SMALL_FILES:-200}
fi
RUN=${RUN_DIR:-.run}
BIN=${BIN:-bin}
BUCKET=ferry-local
source "$(dirname "$0")/stack.sh"
trap stack_cleanup EXIT

# Data: the seeds' tier file, a directory of small files and a 0-byte file.
data="$RUN/data"
mkdir -p "$data"
if [ ! -s "$data/${TIER}_upload.csv" ]; then
  "$BIN/datagen" --tier "$TIER" --out "$data/${TIER}_upload.csv"
fi
small="$data/small_files_$SMALL_FILES"
if [ ! -d "$small" ]; then
  "$BIN/datagen" --many "$SMALL_FILES" --dir "$small.tmp"
  : > "$small.tmp/empty.csv"
  mv "$small.tmp" "$small"
fi

stack_up
echo "run: local stack up (PUBSUB_EMULATOR_HOST=$PUBSUB_EMULATOR_HOST STORAGE_EMULATOR_HOST=$STORAGE_EMULATOR_HOST)"
fleet_up "$WORKERS"

dest="gs://$BUCKET/run-$(date -u +%Y%m%dT%H%M%S)"
echo "run: transferring $data/${TIER}_upload.csv and $small/ ($SMALL_FILES files and a 0-byte file) to $dest with $WORKERS workers, transport $TRANSPORT"
producer_spool="$FERRY_SPOOL_DIR"
[ "$TRANSPORT" = pubsub ] && producer_spool="$RUN/spool-producer"
FERRY_SPOOL_DIR="$producer_spool" FERRY_LOG_FORMAT=text /usr/bin/env time -f "%M" -o "$RUN/producer.rss" \
  "$BIN/producer" submit --wait --timeout 10m --method "ferry-${WORKERS}w" --label "workers=$WORKERS" \
  "$data/${TIER}_upload.csv" "$small" "$dest" > "$RUN/submit.out"
tid=$(head -n 1 "$RUN/submit.out")

"$BIN/verify" --results "$RUN/results.ndjson" --transfer "$tid" "$data/${TIER}_upload.csv" "$small" "$dest"

# The same data with ferry cp: the producer, uploads and merger in one
# process, no Pub/Sub (PUBSUB_EMULATOR_HOST unset), proven the same way.
echo
echo "run: the same data with ferry cp (one process, no Pub/Sub) to $dest-cp"
env -u PUBSUB_EMULATOR_HOST XDG_STATE_HOME="$RUN/state" FERRY_RESULTS_FILE="$RUN/results.ndjson" \
  /usr/bin/env time -f "%M" -o "$RUN/cp.rss" "$BIN/ferry" cp --timeout 10m --method ferry-cp \
  "$data/${TIER}_upload.csv" "$small" "$dest-cp" > "$RUN/cp.out"
"$BIN/verify" --results "$RUN/results.ndjson" --transfer "$(head -n 1 "$RUN/cp.out")" "$data/${TIER}_upload.csv" "$small" "$dest-cp"

# The same CSV as a table: typed Parquet parts, the load job a merger with
# BigQuery would run (written to the loads file), and the CSV given back
# by restore --to csv, byte for byte.
echo
echo "run: $data/${TIER}_upload.csv as a table (--convert parquet --bq-table local-project.landing.prices)"
FERRY_SPOOL_DIR="$producer_spool" FERRY_LOG_FORMAT=text "$BIN/producer" submit --wait --timeout 10m --method ferry-parquet \
  --convert parquet --bq-table local-project.landing.prices --bq-write truncate "$data/${TIER}_upload.csv" "$dest-table" > "$RUN/table.out"
rm -rf "$RUN/table-csv"
"$BIN/restore" --to csv "$dest-table/" "$RUN/table-csv" 2> "$RUN/table-restore.log"
cmp "$data/${TIER}_upload.csv" "$RUN/table-csv/${TIER}_upload.csv"
echo "run: restore --to csv gave $data/${TIER}_upload.csv back byte for byte; the load job, as $RUN/loads.ndjson has it:"
tail -n 1 "$RUN/loads.ndjson" | cut -c 1-400

# The deployment check an operator runs after terraform apply, on this
# stack: topics, subscriptions, bucket, permissions and a canary transfer.
echo
echo "run: producer doctor"
FERRY_SPOOL_DIR="$producer_spool" FERRY_LOG_FORMAT=text "$BIN/producer" doctor --canary-timeout 2m --bucket "$BUCKET" > "$RUN/doctor.out" ||
  { cat "$RUN/doctor.out"; echo "run: producer doctor failed" >&2; exit 1; }
tail -n 1 "$RUN/doctor.out"
echo
echo "  producer     peak RSS $(cat "$RUN/producer.rss") kB"
echo "  ferry cp     peak RSS $(cat "$RUN/cp.rss") kB (FERRY_CP_MEMORY 256 MiB)"
peak_rss | grep -v localstack
