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
# Workload 8 measures DuckDB's own Parquet writer beside ferry's: a duckdb
# CLI on PATH, else the helper tools/duckdb builds (a module of its own:
# ferry's build never needs cgo or DuckDB).
if ! command -v duckdb >/dev/null && [ ! -x "$BIN/duckdb-sql" ]; then
  bin_abs=$(mkdir -p "$BIN" && cd "$BIN" && pwd)
  (cd tools/duckdb && go build -o "$bin_abs/duckdb-sql" .) ||
    echo "bench: no DuckDB (no duckdb on PATH, and tools/duckdb did not build); workload 8's $BIN/duckdb-sql row will fail" >&2
fi
exec "$BIN/bench" --bin "$BIN" --run-dir "$RUN/bench" --rows "$RUN/bench.ndjson" "$@"
