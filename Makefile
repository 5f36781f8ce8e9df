# ferry — see README.md. `make run` does ferry's main job locally; `make test`
# runs every test (CI runs exactly that).

GO       ?= go
BIN      := bin
VERSION  ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
GOLANGCI := $(shell $(GO) env GOPATH)/bin/golangci-lint
WORKERS  ?= 2
TIER     ?=
TRANSPORT ?= spool

.PHONY: all
all: build

## deps: install what ferry needs that a fresh machine may lack
.PHONY: deps
deps:
	@scripts/deps.sh

## build: build every binary into bin/
.PHONY: build
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/...

## run: local stack, generated data set, transfer, verify, stage table
.PHONY: run
run: deps build
	WORKERS=$(WORKERS) TIER=$(TIER) TRANSPORT=$(TRANSPORT) scripts/run.sh

## test: gofmt, go vet, golangci-lint, tf-check, then every test against the emulators
.PHONY: test
test: lint tf-check
	scripts/test.sh

## mutants: take each guard listed in internal/mutants away and show its test failing (make test runs them too)
.PHONY: mutants
mutants:
	FERRY_MUTANTS=1 $(GO) test -count=1 -v -run 'TestMutants' ./internal/mutants/

## tf-check: terraform fmt where the CLI exists, and terraform/ checked against the code
.PHONY: tf-check
tf-check:
	@scripts/tf-check.sh

## release: linux/amd64 binaries + SHA256SUMS in dist/VERSION; uploaded with RELEASE_LOCATION=gs://…
.PHONY: release
release:
	VERSION=$(VERSION) scripts/release.sh

.PHONY: fmt-check
fmt-check:
	@out=$$(gofmt -l cmd internal); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

.PHONY: vet
vet:
	$(GO) vet ./...

## lint: golangci-lint (installed into GOPATH/bin on first use)
.PHONY: lint
lint: fmt-check vet
	@test -x $(GOLANGCI) || $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0
	$(GOLANGCI) run ./...

## report: seed-style tables and an HTML report of the rows make run and make bench wrote
.PHONY: report
report: build
	@test -n "$(wildcard .run/results.ndjson .run/bench.ndjson)" || { echo "report: no benchmark rows yet (no .run/results.ndjson or .run/bench.ndjson): run 'make run' or 'make bench' first, which write them" >&2; exit 1; }
	$(BIN)/report --html .run/report.html $(wildcard .run/results.ndjson .run/bench.ndjson)
	@echo "report: .run/report.html"

## report-check: HTML report of sample rows, screenshot in headless Chromium
.PHONY: report-check
report-check:
	scripts/report-check.sh

## bench: ferry beside gcloud, gsutil, Go uploads and zstd (BENCH_QUICK=1, BENCH_FULL=1)
.PHONY: bench
bench: deps build
	scripts/bench.sh

## duckdb: bin/duckdb-sql, DuckDB for workload 8 where no duckdb CLI is installed (tools/duckdb, its own module)
.PHONY: duckdb
duckdb:
	cd tools/duckdb && $(GO) build -o $(abspath $(BIN))/duckdb-sql .

## bench-readme: put the last whole make bench's goals (.run/bench-summary.md) into README.md
.PHONY: bench-readme
bench-readme: build
	$(BIN)/bench readme .run/bench-summary.md README.md

.PHONY: clean
clean:
	rm -rf $(BIN) .run
