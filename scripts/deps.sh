#!/usr/bin/env bash
# Installs what ferry's run and tests use beyond Go modules, where missing:
# the zstd CLI (a peer the tests check frames against), mmdebstrap (the
# start-up script's test builds a stock Debian 12 root with it) and, with
# FERRY_TEST_PUBSUB=java (CI), the Java Pub/Sub emulator of google-cloud-cli;
# tmux, in which a test reads ferry cp's progress off a real terminal.
# Elsewhere, where it is missing, the tests fall back to the in-process
# pstest server and make test's summary says so.
set -euo pipefail
need=()
command -v zstd >/dev/null || need+=(zstd)
command -v lz4 >/dev/null || need+=(lz4)
[ -x /usr/bin/time ] || need+=(time)
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
command -v tmux >/dev/null || need+=(tmux) # ferry cp's progress, tested in a real terminal
if [ ${#need[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "deps: please install: ${need[*]}" >&2
  fi
fi
if [ "${FERRY_TEST_PUBSUB:-}" = java ]; then
  sdk=$(gcloud info --format='value(installation.sdk_root)' 2>/dev/null || true)
  if [ -z "$sdk" ] || [ ! -d "$sdk/platform/pubsub-emulator" ] || ! command -v java >/dev/null; then
    if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
      apt-get update -qq && apt-get install -y -qq google-cloud-cli-pubsub-emulator default-jre-headless >/dev/null ||
        echo "deps: could not install google-cloud-cli-pubsub-emulator with apt-get" >&2
    elif command -v gcloud >/dev/null; then
      gcloud components install pubsub-emulator beta --quiet ||
        echo "deps: could not install the pubsub-emulator component" >&2
    else
      echo "deps: FERRY_TEST_PUBSUB=java needs google-cloud-cli with the pubsub-emulator component, and Java" >&2
    fi
  fi
fi
go mod download
