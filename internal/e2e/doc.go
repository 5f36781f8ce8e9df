// Package e2e runs ferry end to end on the local stack — the Java Pub/Sub
// emulator (or pstest where it is missing) and fake-gcs-server — with the
// producer, two workers and the merger, and proves the final objects
// byte-identical to their sources. It holds tests only.
package e2e
