package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/ferry-dev/ferry/internal/benchrow"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/faultproxy"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// Issue 40: ferry cp, the whole engine in one process. These tests run the
// real binary against fake-gcs-server with no Pub/Sub at all:
// PUBSUB_EMULATOR_HOST is unset in its environment, and nothing else of
// ferry runs.

// cpRun is one ferry user: a bucket of their own, a state directory and a
// results file.
type cpRun struct {
	t       *testing.T
	bucket  string
	gcsHost string
	state   string
	results string
	store   *gcs.Store
}

func newCpRun(t *testing.T, gcsHost string) *cpRun {
	t.Helper()
	c := &cpRun{t: t, bucket: fmt.Sprintf("cp-%d", stackSeq.Add(1)), gcsHost: fakeGCS.Host, state: t.TempDir(),
		results: filepath.Join(t.TempDir(), "results.ndjson")}
	fakeGCS.CreateBucket(c.bucket)
	if gcsHost != "" {
		c.gcsHost = gcsHost
	}
	var err error
	if c.store, err = gcs.NewEmulator(context.Background(), fakeGCS.Host); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.store.Close() })
	return c
}

// env is the user's environment: GCS (the stand-in), no Pub/Sub.
func (c *cpRun) env(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PUBSUB_EMULATOR_HOST=") && !strings.HasPrefix(kv, "STORAGE_EMULATOR_HOST=") {
			env = append(env, kv)
		}
	}
	env = append(env, "STORAGE_EMULATOR_HOST="+c.gcsHost, "XDG_STATE_HOME="+c.state, "FERRY_RESULTS_FILE="+c.results,
		"FERRY_LOG_FORMAT=json", "FERRY_LOG_LEVEL=info")
	return append(env, extra...)
}

// start runs ferry cp with args.
func (c *cpRun) start(args ...string) *proc {
	c.t.Helper()
	return startProc(c.t, "ferry cp", "ferry", c.env(), append([]string{"cp"}, args...)...)
}

// ok runs ferry cp with --json to the end, and returns its done event.
func (c *cpRun) ok(args ...string) message.Done {
	c.t.Helper()
	p := c.start(append([]string{"--json"}, args...)...)
	start := time.Now()
	if code := p.wait(5 * time.Minute); code != 0 {
		c.t.Fatalf("ferry cp %v exited %d:\n%s", args, code, tail(p.out.String(), 4000))
	}
	d := doneOf(c.t, p.out.String())
	c.t.Logf("ferry cp %s: %s, %d files in %v", strings.Join(args, " "), d.Status, d.Files, time.Since(start).Round(time.Millisecond))
	return d
}

// doneOf finds the done event --json printed among the output.
func doneOf(t *testing.T, out string) message.Done {
	t.Helper()
	i := strings.Index(out, "{\n")
	if i < 0 {
		t.Fatalf("no done event in the output:\n%s", tail(out, 4000))
	}
	var d message.Done
	if err := json.NewDecoder(strings.NewReader(out[i:])).Decode(&d); err != nil {
		t.Fatalf("done event: %v\n%s", err, tail(out, 4000))
	}
	return d
}

// staged lists the bucket's staging objects (.ferry/).
func (c *cpRun) staged() []string {
	c.t.Helper()
	var left []string
	if err := c.store.List(context.Background(), c.bucket, message.StagingRoot, func(a gcs.Attrs) error {
		left = append(left, a.Name)
		return nil
	}); err != nil {
		c.t.Fatal(err)
	}
	return left
}

// under lists the objects under prefix.
func (c *cpRun) under(prefix string) []string {
	c.t.Helper()
	var names []string
	if err := c.store.List(context.Background(), c.bucket, prefix, func(a gcs.Attrs) error {
		names = append(names, a.Name)
		return nil
	}); err != nil {
		c.t.Fatal(err)
	}
	return names
}

// restoreEqual restores gs://bucket/prefix into a new directory with the
// restore binary and compares every file with the source tree src (whose
// top directory name the objects keep).
func (c *cpRun) restoreEqual(prefix string, srcs ...string) {
	c.t.Helper()
	dest := c.t.TempDir()
	out, err := exec.Command(filepath.Join(binaries(c.t), "restore"), "gs://"+c.bucket+"/"+prefix, dest).CombinedOutput()
	if err != nil {
		c.t.Fatalf("restore: %v\n%s", err, out)
	}
	for _, src := range srcs {
		base := filepath.Dir(src)
		err := filepath.Walk(src, func(path string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(base, path)
			want, _ := os.ReadFile(path)
			got, err := os.ReadFile(filepath.Join(dest, rel))
			if err != nil || !bytes.Equal(got, want) {
				return fmt.Errorf("%s restored as %d bytes (%v), source has %d", rel, len(got), err, len(want))
			}
			return nil
		})
		if err != nil {
			c.t.Fatal(err)
		}
	}
}

// smallTree writes n small files in a few directories, an empty one among
// them.
func smallTree(t *testing.T, dir string, n int) {
	t.Helper()
	for i := range n {
		sub := filepath.Join(dir, fmt.Sprintf("d%d", i%7))
		testutil.OK(t, os.MkdirAll(sub, 0o755))
		body := bytes.Repeat([]byte(fmt.Sprintf("file %d of the tree\n", i)), i%50)
		testutil.OK(t, os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%04d.txt", i)), body, 0o644))
	}
}

// Done when: ferry cp moves a tree and a large file to the stand-in with
// no Pub/Sub emulator and PUBSUB_EMULATOR_HOST unset, restore brings them
// back identical, nothing is staged after, and the row is written.
func TestFerryCpMovesATreeAndALargeFileWithNoPubSub(t *testing.T) {
	t.Parallel()
	c := newCpRun(t, "")
	dir := t.TempDir()
	tree := filepath.Join(dir, "tree")
	smallTree(t, tree, 150)
	big := filepath.Join(dir, "prices.csv")
	testutil.WriteCSV(t, big, 30<<20, 7) // several chunks of cp's 8 MiB
	done := c.ok(tree, big, "gs://"+c.bucket+"/in")
	if done.Status != message.StatusOK || done.Files != 151 {
		t.Fatalf("done %+v, want ok with 151 files", done)
	}
	c.restoreEqual("in", tree, big)
	if left := c.staged(); len(left) != 0 {
		t.Errorf("staging objects left: %v", left)
	}
	rows, err := benchrow.ReadFile(c.results)
	if err != nil || len(rows) != 1 || rows[0].TransferID != done.TransferID || rows[0].Status != "ok" {
		t.Fatalf("rows %+v (%v), want the transfer's one ok row", rows, err)
	}
}

// Ctrl-C stops reading, cancels the transfer, removes what was staged and
// exits 1 saying so; nothing appears under the destination.
func TestFerryCpCtrlCLeavesNothingStaged(t *testing.T) {
	t.Parallel()
	c := newCpRun(t, "")
	big := filepath.Join(t.TempDir(), "big.csv")
	testutil.WriteCSV(t, big, 60<<20, 11)
	p := c.start("--max-rate", "2MB", big, "gs://"+c.bucket+"/int")
	teststack.Until(t, 2*time.Minute, "a chunk staged", func() bool {
		return len(c.under(message.StagingRoot)) > 3 // lease, run, and chunks
	})
	testutil.OK(t, p.cmd.Process.Signal(syscall.SIGINT))
	if code := p.wait(2 * time.Minute); code != 1 {
		t.Fatalf("ferry cp exited %d after Ctrl-C, want 1:\n%s", code, tail(p.out.String(), 4000))
	}
	out := p.out.String()
	if !strings.Contains(out, "interrupted") || !strings.Contains(out, "staging objects are removed") {
		t.Errorf("output does not say it was interrupted and cleaned up:\n%s", tail(out, 2000))
	}
	if left := c.staged(); len(left) != 0 {
		t.Errorf("staging objects left after Ctrl-C: %v", left)
	}
	if got := c.under("int/"); len(got) != 0 {
		t.Errorf("objects under the destination after Ctrl-C: %v", got)
	}
	if j, _ := os.ReadDir(filepath.Join(c.state, "ferry", "cp")); len(j) != 0 {
		t.Errorf("the journal still names the interrupted transfer: %v", j)
	}
}

// bigAndTree writes a CSV of size bytes (seed) and a tree of files small
// files side by side in a new directory: a cp slow enough to act on
// while it runs.
func bigAndTree(t *testing.T, size, seed int64, files int) (big, tree string) {
	t.Helper()
	dir := t.TempDir()
	big, tree = filepath.Join(dir, "big.csv"), filepath.Join(dir, "tree")
	testutil.WriteCSV(t, big, size, seed)
	smallTree(t, tree, files)
	return big, tree
}

// kill -9 in the middle, then the same command again: it takes the same
// transfer up, ends ok with every object identical and leaves no staging.
func TestFerryCpKilledThenRunAgainEndsOK(t *testing.T) {
	t.Parallel()
	c := newCpRun(t, "")
	big, tree := bigAndTree(t, 40<<20, 13, 40)
	dest := "gs://" + c.bucket + "/k9"
	p := c.start("--max-rate", "2MB", big, tree, dest)
	teststack.Until(t, 2*time.Minute, "a chunk staged", func() bool { return len(c.under(message.StagingRoot)) > 3 })
	p.kill9()
	if len(c.staged()) == 0 {
		t.Fatal("nothing staged when killed: the test proves nothing")
	}
	p2 := c.start("--json", big, tree, dest)
	if code := p2.wait(5 * time.Minute); code != 0 {
		t.Fatalf("ferry cp run again exited %d:\n%s", code, tail(p2.out.String(), 4000))
	}
	done := doneOf(t, p2.out.String())
	if done.Status != message.StatusOK || !strings.Contains(p2.out.String(), "taking up the transfer an earlier ferry cp") {
		t.Fatalf("done %+v; output:\n%s", done, tail(p2.out.String(), 3000))
	}
	c.restoreEqual("k9", big, tree)
	if left := c.staged(); len(left) != 0 {
		t.Errorf("staging objects left: %v", left)
	}
}

// Issue 42 §2: the same ferry cp twice at once, by the same user. The
// second neither takes up the first's transfer (its journal is locked
// while the first runs) nor fights it for the objects: it is refused,
// naming the first, and exits 1 having written nothing; the first ends ok.
func TestFerryCpTheSameCommandTwiceAtOnce(t *testing.T) {
	t.Parallel()
	c := newCpRun(t, "")
	big, tree := bigAndTree(t, 24<<20, 17, 20)
	dest := "gs://" + c.bucket + "/twice"
	p1 := c.start("--json", "--max-rate", "4MB", big, tree, dest)
	teststack.Until(t, 2*time.Minute, "the first cp's lease", func() bool { return len(c.under(message.LeaseRoot)) == 1 })
	t1 := strings.TrimPrefix(c.under(message.LeaseRoot)[0], message.LeaseRoot)

	p2 := c.start(big, tree, dest)
	code := p2.wait(2 * time.Minute)
	out2 := p2.out.String()
	if code != 1 || !strings.Contains(out2, "transfer "+t1+" is writing there") || strings.Contains(out2, "taking up the transfer") {
		t.Fatalf("the second cp exited %d, want 1 naming the first's transfer %s:\n%s", code, t1, tail(out2, 3000))
	}
	if n := len(c.under(message.KeyRoot)); n != 1 {
		t.Errorf("%d key objects, want the first cp's only: the second wrote nothing", n)
	}

	if code := p1.wait(5 * time.Minute); code != 0 {
		t.Fatalf("the first cp exited %d:\n%s", code, tail(p1.out.String(), 4000))
	}
	if d := doneOf(t, p1.out.String()); d.Status != message.StatusOK || d.TransferID != t1 {
		t.Fatalf("the first cp: %+v", d)
	}
	c.restoreEqual("twice", big, tree)
	if left := c.staged(); len(left) != 0 {
		t.Errorf("staging objects (or leases) left: %v", left)
	}
}

// Every kind of write the one process makes (its run and key objects,
// manifest pages, uploads, composes, deletes, the listing and the done
// marker) goes through a proxy that answers 429 beyond 40 writes a
// second, as a new bucket does beyond its limit: the transfer ends ok.
func TestFerryCpRidesOutABucketsWriteLimit(t *testing.T) {
	t.Parallel()
	proxy, err := faultproxy.Start("http://"+fakeGCS.Host, faultproxy.Plan{
		Match: func(r *http.Request) bool { return r.Method != http.MethodGet }, WriteLimit: 40})
	testutil.OK(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	c := newCpRun(t, strings.TrimPrefix(proxy.URL(), "http://"))
	dir := t.TempDir()
	tree := filepath.Join(dir, "tree")
	smallTree(t, tree, 300)
	big := filepath.Join(dir, "big.csv")
	testutil.WriteCSV(t, big, 20<<20, 3)
	done := c.ok("--uploads", "8", tree, big, "gs://"+c.bucket+"/paced")
	if done.Status != message.StatusOK || done.Files != 301 {
		t.Fatalf("done %+v", done)
	}
	n := proxy.Counts()
	t.Logf("the proxy refused %d of %d writes with 429", n.Status429, n.Matched) // measured, not asserted
	if n.Status429 == 0 {
		t.Fatalf("no write was refused: the test proves nothing (%+v)", n)
	}
	c.restoreEqual("paced", tree, big)
	if left := c.staged(); len(left) != 0 {
		t.Errorf("staging objects left: %v", left)
	}
}

// A file that grew is sent as its tail and composed onto its object, and
// --convert parquet lands CSV as Parquet parts: the fleet's features, from
// the one process.
func TestFerryCpAppendsAndConverts(t *testing.T) {
	t.Parallel()
	c := newCpRun(t, "")
	dir := t.TempDir()
	log := filepath.Join(dir, "app.log")
	testutil.OK(t, os.WriteFile(log, bytes.Repeat([]byte("2026-12-05 a line of the log\n"), 200_000), 0o644))
	dest := "gs://" + c.bucket + "/logs"
	if d := c.ok("--skip-unchanged", log, dest); d.Status != message.StatusOK {
		t.Fatalf("first copy: %+v", d)
	}
	f, err := os.OpenFile(log, os.O_APPEND|os.O_WRONLY, 0)
	testutil.OK(t, err)
	_, err = f.Write(bytes.Repeat([]byte("2026-12-06 a new line\n"), 3000))
	testutil.OK(t, err)
	testutil.OK(t, f.Close())
	p := c.start("--skip-unchanged", log, dest)
	if code := p.wait(5 * time.Minute); code != 0 || !strings.Contains(p.out.String(), "1 file appended (its tail only): 66.0 kB read, ") {
		t.Fatalf("after the file grew: exit %d, want 0 and a summary that says only the tail moved:\n%s", code, p.out.String())
	}
	c.restoreEqual("logs", log)

	csv := filepath.Join(dir, "prices.csv")
	testutil.WriteCSV(t, csv, 2<<20, 5)
	if d := c.ok("--convert", "parquet", csv, "gs://"+c.bucket+"/tables"); d.Status != message.StatusOK {
		t.Fatalf("convert: %+v", d)
	}
	parts := c.under("tables/prices.csv/part-")
	if len(parts) == 0 || !strings.HasSuffix(parts[0], ".parquet") {
		t.Fatalf("parts under tables/prices.csv/: %v", parts)
	}
}

// On a real terminal of 80 columns (a tmux pane, read with capture-pane,
// wrapped lines joined) ferry cp draws one progress line that fits (bytes
// uploaded of the total, rate, time left) and, on Ctrl-C, says the transfer
// was interrupted and its staging removed.
func TestFerryCpOnATerminal(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("no tmux on this machine (make deps installs it): ferry cp's terminal is not tested")
	}
	c := newCpRun(t, "")
	big := filepath.Join(t.TempDir(), "big.csv")
	testutil.WriteCSV(t, big, 60<<20, 17)
	session := fmt.Sprintf("ferry-cp-%d", os.Getpid())
	var script strings.Builder
	for _, kv := range c.env("FERRY_LOG_LEVEL=info", "FERRY_LOG_FORMAT=auto") {
		if k, v, ok := strings.Cut(kv, "="); ok && !strings.ContainsAny(k, " ()") {
			fmt.Fprintf(&script, "export %s='%s'\n", k, strings.ReplaceAll(v, "'", `'\''`))
		}
	}
	fmt.Fprintf(&script, "%s cp --max-rate 2MB %s gs://%s/term; echo \"EXIT=$?\"; sleep 600\n", filepath.Join(binaries(t), "ferry"), big, c.bucket)
	sh := filepath.Join(t.TempDir(), "run.sh")
	testutil.OK(t, os.WriteFile(sh, []byte(script.String()), 0o755))
	tmux := func(args ...string) string {
		out, err := exec.Command("tmux", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	tmux("new-session", "-d", "-s", session, "-x", "80", "-y", "30", "bash "+sh)
	t.Cleanup(func() { _ = exec.Command("tmux", "kill-session", "-t", session).Run() })
	screen := func() string { return tmux("capture-pane", "-p", "-J", "-t", session) }
	teststack.UntilSays(t, 2*time.Minute, "the progress line on the terminal", func() (bool, string) {
		s := screen()
		return strings.Contains(s, "uploaded") && strings.Contains(s, "MB/s") && strings.Contains(s, "ETA"), s
	})
	var bars []string
	for _, l := range strings.Split(screen(), "\n") {
		if strings.Contains(l, "MB/s") {
			bars = append(bars, l)
		}
	}
	if len(bars) != 1 || utf8.RuneCountInString(bars[0]) >= 80 {
		t.Errorf("at 80 columns the screen holds %d progress lines, want one narrower than 80: %q", len(bars), bars)
	}
	teststack.Until(t, 2*time.Minute, "a chunk staged", func() bool { return len(c.under(message.StagingRoot)) > 3 })
	tmux("send-keys", "-t", session, "C-c")
	teststack.UntilSays(t, 2*time.Minute, "ferry cp to say it was interrupted and exit 1", func() (bool, string) {
		s := screen()
		return strings.Contains(s, "EXIT=1") && strings.Contains(s, "interrupted") && strings.Contains(s, "staging objects are removed"), s
	})
	if left := c.staged(); len(left) != 0 {
		t.Errorf("staging objects left after Ctrl-C on the terminal: %v", left)
	}
	t.Logf("the terminal after Ctrl-C:\n%s", screen())
}

// Issue 43 §2 and §4, from the command line: a Latin-1 export with NULL
// markers lands as UTF-8 Parquet with NULLs, and restore --to csv gives
// it back as UTF-8 text, the NULLs as empty fields.
func TestFerryCpConvertsLatin1WithNullMarkers(t *testing.T) {
	t.Parallel()
	c := newCpRun(t, "")
	dir := t.TempDir()
	src := filepath.Join(dir, "l.csv")
	testutil.OK(t, os.WriteFile(src, []byte("caf\xe9,prix\nd\xe9j\xe0,1.50\nNULL,\\N\nna\xefve,NULL\n"), 0o644))
	if d := c.ok("--convert", "parquet", "--encoding", "ISO-8859-1", "--null-marker", "NULL", "--null-marker", `\N`, src, "gs://"+c.bucket+"/t"); d.Status != message.StatusOK {
		t.Fatalf("convert: %+v", d)
	}
	out := t.TempDir()
	if code, _, stderr := runBinary(t, c.env(), "restore", "--to", "csv", "gs://"+c.bucket+"/t/", out); code != 0 {
		t.Fatalf("restore --to csv: exit %d\n%s", code, stderr)
	}
	got, err := os.ReadFile(filepath.Join(out, "l.csv"))
	testutil.OK(t, err)
	if want := "café,prix\ndéjà,1.50\n,\nnaïve,\n"; string(got) != want {
		t.Fatalf("restored %q, want %q", got, want)
	}
}

// Issue 42 §4: restore compares each object with its transfer's listing.
// One replaced after the transfer ended ok, by a writer that copied its
// ferry metadata (a ferry object in every other respect), is named, with
// the generation and CRC32C the listing recorded, and not restored; the
// others are.
func TestRestoreNamesAnObjectReplacedAfterItsTransferEnded(t *testing.T) {
	t.Parallel()
	c := newCpRun(t, "")
	dir := t.TempDir()
	for i := range 3 {
		testutil.OK(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d.txt", i)), bytes.Repeat([]byte{byte('a' + i)}, 1000), 0o644))
	}
	if d := c.ok("--codec", "none", dir, "gs://"+c.bucket+"/t"); d.Status != message.StatusOK {
		t.Fatalf("cp: %+v", d)
	}
	ctx := context.Background()
	name := "t/" + filepath.Base(dir) + "/f1.txt"
	a, err := c.store.Attrs(ctx, c.bucket, name)
	testutil.OK(t, err)
	forged := bytes.Repeat([]byte("z"), 1000)
	meta := maps.Clone(a.Metadata)
	meta[message.MetaRawCRC32C] = fmt.Sprintf("%08x", crc32c.Checksum(forged)) // restore's own checks pass
	if _, err := c.store.Upload(ctx, c.bucket, name, bytes.NewReader(forged), gcs.UploadOptions{Size: 1000, CRC32C: crc32c.Checksum(forged), Metadata: meta}); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	code, stdout, stderr := runBinary(t, c.env(), "restore", "gs://"+c.bucket+"/t/", out)
	if code == 0 || !strings.Contains(stderr, "gs://"+c.bucket+"/"+name+": generation") || !strings.Contains(stderr, "not the object its transfer's listing recorded") ||
		!strings.Contains(stdout+stderr, "restored 2 of 3 objects") {
		t.Fatalf("restore: exit %d\n%s\n%s\nwant the replaced object named, the others restored", code, stdout, stderr)
	}
	base := filepath.Join(out, filepath.Base(dir))
	if _, err := os.Stat(filepath.Join(base, "f1.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the replaced object was restored: %v", err)
	}
	for _, i := range []int{0, 2} {
		got, err := os.ReadFile(filepath.Join(base, fmt.Sprintf("f%d.txt", i)))
		if err != nil || !bytes.Equal(got, bytes.Repeat([]byte{byte('a' + i)}, 1000)) {
			t.Fatalf("f%d.txt: %v", i, err)
		}
	}
}

// Issue 43 §4, §8: a spreadsheet's UTF-16 export and a TSV with quotes in
// its values go through ferry cp with no option said, and restore --to
// csv gives back their text as UTF-8, the TSV byte for byte.
func TestFerryCpConvertsUTF16AndATSVsQuotes(t *testing.T) {
	t.Parallel()
	c := newCpRun(t, "")
	dir := t.TempDir()
	u16 := []byte{0xff, 0xfe}
	for _, u := range utf16.Encode([]rune("name,qty\r\ncaf\u00e9 \U0001f600,1\r\n\u010a,2\r\n")) {
		u16 = append(u16, byte(u), byte(u>>8))
	}
	testutil.OK(t, os.WriteFile(filepath.Join(dir, "u.csv"), u16, 0o644))
	tsv := "item\tnote\nMonitor 27\" LED\t\"as is\"\n\"open\tx\n"
	testutil.OK(t, os.WriteFile(filepath.Join(dir, "q.tsv"), []byte(tsv), 0o644))
	if d := c.ok("--convert", "parquet", dir, "gs://"+c.bucket+"/t"); d.Status != message.StatusOK {
		t.Fatalf("convert: %+v", d)
	}
	out := t.TempDir()
	if code, _, stderr := runBinary(t, c.env(), "restore", "--to", "csv", "gs://"+c.bucket+"/t/", out); code != 0 {
		t.Fatalf("restore --to csv: exit %d\n%s", code, stderr)
	}
	for name, want := range map[string]string{"u.csv": "name,qty\ncaf\u00e9 \U0001f600,1\n\u010a,2\n", "q.tsv": tsv} {
		got, err := os.ReadFile(filepath.Join(out, filepath.Base(dir), name)) // the directory is sent as itself
		testutil.OK(t, err)
		if string(got) != want {
			t.Errorf("%s restored %q, want %q", name, got, want)
		}
	}
}
