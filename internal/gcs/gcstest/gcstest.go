// Package gcstest is the conformance suite of internal/gcs: what ferry relies
// on from Cloud Storage, written once and run against every backend there is
// (fake-gcs-server in process, and a real bucket when FERRY_TEST_PROJECT and
// FERRY_TEST_BUCKET are set). In the manner of gocloud.dev's drivertest and
// restic's backend tests: Run(t, newTarget) with an explicit table of cases.
//
// Where a backend differs from Google Cloud Storage, the case says how and is
// skipped on that backend only (see differences); the skip follows the Kind
// of the backend that answers, never an environment variable.
package gcstest

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/gcs"
)

// Kinds of backend.
const (
	Fake = "fake-gcs-server"
	// FakeFS is fake-gcs-server with its filesystem backend, behind
	// localstack's shim (fast compose, 204 on delete): what make bench
	// measures against.
	FakeFS = "fake-gcs-server (filesystem backend, shim)"
	// Shim is fake-gcs-server's memory backend behind localstack's shim:
	// what make run uses.
	Shim  = "fake-gcs-server (memory backend, shim)"
	Cloud = "gcs" // Google Cloud Storage, a real bucket
)

// Target is one backend the suite runs against.
type Target struct {
	// Kind is Fake or Cloud: what actually answers.
	Kind string
	// Store is a Store on the backend.
	Store *gcs.Store
	// Bucket returns a bucket a case may write to; the case writes only
	// under its own prefix and removes what it wrote.
	Bucket func(t *testing.T) string
	// KMSKey, when set, is a Cloud KMS key the backend may encrypt with.
	KMSKey string
}

// differences lists, per case, where a backend differs from Cloud Storage.
var differences = map[string][]struct{ kind, why string }{
	"ComposePreconditions": {
		{Fake, "fake-gcs-server ignores compose preconditions (ifGenerationMatch, DoesNotExist): it replaces dst"},
	},
	"ComposeMissingSource": {
		{Fake, "fake-gcs-server answers 500, not 404, for a missing compose source"},
	},
	"KMSKeyPassedThrough": {
		{Fake, "fake-gcs-server ignores kmsKeyName and reports no key"},
		{Shim, "fake-gcs-server ignores kmsKeyName and reports no key"},
		{FakeFS, "fake-gcs-server ignores kmsKeyName and reports no key"},
	},
	"PatchAsSeen": {
		{Fake, "fake-gcs-server ignores a patch's ifGenerationMatch"},
	},
	"DeleteAsSeenSparesAPatchedObject": {
		{Fake, "fake-gcs-server keeps no metageneration (always 1), and a patch keeps the generation"},
		{Shim, "fake-gcs-server keeps no metageneration (always 1), and a patch keeps the generation"},
		{FakeFS, "fake-gcs-server keeps no metageneration (always 1), and a patch keeps the generation"},
	},
	"DeleteGenerationSparesANewerVersion": {
		{Fake, "fake-gcs-server ignores a delete's ifGenerationMatch: it deletes the live version"},
	},
	"ObjectAndPrefixOfOneName": {
		{FakeFS, "the filesystem backend keeps an object as a file, so it cannot hold both a and a/b (ferry never writes both: a final object's name is a file's path)"},
	},
}

// Run runs every case against newTarget's backend.
func Run(t *testing.T, newTarget func(t *testing.T) Target) {
	cases := []struct {
		name string
		fn   func(t *testing.T, h *harness)
	}{
		{"UploadRoundTrip", testUploadRoundTrip},
		{"MetadataRoundTrip", testMetadata},
		{"IfAbsentPrecondition", testIfAbsent},
		{"GenerationPrecondition", testGeneration},
		{"TouchKeepsCreated", testTouch},
		{"PatchAsSeen", testPatch},
		{"DeleteAsSeenSparesAPatchedObject", testDeleteAsSeen},
		{"CRC32CMismatchRejected", testChecksumMismatch},
		{"RangedReads", testRangedReads},
		{"MissingObjectIsNotFound", testNotFound},
		{"ListWithPrefix", testList},
		{"ListRange", testListRange},
		{"DeleteMissingIsNoError", testDelete},
		{"DeleteGenerationSparesANewerVersion", testDeleteGeneration},
		{"ObjectAndPrefixOfOneName", testObjectAndPrefix},
		{"Compose32Sources", testCompose32},
		{"ComposeOver32SourcesFails", testCompose33},
		{"ComposePreconditions", testComposePreconditions},
		{"ComposeMissingSource", testComposeMissingSource},
		{"KMSKeyPassedThrough", testKMS},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tg := newTarget(t)
			for _, d := range differences[c.name] {
				if d.kind == tg.Kind {
					t.Skipf("%s: %s", tg.Kind, d.why)
				}
			}
			c.fn(t, newHarness(t, tg))
		})
	}
}

// harness is one case's bucket and prefix.
type harness struct {
	t      *testing.T
	target Target
	s      *gcs.Store
	bucket string
	prefix string
}

var seq atomic.Int64

func newHarness(t *testing.T, tg Target) *harness {
	name := strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "-"))
	h := &harness{t: t, target: tg, s: tg.Store, bucket: tg.Bucket(t),
		prefix: fmt.Sprintf("gcstest/%d-%d-%s/", time.Now().UnixNano(), seq.Add(1), strings.Trim(name, "-"))}
	t.Cleanup(func() {
		ctx := context.Background()
		var names []string
		_ = h.s.List(ctx, h.bucket, h.prefix, func(a gcs.Attrs) error { names = append(names, a.Name); return nil })
		for _, n := range names {
			_ = h.s.Delete(ctx, h.bucket, n)
		}
	})
	return h
}

// obj is the case's object called name.
func (h *harness) obj(name string) string { return h.prefix + name }
