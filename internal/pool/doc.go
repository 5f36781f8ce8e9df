// Package pool sends one transfer across many hosts: a producer's Walker
// cuts a pooled transfer's walk into shards (one manifest page each, a
// large file split by chunk ranges), publishes them and waits for them
// to be done; an Agent on each host that mounts the share sends the
// shards it claims with the producer's pipeline and its own uploaders,
// and writes the page only once every chunk of it is stored. See
// docs/design.md, "A third wiring: the pool".
package pool
