// Package bench is make bench: it runs ferry and its peers (gcloud, gsutil,
// single-stream Go uploads, the zstd CLI) on the same data against the same
// fake-gcs-server build, each method in a fresh server process and each
// repeat in an empty bucket of its own, with every process started inside
// its method's clock. It prints one table per workload with min, median and
// max wall time and the ratio to the best peer, prints the goals beside
// what was measured (never asserting them; package verdict), and appends one
// benchrow.Row per run to an NDJSON file, so make report shows ferry beside
// its peers.
//
// Ferry is driven only through its binaries (localstack, producer, worker,
// merger, restore) and their documented flags and variables, so the bench
// keeps working while ferry's internals change.
package bench
