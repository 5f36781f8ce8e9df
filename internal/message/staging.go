package message

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// StagingRoot is the prefix under which ferry keeps its working objects.
// A bucket lifecycle rule on it removes anything a crash left behind.
const StagingRoot = ".ferry/"

// StagingPrefix is where the objects of one transfer live until it ends.
func StagingPrefix(transferID string) string { return StagingRoot + transferID + "/" }

// ManifestObject is the sealed manifest of a transfer.
func ManifestObject(transferID string) string { return StagingPrefix(transferID) + "manifest.json" }

// RunObject holds the id of the transfer's current run: the producer that
// starts a run writes it before it publishes a chunk, so a chunk of an
// earlier run (a producer killed and the transfer resubmitted) is known for
// what it is and dropped without uploading.
func RunObject(transferID string) string { return StagingPrefix(transferID) + "run" }

// NewRun returns a fresh run id: 16 hex digits.
func NewRun() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ChunkObject is the staging object of chunk index of file.
func ChunkObject(transferID string, file, index int) string {
	return fmt.Sprintf("%sc/%06d/%05d", StagingPrefix(transferID), file, index)
}

// ComposingMarker exists once a merger started composing a transfer's final
// objects: from then on every chunk was stored, and a file whose chunks are
// gone may have been composed (its final compose deleted them).
func ComposingMarker(transferID string) string { return StagingPrefix(transferID) + "composing" }

// LoadClaimObject is where the merger claims a transfer for a load job it
// shares with others (a batched --bq-table append), before running it.
func LoadClaimObject(transferID string) string { return StagingPrefix(transferID) + "load-claim.json" }

// ChunkPrefix is the prefix of all chunk objects of a transfer.
func ChunkPrefix(transferID string) string { return StagingPrefix(transferID) + "c/" }

// IntermediateObject is a composite of the compose tree of file: group at level.
func IntermediateObject(transferID string, file, level, group int) string {
	return fmt.Sprintf("%si/%06d/%d-%05d", StagingPrefix(transferID), file, level, group)
}

// TransferObject reports whether rest, a name under a transfer's staging
// prefix, is one of the objects a transfer itself has: its manifest and
// manifest pages, chunks, composites, seek tables and shards.
func TransferObject(rest string) bool {
	if rest == "manifest.json" {
		return true
	}
	for _, kind := range []string{"c/", "i/", "s/", "m/", "k/", "h/"} {
		if strings.HasPrefix(rest, kind) {
			return true
		}
	}
	return false
}

// DoneRoot is the prefix of done markers. It is not under StagingRoot: the
// lifecycle rule that removes what a crash left in staging after a few days
// must not expire the markers, which are kept for FERRY_DONE_RETENTION.
const DoneRoot = ".ferry-done/"

// DoneMarker is the record a finished transfer leaves behind: the done event.
// It outlives the staging prefix, so late or duplicate messages of a finished
// transfer are recognised, and a repeated request can be answered.
func DoneMarker(transferID string) string { return DoneRoot + transferID + ".json" }

// ListingObject is where the listing of a finished transfer lives, beside
// its done marker and removed with it.
func ListingObject(transferID string) string { return DoneRoot + transferID + ".objects.ndjson" }

// SeekTableObject is the staging object holding the seek table of file, the
// last component of its composed final object.
func SeekTableObject(transferID string, file int) string {
	return fmt.Sprintf("%ss/%06d", StagingPrefix(transferID), file)
}

// Metadata keys ferry sets on the objects it writes.
const (
	MetaTransfer  = "ferry-transfer"
	MetaRawSize   = "ferry-raw-size"
	MetaRawCRC32C = "ferry-raw-crc32c"
	MetaCodec     = "ferry-codec"
	// MetaMtime is the source file's modification time, RFC 3339 with
	// nanoseconds, UTC.
	MetaMtime  = "ferry-mtime"
	MetaWorker = "ferry-worker"
	// MetaAgent is the pool's agent that wrote a shard's claim or done
	// object (FERRY_AGENT_ID).
	MetaAgent = "ferry-agent"
	// MetaError is why an agent refused a shard (ShardRefusalObject).
	MetaError    = "ferry-error"
	MetaUploadAt = "ferry-upload-start"
	MetaAttempt  = "ferry-attempt"
	// A Parquet part of a converted source (TablePart): the source's
	// relative path, the part's bytes of it ("OFFSET+SIZE") and its
	// row count.
	MetaTableSource = "ferry-table-source"
	MetaTableRange  = "ferry-table-range"
	MetaTableRows   = "ferry-table-rows"
	// What --skip-unchanged compares for a part (with ferry-mtime, the
	// source's): the source's size, the CRC32C of the part's bytes of it
	// (--checksum), and a digest of the conversion's settings (schema,
	// delimiter, compression, bad rows, constants).
	MetaTableFileSize = "ferry-table-file-size"
	MetaTableRangeCRC = "ferry-table-range-crc32c"
	MetaTableOptions  = "ferry-table-options"
	// MetaReplaced is the generation of the object a staged overwrite
	// replaced (Manifest.Staged): a failed transfer's clean-up keeps such
	// an object, since what it replaced is gone.
	MetaReplaced = "ferry-replaced"
	// MetaAppended is the generation of the object an append composed
	// onto (File.AppendsTo): its earlier bytes are in the new object and
	// nowhere else, so a failed transfer's clean-up keeps it too.
	MetaAppended = "ferry-appended"
	// MetaAdopted is the transfer that wrote an object a later -n run
	// skipped over and took as its own (ferry-transfer patched to it)
	// because that transfer no longer ran: it stays whatever either
	// transfer's end.
	MetaAdopted = "ferry-adopted"
)

// KeptOnFailure reports whether an object with metadata md holds more
// than its transfer created from nothing (it replaced an object, an
// append composed onto one, or it was adopted from a transfer that no
// longer ran), so that no failure, cancel or timeout may delete it.
func KeptOnFailure(md map[string]string) bool {
	return md[MetaReplaced] != "" || md[MetaAppended] != "" || md[MetaAdopted] != ""
}

// ParquetContentType is the media type of Apache Parquet files.
const ParquetContentType = "application/vnd.apache.parquet"

// FinalMetadata is the metadata every final object carries: which transfer
// wrote it, and the size and CRC32C of the raw bytes it decompresses to.
func FinalMetadata(transferID string, rawSize int64, rawCRC uint32, codec string) map[string]string {
	return map[string]string{
		MetaTransfer:  transferID,
		MetaRawSize:   strconv.FormatInt(rawSize, 10),
		MetaRawCRC32C: fmt.Sprintf("%08x", rawCRC),
		MetaCodec:     codec,
	}
}

// WrittenBy says who wrote an object with metadata md, for an error:
// the transfer its MetaTransfer names, or nobody ferry knows.
func WrittenBy(md map[string]string) string {
	if t := md[MetaTransfer]; t != "" {
		return fmt.Sprintf("written by transfer %.64q", t)
	}
	return "not written by ferry"
}

// FormatMtime is a modification time as MetaMtime holds it.
func FormatMtime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// Metadata is the metadata of f's final object: FinalMetadata and, when
// the source had one, its modification time (MetaMtime), which
// --skip-unchanged compares with the source's, and its POSIX attributes
// (PosixMetadata).
func (f *File) Metadata(transferID, codec string) map[string]string {
	md := FinalMetadata(transferID, f.Size, f.RawCRC32C, codec)
	if !f.Mtime.IsZero() {
		md[MetaMtime] = FormatMtime(f.Mtime)
	}
	PosixMetadata(md, f.Posix, f.Mtime)
	return md
}

// The metadata keys of gcloud storage cp --preserve-posix (and gsutil -P):
// ferry writes them, so gcloud restores the attributes of ferry's objects,
// and restore reads them, so ferry restores those of gcloud's. The mode is
// the permission bits in three octal digits ("755"), owner and group and
// the modification time (whole seconds since 1970) decimal.
const (
	MetaPosixMode = "goog-reserved-posix-mode"
	MetaPosixUID  = "goog-reserved-posix-uid"
	MetaPosixGID  = "goog-reserved-posix-gid"
	MetaFileMtime = "goog-reserved-file-mtime"
)

// PosixMetadata adds p and mtime to md under gcloud's keys; nil p and a
// zero mtime add nothing.
func PosixMetadata(md map[string]string, p *Posix, mtime time.Time) {
	if p != nil {
		md[MetaPosixMode] = fmt.Sprintf("%03o", p.Mode&0o777)
		md[MetaPosixUID] = strconv.FormatUint(uint64(p.UID), 10)
		md[MetaPosixGID] = strconv.FormatUint(uint64(p.GID), 10)
	}
	if !mtime.IsZero() && mtime.Unix() >= 0 {
		md[MetaFileMtime] = strconv.FormatInt(mtime.Unix(), 10)
	}
}
