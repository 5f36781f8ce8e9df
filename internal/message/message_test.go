package message

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestDecodeIsStrict(t *testing.T) {
	tests := []struct {
		name, data, want string
	}{
		{"not json", `nope`, "invalid character"},
		{"unknown field", `{"v":1,"sources":["a"],"destination":"gs://b/p","codecc":"zstd"}`, `unknown field "codecc"`},
		{"wrong version", `{"v":2,"sources":["a"],"destination":"gs://b/p"}`, "version 2"},
		{"no version", `{"sources":["a"],"destination":"gs://b/p"}`, "version 0"},
		{"trailing data", `{"v":1} {"v":1}`, "trailing data"},
		{"wrong type", `{"v":1,"chunk_size":"32MiB"}`, "chunk_size"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r Request
			err := Decode([]byte(tc.data), &r)
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Decode(%s) = %v, want ErrMalformed mentioning %q", tc.data, err, tc.want)
			}
		})
	}
}

// roundTrip checks that whatever decodes re-encodes to the same value.
func roundTrip[T any, P interface {
	*T
	version() int
}](t *testing.T, data []byte) {
	var v T
	if err := Decode(data, P(&v)); err != nil {
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("error not marked malformed: %v", err)
		}
		return
	}
	var again T
	if err := Decode(Encode(&v), P(&again)); err != nil {
		t.Fatalf("re-encoded value does not decode: %v", err)
	}
	if !reflect.DeepEqual(normal(v), normal(again)) {
		t.Fatalf("round trip changed the value:\n%+v\n%+v", v, again)
	}
}

// normal makes empty and nil maps and slices compare equal.
func normal(v any) string { return string(Encode(v)) }

func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"v":1,"sources":["/data/x.csv"],"destination":"gs://b/p","codec":"zstd","level":3,"chunk_size":33554432,"labels":{"a":"b"},"idempotency_key":"k"}`))
	f.Add([]byte(`{"v":1}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) { roundTrip[Request](t, data) })
}

func FuzzDecodeChunk(f *testing.F) {
	f.Add(EncodeChunk(goodChunk(), [][]byte{[]byte("abc")}))
	spooled := goodChunk()
	spooled.Spool = "t1-000001-00002"
	f.Add(EncodeChunk(spooled, nil))
	f.Add([]byte("FRYC\x00\x00\x00\x02{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, payload, err := DecodeChunk(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error not marked malformed: %v", err)
			}
			return
		}
		again, p2, err := DecodeChunk(EncodeChunk(c, [][]byte{payload}))
		if err != nil {
			t.Fatalf("re-encoded chunk does not decode: %v", err)
		}
		if normal(c) != normal(again) || !bytes.Equal(payload, p2) {
			t.Fatalf("round trip changed the chunk:\n%+v\n%+v", c, again)
		}
		if c.Spool != "" && (strings.ContainsAny(c.Spool, "/\\") || strings.Contains(c.Spool, "..")) {
			t.Fatalf("decoded a spool name that is a path: %q", c.Spool)
		}
	})
}

func FuzzDecodeEvent(f *testing.F) {
	f.Add(Encode(Event{V: 1, Type: EventChunk, TransferID: "t", Bucket: "b", Parts: []EventPart{{File: 1, Index: 2, Object: "o", Generation: 7, Size: 9, CRC32C: 5}}}))
	f.Add(Encode(Event{V: 1, Type: EventFailed, Error: "boom"}))
	f.Fuzz(func(t *testing.T, data []byte) { roundTrip[Event](t, data) })
}
