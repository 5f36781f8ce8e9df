package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// Issue 32 §1, on the real Pub/Sub emulator and the merger binary: failed
// (with the destination prefix, which would delete the final objects),
// cancel and sealed events published on ferry-control by someone without
// the transfer's end key are logged and change nothing, and the transfer
// ends ok. Another user without the key cannot cancel a second transfer
// with producer cancel; an operator (--operator: a key added to the key
// object, which IAM allows operators only) can.
func TestForgedEndEventsOnTheControlTopicChangeNothing(t *testing.T) {
	s := newStack(t, stackOptions{workers: 1, noMerger: true, inlineMax: 4 << 10})
	ctx := context.Background()
	src := filepath.Join(t.TempDir(), "small.csv")
	testutil.WriteCSV(t, src, 300_000, 5)
	env := s.env("FERRY_BUCKETS=" + s.bucket)

	code, stdout, stderr := runBinary(t, env, "producer", "submit", src, "gs://"+s.bucket+"/forged", "--chunk-size", "1MiB")
	if code != 0 {
		t.Fatalf("submit: exit %d, stderr %s", code, stderr)
	}
	id := strings.TrimSpace(stdout)
	if b, err := os.ReadFile(filepath.Join(s.keys, id)); err != nil || !message.ValidKeyHex(strings.TrimSpace(string(b))) {
		t.Fatalf("producer submit kept no end key for %s in FERRY_KEY_DIR: %v %q", id, err, b)
	}
	teststack.Until(t, time.Minute, "the worker to upload the file's one chunk", func() bool {
		_, err := s.store.Attrs(ctx, s.bucket, "forged/small.csv.zst")
		return err == nil
	})
	control := s.q.Publisher(s.ps.ControlTopic)
	for _, typ := range []string{message.EventFailed, message.EventCancel, message.EventSealed} {
		for _, key := range []string{"", message.NewEndKey()} {
			ev := message.Event{V: message.Version, Type: typ, TransferID: id, Bucket: s.bucket, Key: key,
				Error: "forged " + typ, At: time.Now().UTC()}
			if typ == message.EventFailed {
				ev.Prefix = "forged"
			}
			testutil.OK(t, control.Publish(ctx, message.Encode(ev), map[string]string{"transfer_id": id, "type": typ}))
		}
	}
	merger := s.start("merger", "merger", env)
	teststack.Until(t, 2*time.Minute, "the transfer to end", func() bool {
		_, err := s.store.Attrs(ctx, s.bucket, message.DoneMarker(id))
		return err == nil
	})
	if r := s.row(id); r.Status != message.StatusOK {
		t.Fatalf("transfer %s ended %s (%s) after forged end events, want ok", id, r.Status, r.Error)
	}
	if _, err := s.store.Attrs(ctx, s.bucket, "forged/small.csv.zst"); err != nil {
		t.Fatalf("the final object after forged end events: %v", err)
	}
	teststack.Until(t, time.Minute, "the merger to log the six forgeries", func() bool {
		return strings.Count(merger.out.String(), "end event not proven; dropped, nothing changed") >= 6
	})
	for _, typ := range []string{"forged failed", "forged cancel", "forged sealed"} {
		if !strings.Contains(merger.out.String(), typ) {
			t.Errorf("the merger's log does not name what a forgery claimed (%q)", typ)
		}
	}

	// A running transfer (no merger to end it) that another user (no key)
	// cannot cancel, and an operator can.
	merger.kill9()
	code, stdout, stderr = runBinary(t, env, "producer", "submit", "--chunk-size", "1MiB", src, "gs://"+s.bucket+"/forged2")
	if code != 0 {
		t.Fatalf("second submit: exit %d, %s", code, stderr)
	}
	id2 := strings.TrimSpace(stdout)
	other := append(env[:len(env):len(env)], "FERRY_KEY_DIR="+t.TempDir())
	if code, _, stderr := runBinary(t, other, "producer", "cancel", id2); code != 1 || !strings.Contains(stderr, "no end key") || !strings.Contains(stderr, "--operator") {
		t.Fatalf("cancel without the key: exit %d, stderr %q; want exit 1 naming the missing key and --operator", code, stderr)
	}
	if code, out, stderr := runBinary(t, other, "producer", "cancel", "--operator", id2); code != 0 || !strings.Contains(out, "cancel requested for transfer "+id2) {
		t.Fatalf("cancel --operator: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	// What reaches the control topic: a cancel whose key the key object
	// now lists beside the submitter's (the merger's side of it is
	// TestForgedEndEventsChangeNothing's).
	got := s.controlEvent(message.EventCancel, id2)
	b, err := s.store.ReadAll(ctx, s.bucket, message.KeyObject(id2))
	testutil.OK(t, err)
	var k message.Keys
	testutil.OK(t, message.Decode(b, &k))
	if got.TransferID != id2 || !k.Opens(got.Key) || len(k.SHA256) != 2 {
		t.Fatalf("cancel event %+v and key object %+v: want the operator's key listed beside the submitter's", got, k)
	}
}

// Issue 42 §3: the transfer id of --idempotency-key K is k + a prefix of
// sha256(K), which anyone can compute; a submitter may create key objects
// (it writes its own), so one that knows K creates the key object of K's
// transfer first, with a key of its own, and ends it failed before it
// ever ran. With FERRY_IDEMPOTENCY_SECRET the id is an HMAC only holders
// of the secret can compute: the same plant ends a transfer nobody runs,
// and the real one ends ok.
func TestAPlantedKeyObjectCannotEndAKeyedTransfer(t *testing.T) {
	s := newStack(t, stackOptions{workers: 1, inlineMax: 4 << 10})
	ctx := context.Background()
	src := filepath.Join(t.TempDir(), "nightly.csv")
	testutil.WriteCSV(t, src, 200_000, 9)
	const key = "nightly-2026-12-05"
	guessed := message.NewTransferID(key)

	forger := message.NewEndKey()
	k := message.Keys{V: message.Version, TransferID: guessed, SHA256: []string{message.KeyHash(forger)}}
	if _, err := s.store.PutSmall(ctx, s.bucket, message.KeyObject(guessed), message.Encode(k), true, "application/json"); err != nil {
		t.Fatal(err)
	}
	ev := message.Event{V: message.Version, Type: message.EventFailed, TransferID: guessed, Bucket: s.bucket, Key: forger,
		Error: "forged: your nightly failed", At: time.Now().UTC()}
	testutil.OK(t, s.q.Publisher(s.ps.ControlTopic).Publish(ctx, message.Encode(ev), map[string]string{"transfer_id": guessed, "type": ev.Type}))
	teststack.Until(t, time.Minute, "the forged end of the guessed transfer", func() bool {
		_, err := s.store.Attrs(ctx, s.bucket, message.DoneMarker(guessed))
		return err == nil // the plant works on the id anyone computes
	})

	env := s.env("FERRY_IDEMPOTENCY_SECRET=" + strings.Repeat("s3cr3t-", 6))
	code, stdout, stderr := runBinary(t, env, "producer", "submit", "--wait", "--json", "--idempotency-key", key, src, "gs://"+s.bucket+"/nightly")
	if code != 0 || strings.Contains(stdout+stderr, "forged") {
		t.Fatalf("submit with the secret: exit %d, stdout %s, stderr %s; want ok, untouched by the plant", code, stdout, stderr)
	}
	d := doneOf(t, stdout)
	if d.Status != message.StatusOK || d.TransferID == guessed || !strings.HasPrefix(d.TransferID, "h") {
		t.Fatalf("done %+v: want ok under a keyed id, not %s", d, guessed)
	}
	if _, err := s.store.Attrs(ctx, s.bucket, "nightly/nightly.csv.zst"); err != nil {
		t.Fatal(err)
	}
	// The same key and secret name the same transfer: asked again, it is
	// answered from its done marker, not run again.
	code, stdout, _ = runBinary(t, env, "producer", "submit", "--wait", "--json", "--idempotency-key", key, src, "gs://"+s.bucket+"/nightly")
	if again := doneOf(t, stdout); code != 0 || again.TransferID != d.TransferID {
		t.Fatalf("the same key again: exit %d, %s; want transfer %s's done event", code, stdout, d.TransferID)
	}
}
