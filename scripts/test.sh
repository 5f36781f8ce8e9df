#!/usr/bin/env bash
# make test: every test, against the real emulators the tests start
# themselves, then a one-line summary. Exits non-zero when any test fails.
set -uo pipefail
mkdir -p .run
log=.run/test.log
# internal/mutants takes each guard away and runs its test (make mutants).
export FERRY_MUTANTS=1
go test -count=1 -timeout 40m -v "$@" ./... 2>&1 | tee "$log" | grep -E '^(ok|FAIL|---|panic:|\s+--- FAIL|.*_test.go:[0-9]+:)' 
status=${PIPESTATUS[0]}

# The decoders of everything that arrives over Pub/Sub, and the handlers
# that act on it (over fake-gcs-server), fuzzed briefly. New inputs are
# minimized once only, so the time goes to running inputs.
fuzztime=${FERRY_FUZZTIME:-10s}
for pt in message:FuzzDecodeRequest message:FuzzDecodeChunk message:FuzzDecodeEvent \
  worker:FuzzWorkerHandle merger:FuzzMergerHandle requests:FuzzRequestsHandle restore:FuzzRestoreObject; do
  pkg=${pt%%:*} target=${pt#*:}
  fuzz() { go test -run '^$' -fuzz "^$target\$" -fuzztime "$fuzztime" -fuzzminimizetime 1x "./internal/$pkg/" > .run/fuzz.log 2>&1; }
  ok=0
  if fuzz; then
    ok=1
  elif grep -q 'context deadline exceeded' .run/fuzz.log && ! grep -qE 'Failing input written|panic:|_test\.go:[0-9]+:' .run/fuzz.log; then
    # Go 1.26's fuzz coordinator can report its own -fuzztime deadline as
    # a failure (golang/go#75804, fixed in Go 1.27): no input failed, so
    # the target runs once more, and only a real finding fails it.
    echo "$target: the fuzz engine's deadline race (no failing input); running it once more" | tee -a "$log"
    fuzz && ok=1
  fi
  if [ "$ok" = 1 ]; then
    execs=$(grep -oE 'execs: [0-9]+' .run/fuzz.log | tail -1)
    echo "--- PASS: $target (fuzzed $fuzztime, ${execs:-execs: ?})" | tee -a "$log"
  else
    cat .run/fuzz.log
    echo "--- FAIL: $target" | tee -a "$log"
    status=1
  fi
done
passed=$(grep -cE '^\s*--- PASS' "$log")
failed=$(grep -cE '^\s*--- FAIL' "$log")
skipped=$(grep -cE '^\s*--- SKIP' "$log")
# Test mains that start a Pub/Sub emulator print "ferry-test: pubsub=KIND":
# the summary says which one the tests ran against, so that a fallback to
# pstest is seen (CI sets FERRY_TEST_PUBSUB=java to forbid it).
kinds=$(grep -oE '^ferry-test: pubsub=[a-z]+' "$log" | sed 's/.*=//' | sort -u | paste -sd, -)
pubsub=""
case ",$kinds," in
  *,pstest,*) pubsub=" (Pub/Sub: pstest)" ;;
  *,java,*) pubsub=" (Pub/Sub: java)" ;;
esac
echo
echo "go test: $passed passed, $failed failed, $skipped skipped$pubsub"
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then
  echo "go test exited $status (a build failure or a package-level failure); see $log" >&2
fi
exit "$status"
