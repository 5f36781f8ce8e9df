package message

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func goodChunk() Chunk {
	return Chunk{V: Version, TransferID: "t1", Bucket: "bucket-1", Codec: "zstd", Parts: []Part{{
		Object: ChunkObject("t1", 1, 2), File: 1, Path: "data/a.csv", Index: 2, Chunks: 5,
		RawOffset: 64, RawSize: 100, RawCRC32C: 7, WireSize: 3, WireCRC32C: 9,
	}}}
}

func TestChunkEnvelopeRoundTrip(t *testing.T) {
	c := goodChunk()
	c.Parts = append(c.Parts, Part{Object: "p/b.csv.zst", Final: true, File: 2, Path: "b.csv", Chunks: 1,
		RawSize: 5, WireSize: 4, ContentType: "application/zstd", Metadata: map[string]string{"k": "v"}})
	data := EncodeChunk(c, [][]byte{[]byte("ab"), []byte("cdefg")})
	got, payload, err := DecodeChunk(data)
	if err != nil {
		t.Fatal(err)
	}
	if normal(got) != normal(c) || string(payload) != "abcdefg" {
		t.Fatalf("got %+v with payload %q", got, payload)
	}
	// The payload travels as raw bytes: the message is the header plus
	// exactly the payload, with no base64.
	if !bytes.HasSuffix(data, []byte("abcdefg")) || len(data) != HeaderOverhead+len(Encode(c))+7 {
		t.Fatalf("message of %d bytes is not header + raw payload", len(data))
	}
	offs, n := got.Offsets()
	if offs[0] != 0 || offs[1] != 3 || n != 7 {
		t.Fatalf("offsets %v, size %d", offs, n)
	}
}

// A chunk message must never choose a path or an object outside its place.
func TestDecodeChunkRefuses(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Chunk)
		want   string
	}{
		{"absolute spool path", func(c *Chunk) { c.Spool = "/etc/passwd" }, "not a spool file name"},
		{"spool path with a directory", func(c *Chunk) { c.Spool = "sub/x" }, "not a spool file name"},
		{"spool path up", func(c *Chunk) { c.Spool = "..x" }, "not a spool file name"},
		{"dot-dot inside", func(c *Chunk) { c.Spool = "a..b" }, "not a spool file name"},
		{"hidden spool file", func(c *Chunk) { c.Spool = ".hidden" }, "not a spool file name"},
		{"another transfer's spool file", func(c *Chunk) { c.Spool = "t2-000001-00002" }, "not a spool file name of this transfer"},
		{"transfer id with a slash", func(c *Chunk) { c.TransferID = "t/../x" }, "transfer id"},
		{"run that is not a run id", func(c *Chunk) { c.Run = "../../x" }, "run"},
		{"bad bucket", func(c *Chunk) { c.Bucket = "Bucket!" }, "not a bucket name"},
		{"unknown codec", func(c *Chunk) { c.Codec = "lz4" }, "codec"},
		{"no parts", func(c *Chunk) { c.Parts = nil }, "0 parts"},
		{"staging object of another transfer", func(c *Chunk) { c.Parts[0].Object = ChunkObject("t2", 1, 2) }, "staging object"},
		{"final object in staging", func(c *Chunk) {
			c.Parts[0].Final, c.Parts[0].Chunks, c.Parts[0].Index, c.Parts[0].Object = true, 1, 0, ".ferry/t9/manifest.json"
		}, "ferry's own prefix"},
		{"final object over a done marker", func(c *Chunk) {
			c.Parts[0].Final, c.Parts[0].Chunks, c.Parts[0].Index, c.Parts[0].Object = true, 1, 0, DoneMarker("t9")
		}, "ferry's own prefix"},
		{"index out of range", func(c *Chunk) { c.Parts[0].Index = 5 }, "out of range"},
		{"negative size", func(c *Chunk) { c.Parts[0].RawSize = -1 }, "sizes out of range"},
		{"payload shorter than the parts", func(c *Chunk) { c.Parts[0].WireSize = 4 }, "payload 3"},
		{"control character in a name", func(c *Chunk) {
			c.Parts[0].Final, c.Parts[0].Chunks, c.Parts[0].Index, c.Parts[0].Object = true, 1, 0, "a\x00b"
		}, "control character"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := goodChunk()
			tc.modify(&c)
			_, _, err := DecodeChunk(EncodeChunk(c, [][]byte{[]byte("abc")}))
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("DecodeChunk = %v, want ErrMalformed mentioning %q", err, tc.want)
			}
		})
	}
}

func TestDecodeChunkEnvelopeErrors(t *testing.T) {
	good := EncodeChunk(goodChunk(), [][]byte{[]byte("abc")})
	for name, data := range map[string][]byte{
		"empty":           nil,
		"JSON, no magic":  Encode(goodChunk()),
		"header too long": append([]byte("FRYC\xff\xff\xff\xff"), good[8:]...),
		"truncated":       good[:20],
	} {
		t.Run(name, func(t *testing.T) {
			if _, _, err := DecodeChunk(data); !errors.Is(err, ErrMalformed) {
				t.Fatalf("DecodeChunk = %v, want ErrMalformed", err)
			}
		})
	}
}
