package mutants

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// mutant is one guard taken away, and the test that must notice.
type mutant struct {
	name     string // the guard, as a test name
	file     string // relative to the module's root
	from, to string // from occurs exactly once in file
	pkg      string // the package whose test must fail
	test     string // that test (a -run pattern: Test or Test/Subtest)
}

var mutants = []mutant{
	{
		name: "small objects download through the window, not the slots",
		file: "internal/restore/run.go",
		from: "\t\t\t\tto = smallJobs",
		to:   "\t\t\t\tto = jobs",
		pkg:  "internal/restore", test: "TestSmallObjectsDownloadMoreAtOnceThanTheSlots",
	},
	{
		name: "a join lists the parts between pages at once",
		file: "internal/manifest/reader.go",
		from: "\tlistAhead  = 4",
		to:   "\tlistAhead  = 1",
		pkg:  "internal/manifest", test: "TestAJoinListsThePartsBetweenPagesAtOnceAndInOrder",
	},
	{
		name: "connections are kept for the requests in flight",
		file: "internal/gcs/gcs.go",
		from: "const maxIdle = 4096",
		to:   "const maxIdle = 100",
		pkg:  "internal/gcs", test: "TestConnectionsAreKeptForTheRequestsInFlightNotOpenedPerRequest",
	},
	{
		name: "a small file's upload holds its own bytes, not a large one's buffers",
		file: "internal/gcs/plain.go",
		from: "\tif size <= PlainMax {\n\t\treturn max(size, 0) + plainOverhead",
		to:   "\tif size < 0 {\n\t\treturn max(size, 0) + plainOverhead",
		pkg:  "internal/worker", test: "TestRequestsInFlightAreSizedToWhatTheyCarry",
	},
	{
		name: "the window doubles while the rate grows",
		file: "internal/window/window.go",
		from: "\t\t\tw.set(w.limit * 2)",
		to:   "\t\t\tw.set(w.limit + 1)",
		pkg:  "internal/window", test: "TestOnAFarLinkTheWindowGrowsUntilTheServerIsTheBound",
	},
	{
		name: "a push-back cuts the window",
		file: "internal/window/window.go",
		from: "\tw.set(int(float64(w.limit) * w.o.Decrease))",
		to:   "\tw.set(w.limit)",
		pkg:  "internal/window", test: "TestAPushBackCutsOnceAndEndsTheSlowStart",
	},
	{
		name: "a dead letter stops ferry cp's wait",
		file: "internal/engine/inprocess.go",
		from: "\t\t\t\t\tstopped(fmt.Errorf(\"a message of the transfer ran out",
		to:   "\t\t\t\t\t_ = (fmt.Errorf(\"a message of the transfer ran out",
		pkg:  "internal/engine", test: "TestAMessageThatRanOutOfDeliveriesStopsTheLocalEngine",
	},
	{
		name: "a dead letter its handler refused for good is the handler's to report",
		file: "internal/engine/inprocess.go",
		from: "\t\t\t\tif m.Attributes[\"ferry_error\"] == \"\" {",
		to:   "\t\t\t\tif true {",
		pkg:  "internal/engine", test: "TestAMessageThatRanOutOfDeliveriesStopsTheLocalEngine",
	},
	{
		name: "-n adopts what it skips of a transfer that no longer runs",
		file: "internal/producer/skip.go",
		from: "\terr := s.p.o.Store.Patch(ctx, s.bucket, a, map[string]string{message.MetaTransfer: s.tid, message.MetaAdopted: owner})\n",
		to:   "\terr := error(nil)\n",
		pkg:  "internal/producer", test: "TestNoClobberAdoptsTheObjectsOfATransferThatNoLongerRuns",
	},
	{
		name: "an adopted object is kept on failure",
		file: "internal/message/staging.go",
		from: " || md[MetaAdopted] != \"\"",
		to:   "",
		pkg:  "internal/message", test: "TestKeptOnFailure",
	},
	{
		name: "a lease nobody renews goes stale",
		file: "internal/lease/lease.go",
		from: "\t\tif ls.Stale(a.Updated, l.Now()) {",
		to:   "\t\tif false {",
		pkg:  "internal/producer", test: "TestALeaseNobodyRenewsHoldsNothingOffOnceStale",
	},
	{
		name: "a merger renews the leases of the transfers it holds",
		file: "internal/merger/sweep.go",
		from: "\t\tm.renewLease(ctx, t)\n",
		to:   "\n",
		pkg:  "internal/merger", test: "TestTheMergerRenewsTheLeaseOfATransferItHolds",
	},
	{
		name: "a table too wide for the budget is refused up front",
		file: "internal/producer/producer.go",
		from: "\tif need <= p.o.MemoryLimit {",
		to:   "\tif true {",
		pkg:  "internal/producer", test: "TestATableTooWideForTheBudgetIsRefusedUpFrontNamingItsWidth",
	},
	{
		name: "a dead ferry cp's lease holds nobody off (issue 51)",
		file: "internal/lease/lease.go",
		from: "\t\tif HolderGone(ls.Holder) {",
		to:   "\t\tif false {",
		pkg:  "internal/producer", test: "TestALeaseOfAProcessThatIsGoneHoldsNothingOff",
	},
	{
		name: "a call that got no answer is sent again (issue 51)",
		file: "internal/gcs/paced.go",
		from: "maxDropRetries = 3",
		to:   "maxDropRetries = 0",
		pkg:  "internal/gcs", test: "TestEveryCallRidesOutADroppedConnection",
	},
	{
		name: "an event on its last delivery ends its transfer (issue 51)",
		file: "internal/merger/intake.go",
		from: "m.o.MaxAttempts <= 0 || msg.DeliveryAttempt < m.o.MaxAttempts {",
		to:   "true {",
		pkg:  "internal/merger", test: "TestAnEventOnItsLastDeliveryEndsItsTransfer",
	},
	{
		name: "a compose whose retry met 404 is settled by reading its destination (issue 51)",
		file: "internal/merger/compose.go",
		from: "if errors.Is(err, gcs.ErrPrecondition) || errors.Is(err, gcs.ErrNotFound) {",
		to:   "if errors.Is(err, gcs.ErrPrecondition) {",
		pkg:  "internal/merger", test: "TestAComposeCarriedOutButAnswered503EndsOK",
	},
	{
		name: "a row that cannot be written does not hold the transfer (issue 51)",
		file: "internal/merger/end.go",
		from: "done.RowError = message.Truncate(err.Error(), message.MaxErrorBytes)\n\t}\n\tlisted",
		to:   "return err\n\t}\n\tlisted",
		pkg:  "internal/merger", test: "TestATransferWhoseRowCannotBeWrittenEndsOKWithItsObjects",
	},
	{
		name: "an append marks the object it grew, so no failure deletes it (issue 51)",
		file: "internal/merger/compose.go",
		from: "opt.Metadata[message.MetaAppended] = strconv.FormatInt(gen, 10)",
		to:   "_ = gen",
		pkg:  "internal/merger", test: "TestACancelledAppendKeepsTheObjectItGrew",
	},
	{
		name: "a destination under .ferry-keys/ is refused (issue 51)",
		file: "internal/message/reserved.go",
		from: "var reservedRoots = [...]string{StagingRoot, DoneRoot, KeyRoot}",
		to:   "var reservedRoots = [...]string{StagingRoot, DoneRoot}",
		pkg:  "internal/message", test: "TestEveryReservedRootIsRefusedAsAFinalObject",
	},
	{
		name: "an inferred column's rules hold after the sample (issue 43)",
		file: "internal/table/convert.go",
		from: "if c.o.Inferred && (leadingZero(v) || v[0] == '+') {",
		to:   "if false {",
		pkg:  "internal/table", test: "TestAnInferredTypeNeverAltersALaterValue",
	},
	{
		name: "a forged done marker is not believed (issue 42)",
		file: "internal/waiter/marker.go",
		from: "if err := m.check(ctx, d); err != nil {",
		to:   "if err := error(nil); err != nil {",
		pkg:  "internal/waiter", test: "TestAForgedMarkerIsNotBelieved",
	},
	{
		name: "an unproven control event for a bucket not allowed refuses nothing (issue 42)",
		file: "internal/merger/intake.go",
		from: "\t\tif topic == \"control\" {\n\t\t\t// Its key could be checked",
		to:   "\t\tif false {\n\t\t\t// Its key could be checked",
		pkg:  "internal/merger", test: "TestAnUnprovenEventForABucketNotAllowedRefusesNothing",
	},
	{
		name: "no two objects share a temporary file in restore (issue 42)",
		file: "internal/restore/names.go",
		from: "base = base[:cut] + \".\" + hex.EncodeToString(sum[:])",
		to:   "base = hex.EncodeToString(sum[:16])",
		pkg:  "internal/restore", test: "TestCraftedNamesNeverShareATemporaryFile",
	},
	{
		name: "a header-only file converts to a part of no rows (issue 43)",
		file: "internal/table/source.go",
		from: "l.Parts = []Range{{Offset: size, Line: 2}}",
		to:   "return nil, fmt.Errorf(\"%s: %w\", path, ErrNoRecords)",
		pkg:  "internal/plan", test: "TestEmptyDaysAndABOM",
	},
	{
		name: "every GCS call waits out a 429 (issue 41)",
		file: "internal/gcs/paced.go",
		from: "again := errors.Is(err, ErrRateLimited) || safe503",
		to:   "again := false",
		pkg:  "internal/gcs", test: "TestEveryCallRidesOutA429",
	},
	{
		name: "after a 503 only what is safe to repeat is sent again",
		file: "internal/gcs/paced.go",
		from: "again := errors.Is(err, ErrRateLimited) || safe503",
		to:   "again := true",
		pkg:  "internal/gcs", test: "TestA503IsSentAgainOnlyWhereThatIsSafe",
	},
	{
		name: "merger confirms each final object's CRC32C",
		file: "internal/merger/confirm.go",
		from: "a.Size != f.WireSize || a.CRC32C != f.WireCRC32 || a.Metadata",
		to:   "a.Size != f.WireSize || a.Metadata",
		pkg:  "internal/merger", test: "TestAnObjectReplacedAfterItsEventDoesNotEndOK",
	},
	{
		name: "a delete of a generation spares a newer version",
		file: "internal/gcs/gcs.go",
		from: "o := s.c.Bucket(bucket).Object(name).If(storage.Conditions{GenerationMatch: gen})",
		to:   "o, _ := s.c.Bucket(bucket).Object(name), gen",
		pkg:  "internal/gcs", test: "TestConformanceShim/DeleteGenerationSparesANewerVersion",
	},
	{
		name: "a compose onto an existing object honours its precondition",
		file: "internal/gcs/gcs.go",
		from: "c := conditions(b.Object(dst), opt.IfAbsent, opt.IfGeneration).ComposerFrom(handles...)",
		to:   "c := b.Object(dst).ComposerFrom(handles...)",
		pkg:  "internal/gcs", test: "TestConformanceShim/ComposePreconditions",
	},
	{
		name: "an end event on the control topic needs an end key",
		file: "internal/merger/intake.go",
		from: "\tif topic == \"control\" {\n\t\tif err := m.proven(ctx, &ev)",
		to:   "\tif false {\n\t\tif err := m.proven(ctx, &ev)",
		pkg:  "internal/merger", test: "TestForgedEndEventsChangeNothing",
	},
	{
		name: "the worker's duplicate check compares the CRC32C",
		file: "internal/worker/worker.go",
		from: "return a.Size == p.WireSize && a.CRC32C == p.WireCRC32C && a.Metadata",
		to:   "return a.Size == p.WireSize && a.Metadata",
		pkg:  "internal/worker", test: "TestStaleStagingIsReplacedOnce",
	},
	{
		name: "the bench's goal is the documented threshold",
		file: "internal/bench/verdict/goals.go",
		from: "q <= 0.5, true))",
		to:   "q <= 0.6, true))",
		pkg:  "internal/bench/verdict", test: "TestGoalsAtTheirThresholds",
	},
	{
		name: "a composed plain copy gets the type of its extension",
		file: "internal/merger/compose.go",
		from: "ContentType:   codec.ContentTypeOf(codec.Codec(man.Codec), f.Object),",
		to:   "ContentType:   codec.Codec(man.Codec).ContentType(),",
		pkg:  "internal/command", test: "TestAPlainCopyGetsTheTypeOfItsExtension",
	},
	{
		name: "a file of more than 32 chunks composes in the fewest levels",
		file: "internal/merger/tree.go",
		from: "if len(srcs) <= fanIn {",
		to:   "if len(srcs) <= 2 {",
		pkg:  "internal/merger", test: "TestComposeTreeLevelsAndCalls",
	},
	{
		name: "the merger's memory does not grow with the file count",
		file: "internal/merger/confirm.go",
		from: "if len(sum.objects) < message.MaxDoneInline {",
		to:   "if true {",
		pkg:  "internal/merger", test: "TestMergerMemoryDoesNotGrowWithFileCount",
	},
	{
		name: "the producer holds the manifest a page at a time",
		file: "internal/manifest/writer.go",
		from: "files >= min(maxFiles, message.PageFiles) ||",
		to:   "files >= 100*min(maxFiles, message.PageFiles) ||",
		pkg:  "internal/manifest", test: "TestTheWriterHoldsPagesNotTheTransfer",
	},
	{
		name: "a table load is checked against the rows of the parts",
		file: "internal/merger/load.go",
		from: "case job.Rows >= 0 && rows != job.Rows:",
		to:   "case false:",
		pkg:  "internal/merger", test: "TestFailedLoadEndsFailedAndKeepsTheParts/rows_differ",
	},
	{
		name: "a transfer that failed in its load keeps its parts",
		file: "internal/merger/end.go",
		from: "if t.status == message.StatusOK || t.kept {",
		to:   "if t.status == message.StatusOK {",
		pkg:  "internal/merger", test: "TestFailedLoadEndsFailedAndKeepsTheParts/job_failed",
	},
	{
		name: "a bad record left out takes back the values of its first columns",
		file: "internal/table/convert.go",
		from: "c.cols[j].pop() // the record's values so far",
		to:   "_ = j",
		pkg:  "internal/table", test: "TestBadRowsAreLeftOutAndNamed",
	},
	{
		name: "a claimed shared load counts a member that ended only by that job",
		file: "internal/loader/batch.go",
		from: "if ok, err := b.endedBy(ctx, mb.Bucket, tid, c.Job.ID); !ok || err != nil {",
		to:   "if false {",
		pkg:  "internal/merger", test: "TestAClaimedBatchRunsAgainAsClaimed",
	},
	{
		name: "an append composes only onto the generation the producer proved",
		file: "internal/merger/compose.go",
		from: "case gen != 0 && (err == nil && a.Generation != gen || errors.Is(err, gcs.ErrNotFound)):",
		to:   "case false:",
		pkg:  "internal/merger", test: "TestAnAppendToAnObjectThatChangedFailsAndLeavesIt",
	},
	{
		name: "an append's compose holds the object to the generation proven",
		file: "internal/merger/compose.go",
		from: "opt.IfAbsent, opt.IfGeneration, opt.DeleteSources = false, gen, false",
		to:   "opt.IfAbsent, opt.DeleteSources = false, false",
		pkg:  "internal/e2e", test: "TestAnAppendRacingAnotherWriterFailsCleanly",
	},
	{
		name: "a worker never replaces another transfer's final object, whatever its message says",
		file: "internal/worker/worker.go",
		from: "case p.Final && b.Metadata[message.MetaTransfer] != c.TransferID:",
		to:   "case p.Final && !c.Overwrite && b.Metadata[message.MetaTransfer] != c.TransferID:",
		pkg:  "internal/worker", test: "TestAWorkerNeverReplacesAnotherTransfersFinalObject",
	},
	{
		name: "a worker writes only the chunks its transfer's chunk key proves",
		file: "internal/message/keys.go",
		from: "return k.Chunks == \"\" || (ValidKeyHex(key) && KeyHash(key) == k.Chunks)",
		to:   "return true",
		pkg:  "internal/worker", test: "TestAChunkMessageWithoutItsTransfersKeyWritesNothing",
	},
	{
		name: "a transfer is refused while another writes the same objects",
		file: "internal/lease/lease.go",
		from: "		if live {",
		to:   "		if live && false {",
		pkg:  "internal/e2e", test: "TestTheSameCommandTwiceAtOnceEndsOneOKAndRefusesTheOther",
	},
	{
		name: "the merger frees a transfer's destination when it ends",
		file: "internal/merger/end.go",
		from: "if err := m.o.Store.Delete(ctx, t.bucket, message.LeaseObject(done.TransferID)); err != nil && !errors.Is(err, gcs.ErrNotFound) {",
		to:   "if err := error(nil); err != nil {",
		pkg:  "internal/e2e", test: "TestTheSameCommandTwiceAtOnceEndsOneOKAndRefusesTheOther",
	},
	{
		name: "restore makes a directory at a temporary name only while no file is written there",
		file: "internal/restore/temps.go",
		from: "for t.busy(root, reserved) {",
		to:   "for false {",
		pkg:  "internal/restore", test: "TestCraftedNamesNeverShareATemporaryFile",
	},
	{
		name: "restore reports a file restored only as it reads back",
		file: "internal/restore/object.go",
		from: "if n != w.size || crc != w.crc {",
		to:   "if false {",
		pkg:  "internal/restore", test: "TestAFileIsRestoredOnlyAsItIsReadBack",
	},
	{
		name: "an idempotency key's transfer id under a secret is the secret's",
		file: "internal/message/keys.go",
		from: "		if secret != \"\" {",
		to:   "		if false {",
		pkg:  "internal/e2e", test: "TestAPlantedKeyObjectCannotEndAKeyedTransfer",
	},
	{
		name: "restore names an object its transfer's listing recorded otherwise",
		file: "internal/restore/listing.go",
		from: "if (c.cur.Generation != 0 && c.cur.Generation != a.Generation) || c.cur.CRC32C != a.CRC32C || c.cur.Size != a.Size {",
		to:   "if false {",
		pkg:  "internal/e2e", test: "TestRestoreNamesAnObjectReplacedAfterItsTransferEnded",
	},
	{
		name: "a staged overwrite checks every object it replaces before it replaces any",
		file: "internal/merger/compose.go",
		from: "if a == nil || a.Generation == f.Replaces || f.AppendsTo() != 0 ||",
		to:   "if true || a.Generation == f.Replaces || f.AppendsTo() != 0 ||",
		pkg:  "internal/e2e", test: "TestAnOlderOverwriteNeverReplacesANewerOnesObjects",
	},
	{
		name: "an overwrite notes the generation it found",
		file: "internal/producer/skip.go",
		from: "f.Replaces = a.Generation",
		to:   "f.Replaces = 0",
		pkg:  "internal/e2e", test: "TestOverwriteReplacesAtomically",
	},
	{
		name: "an ok end removes the parts an earlier transfer of its sources left",
		file: "internal/merger/reconcile.go",
		from: "m.removeStale(ctx, t, sum)",
		to:   "_ = sum",
		pkg:  "internal/merger", test: "TestAnEndRemovesTheStalePartsOfItsSources",
	},
	{
		name: "a file larger than a shard is split by chunk ranges",
		file: "internal/pool/walker.go",
		from: "per := min(int(max(1, w.o.Bytes/f.ChunkSize)), max(1, (f.Chunks+splitWays-1)/splitWays))",
		to:   "per := f.Chunks",
		pkg:  "internal/pool", test: "TestAPooledTransferSplitsALargeFileByChunkRanges",
	},
	{
		name: "an agent reads a shard's files only under its own roots",
		file: "internal/plan/adopt.go",
		from: "\troot, in, err := p.conf.place(sf.Path)\n\tif err != nil {",
		to:   "\troot, in, err := p.conf.place(sf.Path)\n\tif false {",
		pkg:  "internal/pool", test: "TestAnAgentRefusesAShardOutsideItsRoots",
	},
	{
		name: "a shard's page waits for every chunk of it to be stored",
		file: "internal/engine/agent.go",
		from: "final := err == nil || errors.Is(err, queue.ErrPermanent) || (m.DeliveryAttempt >= t.attempts && t.attempts > 0)",
		to:   "final := true",
		pkg:  "internal/engine", test: "TestAShardWaitsForEveryChunkItPublished",
	},
	{
		name: "a stuck agent gives its shard up",
		file: "internal/engine/agent.go",
		from: "ctx, cancel := context.WithTimeout(ctx, timeout)",
		to:   "ctx, cancel := context.WithTimeout(ctx, 1000*timeout)",
		pkg:  "internal/e2e", test: "TestAStuckAgentDoesNotHoldAPooledTransferHostage",
	},
}

// root is the module's root directory.
func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s: %v", dir, err)
	}
	return dir
}

// mutate returns m's file with the mutation applied.
func (m mutant) mutate(root string) ([]byte, error) {
	src, err := os.ReadFile(filepath.Join(root, m.file))
	if err != nil {
		return nil, err
	}
	if n := strings.Count(string(src), m.from); n != 1 {
		return nil, fmt.Errorf("%s holds %q %d times, want once: the guard moved; update the mutant", m.file, m.from, n)
	}
	return []byte(strings.Replace(string(src), m.from, m.to, 1)), nil
}

// TestMutantsApply: every mutant still finds its line, and its test
// exists, so that the list cannot rot unnoticed between runs of make
// mutants.
func TestMutantsApply(t *testing.T) {
	dir := root(t)
	for _, m := range mutants {
		if _, err := m.mutate(dir); err != nil {
			t.Errorf("%s: %v", m.name, err)
		}
		top, _, _ := strings.Cut(m.test, "/")
		decl := regexp.MustCompile(`(?m)^func ` + regexp.QuoteMeta(top) + `\(t \*testing\.T\)`)
		files, _ := filepath.Glob(filepath.Join(dir, m.pkg, "*_test.go"))
		found := false
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			found = found || decl.Match(b)
		}
		if !found {
			t.Errorf("%s: no test %s in %s", m.name, top, m.pkg)
		}
	}
}

// TestMutants applies each mutant in turn and runs its test, which must
// fail: a guard whose test passes without it is not guarded.
func TestMutants(t *testing.T) {
	if os.Getenv("FERRY_MUTANTS") == "" {
		t.Skip("FERRY_MUTANTS is not set: make mutants runs them (each builds and tests a package)")
	}
	dir := root(t)
	for _, m := range mutants {
		t.Run(m.name, func(t *testing.T) {
			src, err := m.mutate(dir)
			if err != nil {
				t.Fatal(err)
			}
			tmp := t.TempDir()
			mutated := filepath.Join(tmp, filepath.Base(m.file))
			if err := os.WriteFile(mutated, src, 0o644); err != nil {
				t.Fatal(err)
			}
			overlay, _ := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(dir, m.file): mutated}})
			ov := filepath.Join(tmp, "overlay.json")
			if err := os.WriteFile(ov, overlay, 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			run := "^" + strings.ReplaceAll(m.test, "/", "$/^") + "$"
			cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-run", run, "./"+m.pkg)
			cmd.Dir = dir
			// Through GOFLAGS, so that the binaries an end-to-end test
			// builds itself (go build) carry the mutant too.
			cmd.Env = append(os.Environ(), "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -overlay="+ov))
			t0 := time.Now()
			out, err := cmd.CombinedOutput()
			top, _, _ := strings.Cut(m.test, "/")
			switch {
			case ctx.Err() != nil:
				t.Fatalf("go test %s -run %s with the mutant: no end within 10 minutes\n%s", m.pkg, run, quote(out))
			case err == nil:
				t.Fatalf("the mutant survived: %s passes with %s changed from %q to %q\n%s", m.test, m.file, m.from, m.to, quote(out))
			case !strings.Contains(string(out), "--- FAIL: "+top):
				t.Fatalf("go test %s -run %s with the mutant failed, but not in %s (a build error?):\n%s", m.pkg, run, top, quote(out))
			}
			t.Logf("killed: %s fails without the guard (%.0f s): %s", m.test, time.Since(t0).Seconds(), firstFailure(string(out)))
		})
	}
}

// quote marks each line of a child go test's output, so that its own
// "--- PASS" lines are not counted as this run's.
func quote(out []byte) string {
	return "| " + strings.ReplaceAll(strings.TrimSpace(string(out)), "\n", "\n| ")
}

// firstFailure is the first line of out that a failing test wrote.
func firstFailure(out string) string {
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if strings.Contains(l, "_test.go:") || strings.Contains(l, "cases.go:") {
			if len(l) > 240 {
				l = l[:240] + "…"
			}
			return l
		}
	}
	return ""
}
