package message

import (
	"fmt"
	"strings"
)

// A transfer that asks for the pool (Request.Pool) is walked once, by the
// producer that takes it, and cut into shards: a shard is one manifest
// page's files (at most ShardFiles files, PageChunks chunks, ShardBytes
// bytes). Its plan is an object in the transfer's staging prefix
// (ShardObject); a Shard message on the shards topic names it. An agent
// that claims the shard reads, compresses and uploads its files on its
// own host and writes the page (ManifestPage) and then what it did
// (ShardDoneObject); the producer seals the manifest once every shard's
// done object is there. A message is a claim, the objects are the proof:
// the message carries no path, no size and no key.

// Shard is the message of one shard on the shards topic.
type Shard struct {
	V          int    `json:"v"`
	TransferID string `json:"transfer_id"`
	Bucket     string `json:"bucket"`
	Run        string `json:"run"`
	Index      int    `json:"index"`
	// Round counts the times the shard was published again by an agent
	// that could not read it once its deliveries ran out while other
	// agents had not tried it (at most MaxShardRounds).
	Round int `json:"round,omitempty"`
}

// MaxShardRounds bounds the rounds of a shard: each round is the shards
// subscription's delivery attempts again.
const MaxShardRounds = 10

func (s *Shard) version() int { return s.V }

// Check refuses a shard message that names no transfer, bucket or run, or
// a negative index.
func (s *Shard) Check() error {
	switch {
	case s.TransferID == "" || strings.ContainsAny(s.TransferID, "/\\") || s.Bucket == "" || s.Run == "" || strings.ContainsAny(s.Run, "/\\"):
		return fmt.Errorf("%w: shard %d names no transfer, bucket or run (transfer %q, bucket %q, run %q)", ErrMalformed, s.Index, s.TransferID, s.Bucket, s.Run)
	case s.Index < 0:
		return fmt.Errorf("%w: shard index %d of transfer %s", ErrMalformed, s.Index, s.TransferID)
	case s.Round < 0 || s.Round > MaxShardRounds:
		return fmt.Errorf("%w: shard %d of transfer %s: round %d, want 0 to %d", ErrMalformed, s.Index, s.TransferID, s.Round, MaxShardRounds)
	}
	return nil
}

// ShardPlan is the body of a ShardObject: what an agent needs to send the
// shard's files, written by the producer that walked the transfer.
type ShardPlan struct {
	V     int `json:"v"`
	Index int `json:"index"`
	// Page is the manifest page the shard is, or is a range of: its first
	// file's index and its counts; PageIndex its number.
	PageIndex int  `json:"page_index"`
	Page      Page `json:"page"`
	// Range, when set, is the shard's part of a file larger than a shard,
	// alone on its page: the agent sends those chunks and reports them in
	// its done object, and the producer writes the page once every range
	// is done.
	Range *ChunkSpan `json:"range,omitempty"`
	// Header is the transfer's manifest header as the walk began it: not
	// sealed, no files.
	Header Manifest `json:"header"`
	// ChunkKey is the run's chunk key, which the agent's chunk messages
	// carry (Keys.Chunks): a secret, as the staging prefix is the
	// fleet's only.
	ChunkKey string      `json:"chunk_key"`
	Files    []ShardFile `json:"files"`
}

func (p *ShardPlan) version() int { return p.V }

// ChunkSpan is the chunks Lo to Hi-1 of a file.
type ChunkSpan struct {
	Lo int `json:"lo"`
	Hi int `json:"hi"`
}

// ShardFile is one file of a shard as the walk found it.
type ShardFile struct {
	// Path is the source file's path as the walk named it: absolute, on
	// the share every agent mounts at the same place.
	Path   string `json:"path"`
	Rel    string `json:"rel"`
	Object string `json:"object"`
	Size   int64  `json:"size"`
	// Mod and Ctime are UnixNano; Ino the inode (a file replaced since
	// the walk is refused).
	Mod       int64  `json:"mod"`
	Ctime     int64  `json:"ctime,omitempty"`
	Ino       uint64 `json:"ino,omitempty"`
	Perm      uint32 `json:"perm,omitempty"`
	UID       uint32 `json:"uid,omitempty"`
	GID       uint32 `json:"gid,omitempty"`
	Owned     bool   `json:"owned,omitempty"`
	ChunkSize int64  `json:"chunk_size"`
	Chunks    int    `json:"chunks"`
	Staged    bool   `json:"staged,omitempty"`
	Replaces  int64  `json:"replaces,omitempty"`
	// Append is set for a file sent as its tail (plan.File.Append).
	Append *ChunkInfo `json:"append,omitempty"`
}

// Check holds a plan to the message that named it and to its own page: the
// same index, as many files as the page says, in the page's bounds.
func (p *ShardPlan) Check(s Shard) error {
	h := p.Header
	switch {
	case p.Index != s.Index || h.TransferID != s.TransferID || h.Run != s.Run || h.Bucket != s.Bucket:
		return fmt.Errorf("%w: shard plan %d of transfer %s run %s in bucket %s is not shard %d of transfer %s run %s in %s",
			ErrMalformed, p.Index, h.TransferID, h.Run, h.Bucket, s.Index, s.TransferID, s.Run, s.Bucket)
	case len(p.Files) != p.Page.Files || p.Page.Files < 1 || p.Page.Files > PageFiles || p.Page.First < 0:
		return fmt.Errorf("%w: shard %d of transfer %s lists %d files, its page %d (first %d)", ErrMalformed, p.Index, h.TransferID, len(p.Files), p.Page.Files, p.Page.First)
	case p.ChunkKey == "":
		return fmt.Errorf("%w: shard %d of transfer %s has no chunk key", ErrMalformed, p.Index, h.TransferID)
	case p.PageIndex < 0 || p.PageIndex > p.Index:
		return fmt.Errorf("%w: shard %d of transfer %s is of page %d", ErrMalformed, p.Index, h.TransferID, p.PageIndex)
	case p.Range != nil && (len(p.Files) != 1 || p.Range.Lo < 0 || p.Range.Lo >= p.Range.Hi || p.Range.Hi > p.Files[0].Chunks):
		return fmt.Errorf("%w: shard %d of transfer %s: chunks %d to %d of %d files", ErrMalformed, p.Index, h.TransferID, p.Range.Lo, p.Range.Hi, len(p.Files))
	}
	chunks := 0
	for _, f := range p.Files {
		if f.Chunks < 1 || f.Size < 0 || f.ChunkSize < 1 || f.Path == "" {
			return fmt.Errorf("%w: shard %d of transfer %s: file %q has %d chunks of %d bytes, size %d", ErrMalformed, p.Index, h.TransferID, f.Rel, f.Chunks, f.ChunkSize, f.Size)
		}
		chunks += f.Chunks
	}
	if chunks != p.Page.Chunks {
		return fmt.Errorf("%w: shard %d of transfer %s: its files have %d chunks, its page %d", ErrMalformed, p.Index, h.TransferID, chunks, p.Page.Chunks)
	}
	return nil
}

// ShardDone is the body of a ShardDoneObject: the agent that sent the
// shard, and what the page it wrote sums to; or, with Error, why no agent
// can send it (the file named in Path), which fails the transfer.
type ShardDone struct {
	V      int        `json:"v"`
	Index  int        `json:"index"`
	Agent  string     `json:"agent"`
	Totals Totals     `json:"totals"`
	Levels []LevelUse `json:"levels,omitempty"`
	// CompressMS is how long the agent read and compressed the shard.
	CompressMS int64 `json:"compress_ms"`
	// Range and Chunks are a range shard's chunks (ShardPlan.Range), as
	// the page records them.
	Range  *ChunkSpan  `json:"range,omitempty"`
	Chunks []ChunkInfo `json:"chunks,omitempty"`
	Error  string      `json:"error,omitempty"`
	Path   string      `json:"path,omitempty"`
}

func (d *ShardDone) version() int { return d.V }

// ShardPrefix holds a run's shard plans (ShardObject), and under it the
// claims (ShardClaimObject) and done objects (ShardDoneObject), each in a
// prefix of its own so that the producer's poll lists the done ones only.
func ShardPrefix(transferID, run string) string {
	return StagingPrefix(transferID) + "h/" + run + "/"
}

// ShardObject is the plan of shard k of a transfer's run.
func ShardObject(transferID, run string, k int) string {
	return fmt.Sprintf("%s%06d.json", ShardPrefix(transferID, run), k)
}

// ShardDonePrefix holds a run's done objects.
func ShardDonePrefix(transferID, run string) string { return ShardPrefix(transferID, run) + "d/" }

// ShardDoneObject is what the agent that sent shard k of a run wrote,
// once: its metadata names the agent (MetaAgent) and the raw bytes it
// sent (MetaRawSize), so that a listing tells who sent what.
func ShardDoneObject(transferID, run string, k int) string {
	return fmt.Sprintf("%s%06d", ShardDonePrefix(transferID, run), k)
}

// ShardClaimPrefix holds a run's claims.
func ShardClaimPrefix(transferID, run string) string { return ShardPrefix(transferID, run) + "c/" }

// ShardClaimObject says which agent last claimed shard k of a run (its
// MetaAgent) and since when (its time of writing): what producer status
// shows of a shard being sent. It proves nothing; the done object does.
func ShardClaimObject(transferID, run string, k int) string {
	return fmt.Sprintf("%s%06d", ShardClaimPrefix(transferID, run), k)
}

// ShardRefusalPrefix holds the refusals of shard k of a run: one object
// per agent that could not read one of its files (ShardRefusalObject).
func ShardRefusalPrefix(transferID, run string, k int) string {
	return fmt.Sprintf("%sr/%06d/", ShardPrefix(transferID, run), k)
}

// ShardRefusalObject says that agent could not read a file of shard k
// (its metadata MetaAgent and MetaError say who and why): once the shard's
// deliveries run out, it is published again while an agent that answers
// has not refused it.
func ShardRefusalObject(transferID, run string, k int, agent string) string {
	return ShardRefusalPrefix(transferID, run, k) + agent
}

// ShardIndex is the shard a done object's or a claim's name names, given
// without its prefix, or false for any other name.
func ShardIndex(rest string) (int, bool) {
	if len(rest) != 6 || strings.Trim(rest, "0123456789") != "" {
		return 0, false
	}
	var k int
	if _, err := fmt.Sscanf(rest, "%06d", &k); err != nil {
		return 0, false
	}
	return k, true
}

// Shard bounds: a shard is at most one manifest page, and smaller, so that
// a transfer spreads over the pool.
const (
	// ShardFiles is the most files a shard holds by default.
	ShardFiles = 250
	// ShardBytes is the most source bytes a shard holds by default; a
	// larger file is split into range shards of about as many bytes.
	ShardBytes = 64 << 20
)
