# Functions shared by run.sh and bench.sh: start the local stack and a fleet
# of real processes, record their peak memory, and stop them all on exit.
# Source it; it expects BIN and RUN to be set.

pids=()
names=()

stack_cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}

# stack_up starts localstack in the background and loads its environment.
stack_up() {
  mkdir -p "$RUN/logs"
  rm -f "$RUN/env"
  "$BIN/localstack" --dir "$RUN/pubsub" --env-file "$RUN/env" > "$RUN/logs/localstack.out" 2> "$RUN/logs/localstack.log" &
  local ls_pid=$!
  pids+=("$ls_pid"); names+=(localstack)
  for _ in $(seq 1 300); do
    [ -s "$RUN/env" ] && break
    if ! kill -0 "$ls_pid" 2>/dev/null; then cat "$RUN/logs/localstack.log" >&2; return 1; fi
    sleep 0.2
  done
  [ -s "$RUN/env" ] || { echo "the local stack did not come up; see $RUN/logs/localstack.log" >&2; return 1; }
  # shellcheck disable=SC1091
  source "$RUN/env"
  export FERRY_SPOOL_DIR="$RUN/spool" FERRY_RESULTS_FILE="$RUN/results.ndjson" FERRY_LOG_FORMAT=json
  # producer submit keeps the end keys of the local transfers here, not in ~/.local/state.
  export FERRY_KEY_DIR="$RUN/keys"
  export FERRY_TRANSPORT="${TRANSPORT:-spool}"
  # --bq-table on the local stack: one dataset allowed, and the merger
  # writes the load jobs it would run here instead of running them.
  export FERRY_BQ_LOAD_DATASETS=local-project.landing FERRY_LOADS_FILE="$RUN/loads.ndjson"
  # Several services share this machine: each serves /metrics on a free port (logged).
  export FERRY_HTTP_ADDR=127.0.0.1:0
}

# fleet_up N [TAG] starts N workers and the merger; logs go to
# $RUN/logs/NAME[-TAG].log.
fleet_up() {
  local i tag=${2:+-$2}
  for i in $(seq 1 "$1"); do
    # With the pubsub transport every process has a spool directory of
    # its own, as on separate VMs: nothing is shared but Pub/Sub and GCS.
    local spool="$FERRY_SPOOL_DIR"
    [ "$FERRY_TRANSPORT" = pubsub ] && spool="$RUN/spool-worker-$i"
    FERRY_WORKER_ID="worker-$i" FERRY_SPOOL_DIR="$spool" "$BIN/worker" 2> "$RUN/logs/worker-$i$tag.log" &
    pids+=($!); names+=("worker-$i")
  done
  "$BIN/merger" 2> "$RUN/logs/merger$tag.log" &
  pids+=($!); names+=(merger)
}

# fleet_down stops the workers and the merger (not the stack).
fleet_down() {
  local i keep_p=() keep_n=()
  for i in "${!pids[@]}"; do
    if [ "${names[$i]}" = localstack ]; then keep_p+=("${pids[$i]}"); keep_n+=(localstack); continue; fi
    kill "${pids[$i]}" 2>/dev/null || true
    wait "${pids[$i]}" 2>/dev/null || true
  done
  pids=("${keep_p[@]}"); names=("${keep_n[@]}")
}

# peak_rss prints the peak resident memory (VmHWM) of every running process.
peak_rss() {
  local i
  for i in "${!pids[@]}"; do
    local hwm
    hwm=$(awk '/VmHWM/ {print $2, $3}' "/proc/${pids[$i]}/status" 2>/dev/null || true)
    printf '  %-12s peak RSS %s\n' "${names[$i]}" "${hwm:-?}"
  done
}
