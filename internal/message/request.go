package message

import "encoding/json"

// Request is a transfer request as a batch system publishes it on the
// requests topic (schema version 1). Omitted fields take the producer's
// defaults (FERRY_CODEC, FERRY_LEVEL, FERRY_CHUNK_SIZE, FERRY_METHOD).
// Decode rejects unknown fields, so a typo fails loudly instead of being
// ignored.
//
//	{"v": 1,
//	 "sources": ["/data/exports/2026-11-29/"],
//	 "destination": "gs://analytics-landing/exports/2026-11-29",
//	 "codec": "zstd", "level": 3, "chunk_size": 33554432,
//	 "overwrite": false,
//	 "method": "nightly-export", "labels": {"team": "risk"},
//	 "idempotency_key": "exports-2026-11-29"}
type Request struct {
	V           int      `json:"v"`
	Sources     []string `json:"sources"`
	Destination string   `json:"destination"`
	Codec       string   `json:"codec,omitempty"`
	Level       int      `json:"level,omitempty"`
	ChunkSize   int64    `json:"chunk_size,omitempty"`
	Overwrite   bool     `json:"overwrite,omitempty"`
	// NoClobber, SkipUnchanged and Checksum are producer submit's -n,
	// --skip-unchanged and --checksum.
	NoClobber     bool `json:"no_clobber,omitempty"`
	SkipUnchanged bool `json:"skip_unchanged,omitempty"`
	// NoAppend sends a file that grew whole, not as its tail (--no-append).
	NoAppend bool   `json:"no_append,omitempty"`
	Checksum bool   `json:"checksum,omitempty"`
	Method   string `json:"method,omitempty"`
	// Symlinks: "files" (the default: follow links to files, skip links
	// to directories), "follow" (-L) or "ignore" (--ignore-symlinks).
	// SkipUnreadable skips what cannot be read instead of failing.
	Symlinks       string `json:"symlinks,omitempty"`
	SkipUnreadable bool   `json:"skip_unreadable,omitempty"`
	// Filters are rsync-style rules, first match wins: "- PATTERN"
	// excludes, "+ PATTERN" includes (--exclude, --include).
	Filters []string `json:"filters,omitempty"`
	// Files, when set, are the only paths sent, each relative to the one
	// source directory (--files-from).
	Files []string `json:"files,omitempty"`
	// Labels are free-form and end up in the benchmark row.
	Labels map[string]string `json:"labels,omitempty"`
	// IdempotencyKey: the same key always names the same transfer, so a
	// request published twice runs once. Without one, the Pub/Sub message
	// id serves, which covers redelivery but not a second publish.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// EndKeySHA256 is the SHA-256 (hex) of a secret the requester keeps:
	// the transfer's key object lists it, so that the requester can cancel
	// the transfer with producer cancel --key-file (see Keys).
	EndKeySHA256 string `json:"end_key_sha256,omitempty"`
	// Convert "parquet" sends delimited text (.csv, .tsv, and the file
	// names ConvertMatch's globs match) as typed Parquet parts, of
	// Schema (BigQuery's JSON schema format) or of a schema inferred per
	// file; ParquetCompression is zstd (default), snappy or none
	// (--convert, --convert-match, --schema, --parquet-compression).
	Convert            string          `json:"convert,omitempty"`
	ConvertMatch       []string        `json:"convert_match,omitempty"`
	Schema             json.RawMessage `json:"schema,omitempty"`
	ParquetCompression string          `json:"parquet_compression,omitempty"`
	// BadRows lets that many bad records of the whole transfer be left
	// out of the parts, each named in a rejects object (--bad-rows).
	BadRows int `json:"bad_rows,omitempty"`
	// Encoding (UTF-8, ISO-8859-1, UTF-16, UTF-16LE or UTF-16BE) and NullMarkers (values read as
	// NULL) say how the files read as text (--encoding, --null-marker).
	Encoding    string   `json:"encoding,omitempty"`
	NullMarkers []string `json:"null_markers,omitempty"`
	// Quote is none (a quote is a character) or a double quote (a
	// field may be quoted); "" is by the file: a double quote for .csv,
	// none for .tsv (--quote).
	Quote string `json:"quote,omitempty"`
	// InferRows is how many records an inferred schema comes from: a
	// number, or "all" (--infer-rows; default 10,000).
	InferRows string `json:"infer_rows,omitempty"`
	// BQTable (PROJECT.DATASET.TABLE) has the merger load the Parquet
	// parts into that table when the transfer ends ok, writing it as
	// BQWrite says: empty (default), append or truncate.
	BQTable string `json:"bq_table,omitempty"`
	BQWrite string `json:"bq_write,omitempty"`
	// Pool has the pool's agents (ferry agent) read, compress and upload
	// the files, each on its own host; the producer only walks them.
	Pool bool `json:"pool,omitempty"`
}

func (r *Request) version() int { return r.V }
