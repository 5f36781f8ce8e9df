#!/usr/bin/env bash
# Installs what ferry's run and tests use beyond Go modules, where missing:
# the zstd CLI (a peer the tests check frames against). The Pub/Sub emulator
# comes with google-cloud-cli; where it is missing the tests fall back to the
# in-process pstest server.
set -euo pipefail
need=()
command -v zstd >/dev/null || need+=(zstd)
command -v lz4 >/dev/null || need+=(lz4)
[ -x /usr/bin/time ] || need+=(time)
if [ ${#need[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "deps: please install: ${need[*]}" >&2
  fi
fi
go mod download
