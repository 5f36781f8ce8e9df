#!/usr/bin/env bash
# make bench: ferry beside its peers, in one run on one machine. A thin
# wrapper over bin/bench (cmd/bench, internal/bench), which prints one table
# per workload and the goals, and appends every run to .run/bench.ndjson.
#   BENCH_QUICK=1  small data: proves the bench works (figures mean little)
#   BENCH_FULL=1   adds the 1.2 GB tier
#   BENCH_REPEATS=N, BENCH_WORKLOADS=1,3, BENCH_LINK_MBPS=7
# Arguments are passed to bin/bench (bin/bench --help lists them).
set -euo pipefail
BIN=${BIN:-bin}
RUN=${RUN_DIR:-.run}
for tool in gcloud gsutil zstd; do
  command -v "$tool" >/dev/null || echo "bench: $tool is not on PATH; its rows will fail" >&2
done
exec "$BIN/bench" --bin "$BIN" --run-dir "$RUN/bench" --rows "$RUN/bench.ndjson" "$@"
