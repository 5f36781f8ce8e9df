package command

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/cli"
	"github.com/ferry-dev/ferry/internal/crc32c"
	"github.com/ferry-dev/ferry/internal/gcs"
	"github.com/ferry-dev/ferry/internal/teststack"
	"github.com/ferry-dev/ferry/internal/testutil"
)

// ferry ls shows each object's size, CRC32C as GCS has it (gcloud's base64)
// and the transfer that wrote it, leaves ferry's own objects out unless
// --all, and with --json prints one document of the same objects.
func TestLsShowsSizesCRC32CAndTheWriter(t *testing.T) {
	const bucket = "ls-objects"
	s := teststack.Bucket(t, bucket)
	ctx := context.Background()
	raw := testutil.CSV(t, 200_000, 3)
	ferry := teststack.FerryObject(t, s, bucket, "d/a.csv.zst", raw, teststack.FerryOptions{Metadata: map[string]string{"ferry-transfer": "t1"}})
	plain := []byte("not ferry's")
	other, err := s.Upload(ctx, bucket, "d/plain.txt", bytes.NewReader(plain), gcs.UploadOptions{Size: int64(len(plain)), CRC32C: crc32c.Checksum(plain)})
	testutil.OK(t, err)
	_, err = s.PutSmall(ctx, bucket, ".ferry-done/t1", []byte("{}"), false, "application/json")
	testutil.OK(t, err)
	t.Setenv("FERRY_ENV_FILE", "")
	run := func(args ...string) string {
		code, out, errs := runFerry(args...)
		if code != cli.ExitOK {
			t.Fatalf("ferry %s: exit %d, stderr %q", strings.Join(args, " "), code, errs)
		}
		return out
	}
	out := run("ls", "gs://"+bucket)
	for _, want := range []string{crc32c.Base64(ferry.CRC32C) + "  t1", "gs://" + bucket + "/d/a.csv.zst", crc32c.Base64(other.CRC32C) + "  -", "2 objects"} {
		if !strings.Contains(out, want) {
			t.Errorf("ferry ls does not show %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, ".ferry-done") {
		t.Errorf("ferry ls shows ferry's own objects without --all:\n%s", out)
	}
	if all := run("ls", "--all", "gs://"+bucket); !strings.Contains(all, ".ferry-done/t1") || !strings.Contains(all, "3 objects") {
		t.Errorf("ferry ls --all:\n%s", all)
	}
	var doc struct {
		Objects []listedObject
		Count   int64
		Bytes   int64
	}
	js := run("ls", "--json", "gs://"+bucket+"/d/")
	if err := json.Unmarshal([]byte(js), &doc); err != nil || doc.Count != 2 || len(doc.Objects) != 2 || doc.Bytes != ferry.Size+other.Size {
		t.Fatalf("ferry ls --json: %v\n%s", err, js)
	}
	if o := doc.Objects[0]; o.TransferID != "t1" || o.RawSize != int64(len(raw)) || o.RawCRC32C != crc32c.Base64(crc32c.Checksum(raw)) || o.CRC32C != crc32c.Base64(ferry.CRC32C) {
		t.Errorf("ferry ls --json's ferry object: %+v", o)
	}
	if empty := run("ls", "--json", "gs://"+bucket+"/none/"); json.Unmarshal([]byte(empty), &doc) != nil || doc.Count != 0 {
		t.Errorf("ferry ls --json of nothing: %q", empty)
	}
}
