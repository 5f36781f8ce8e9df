#!/usr/bin/env bash
# make tf-check: terraform/ is formatted (where the terraform CLI exists) and
# agrees with the code (internal/tfcheck). `terraform validate` needs the
# google provider, which cannot be downloaded here, so it is not run.
set -euo pipefail
if command -v terraform >/dev/null; then
  # A CLI configuration named in the environment but absent only adds a warning.
  if [[ -n ${TF_CLI_CONFIG_FILE:-} && ! -e $TF_CLI_CONFIG_FILE ]]; then unset TF_CLI_CONFIG_FILE; fi
  if ! terraform fmt -check -recursive -diff terraform/; then
    echo "tf-check: terraform fmt -recursive terraform/ would change the files above" >&2
    exit 1
  fi
  echo "tf-check: terraform fmt: ok"
else
  echo "tf-check: no terraform CLI; skipped terraform fmt -check"
fi
go test -count=1 ./internal/tfcheck/
