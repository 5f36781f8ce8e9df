#!/usr/bin/env bash
# make tf-check: terraform/ is formatted, agrees with the code
# (internal/tfcheck), and, wherever the google provider is installed, passes
# `terraform validate` and `terraform test` (terraform/tests, on a
# mock_provider "google": the provider's real schema and validators, no API).
#
# The provider cannot be downloaded here. It is found where Terraform looks
# for providers without a registry: FERRY_TF_PLUGIN_DIR (a directory laid
# out as a filesystem mirror, HOSTNAME/NAMESPACE/TYPE/VERSION/OS_ARCH/), or
# Terraform's implicit local mirrors such as ~/.terraform.d/plugins. Where
# none is installed the summary says so in one line, and only what ran can
# fail.
set -euo pipefail
if ! command -v terraform >/dev/null; then
  echo "tf-check: no terraform CLI; skipped terraform fmt, validate and test"
  go test -count=1 ./internal/tfcheck/
  exit 0
fi
# A CLI configuration named in the environment but absent only adds a warning.
if [[ -n ${TF_CLI_CONFIG_FILE:-} && ! -e $TF_CLI_CONFIG_FILE ]]; then unset TF_CLI_CONFIG_FILE; fi
if ! terraform fmt -check -recursive -diff terraform/; then
  echo "tf-check: terraform fmt -recursive terraform/ would change the files above" >&2
  exit 1
fi
echo "tf-check: terraform fmt: ok"
go test -count=1 ./internal/tfcheck/

# validate and test run in a copy, so that nothing (.terraform, a lock
# file) is left in terraform/; schema/ comes along for file("../schema/…").
work=.run/tf-check
rm -rf "$work"
mkdir -p "$work"
cp -r terraform schema "$work/"
init=(terraform -chdir="$work/terraform" init -backend=false -input=false -no-color)
if [[ -n ${FERRY_TF_PLUGIN_DIR:-} ]]; then
  init+=(-plugin-dir="$FERRY_TF_PLUGIN_DIR")
fi
if ! "${init[@]}" >"$work/init.log" 2>&1; then
  if grep -q 'Failed to query available provider packages\|Failed to install provider\|could not connect to registry' "$work/init.log"; then
    echo "tf-check: terraform validate and test: skipped, the hashicorp/google and hashicorp/time providers are not installed (set FERRY_TF_PLUGIN_DIR to a filesystem mirror that has them)"
    exit 0
  fi
  cat "$work/init.log" >&2
  echo "tf-check: terraform init failed" >&2
  exit 1
fi
version=$(terraform -chdir="$work/terraform" version -json | sed -n 's/.*\/hashicorp\/google": *"\([^"]*\)".*/\1/p')
terraform -chdir="$work/terraform" validate -no-color
echo "tf-check: terraform validate: ok (hashicorp/google ${version:-?})"
if ! terraform -chdir="$work/terraform" test -no-color >"$work/test.log" 2>&1; then
  grep -v 'CLI configuration\|terraformrc\|Warning: Unable' "$work/test.log" >&2
  echo "tf-check: terraform test failed (hashicorp/google ${version:-?})" >&2
  exit 1
fi
summary=$(grep -E '^(Success|Failure)!' "$work/test.log" | tail -1)
echo "tf-check: terraform test: ${summary:-ok} (hashicorp/google ${version:-?}, mock_provider)"
