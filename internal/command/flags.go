package command

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ferry-dev/ferry/internal/cli"
	"github.com/ferry-dev/ferry/internal/codec"
	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/message"
	"github.com/ferry-dev/ferry/internal/plan"
	"github.com/ferry-dev/ferry/internal/producer"
)

// Flags are the flags of a transfer, producer submit's and ferry cp's. Those left unset take their defaults from
// the environment (FERRY_CHUNK_SIZE, FERRY_CODEC, …), with the same limits.
type Flags struct {
	chunkSize, maxRate                         config.Bytes
	codec, method, key                         string
	level                                      int
	overwrite, noClobber, skipUnchanged, recur bool
	pool                                       bool // producer submit --pool
	checksum, noAppend                         bool
	wait, json                                 bool
	timeout                                    time.Duration
	labels                                     labels
	followLinks, ignoreLinks, skipUnreadable   bool
	filters                                    []plan.Filter
	filesFrom                                  string
	dryRun                                     bool
	convert, schema, parquetCompression        string
	convertMatch, nullMarkers                  []string
	quote                                      string
	badRows                                    int
	encoding, inferRows                        string
	bqTable, bqWrite                           string
}

// NewFlags returns Flags with their defaults.
func NewFlags() *Flags { return &Flags{labels: labels{}} }

// Wait and JSON say whether --wait and --json were given; DryRun, --dry-run;
// Timeout, --timeout; MaxRate, --max-rate once Request has applied the
// configuration's default.
func (f *Flags) Wait() bool             { return f.wait }
func (f *Flags) JSON() bool             { return f.json }
func (f *Flags) DryRun() bool           { return f.dryRun }
func (f *Flags) Timeout() time.Duration { return f.timeout }
func (f *Flags) MaxRate() int64         { return int64(f.maxRate) }

// Register adds the flags to cmd; withWait adds --wait too (ferry cp
// always waits).
func (f *Flags) Register(cmd *cobra.Command, withWait bool) {
	fs := cmd.Flags()
	fs.SortFlags = false
	fs.Var(&f.chunkSize, "chunk-size", "chunk size, 1MiB to 1GiB (default FERRY_CHUNK_SIZE, 32MiB)")
	fs.StringVar(&f.codec, "codec", "", "zstd, gzip or none (default FERRY_CODEC, zstd)")
	fs.IntVar(&f.level, "level", 0, "compression level, fixed; 0: zstd adapts it (1, 3 or 6) to the link")
	fs.StringVar(&f.method, "method", "", "method name recorded in the benchmark row (default FERRY_METHOD, ferry)")
	fs.Var(f.labels, "label", "KEY=VALUE label for the benchmark row (repeatable)")
	fs.StringVar(&f.key, "idempotency-key", "", "the same key always names the same transfer")
	fs.BoolVar(&f.overwrite, "overwrite", false, "replace final objects that exist, once every file is stored")
	fs.BoolVarP(&f.noClobber, "no-clobber", "n", false, "skip files whose final object exists, as gcloud storage cp -n")
	fs.BoolVar(&f.skipUnchanged, "skip-unchanged", false, "skip files whose object has the same size and mtime; send the others (a grown file: its tail)")
	fs.BoolVar(&f.noAppend, "no-append", false, "with --skip-unchanged, send a file that grew whole instead of its tail only")
	fs.BoolVar(&f.checksum, "checksum", false, "with --skip-unchanged, compare size and CRC32C instead of mtime")
	fs.BoolVarP(&f.recur, "recursive", "r", false, "accepted for gcloud habits: directories are always copied recursively")
	fs.Var(&f.maxRate, "max-rate", "most bytes a second to send, e.g. 7MB (default FERRY_MAX_RATE, 0: no limit)")
	fs.BoolVarP(&f.followLinks, "follow-symlinks", "L", false, "follow links to directories too")
	fs.BoolVar(&f.ignoreLinks, "ignore-symlinks", false, "skip every symbolic link inside a directory")
	fs.BoolVar(&f.skipUnreadable, "skip-unreadable", false, "skip what cannot be read instead of failing")
	fs.Var(&filterFlag{&f.filters, false}, "exclude", "skip paths matching this rsync pattern (repeatable; the first match wins)")
	fs.Var(&filterFlag{&f.filters, true}, "include", "send paths matching this rsync pattern (repeatable)")
	fs.StringVar(&f.filesFrom, "files-from", "", "send only the paths this file lists (- for stdin), relative to SOURCE")
	fs.StringVar(&f.convert, "convert", "", "parquet: send .csv and .tsv files as typed Parquet parts")
	fs.StringArrayVar(&f.convertMatch, "convert-match", nil, "with --convert, also convert files whose name matches this glob (repeatable; .tsv files are tab-separated, others comma-separated)")
	fs.StringVar(&f.schema, "schema", "", "with --convert, the schema of every converted file: BigQuery's JSON schema format (default: inferred per file)")
	fs.StringVar(&f.encoding, "encoding", "", "with --convert, the files' encoding: UTF-8 (default) or ISO-8859-1 (latin1), as BigQuery's loads take them, or UTF-16, UTF-16LE, UTF-16BE (a file with a UTF-16 byte order mark is read as such unless latin1 is said); converted to UTF-8")
	fs.StringVar(&f.quote, "quote", "", "with --convert, whether a double quote may quote a field: '\"' (RFC 4180, BigQuery's default) or none (a quote is a character); default: '\"' for .csv, none for .tsv, as most TSV writers mean it")
	fs.StringArrayVar(&f.nullMarkers, "null-marker", nil, "with --convert, a value read as NULL in every column besides an empty field (repeatable; BigQuery's null_markers), e.g. --null-marker NULL --null-marker '\\N'")
	fs.StringVar(&f.inferRows, "infer-rows", "", "with --convert and no --schema, how many records each file's schema is inferred from: a number, or all (reads the whole file once more at planning; default 10000)")
	fs.IntVar(&f.badRows, "bad-rows", 0, "with --convert, leave out up to this many bad records in the whole transfer, naming each in a rejects.ndjson beside its file's parts (BigQuery's maxBadRecords; at most 10000)")
	fs.StringVar(&f.parquetCompression, "parquet-compression", "", "with --convert, the Parquet column compression: zstd (default), snappy or none")
	fs.StringVar(&f.bqTable, "bq-table", "", "load what was sent into this BigQuery table, PROJECT.DATASET.TABLE, once it ends ok")
	fs.StringVar(&f.bqWrite, "bq-write", "", "with --bq-table: empty (the default, as bq load), append or truncate")
	fs.BoolVar(&f.dryRun, "dry-run", false, "print what would be sent and skipped; send nothing")
	if withWait {
		fs.BoolVar(&f.wait, "wait", false, "block until the done event; exit 0 only on success")
	} else {
		f.wait = true
	}
	fs.DurationVar(&f.timeout, "timeout", 0, "give up after this long (0: no limit)")
	jsonHelp := "print one JSON document on stdout: the done event with --wait, the submitted transfer without, the error on a failure"
	if !withWait {
		jsonHelp = "print one JSON document on stdout: the done event, or the error on a failure (with --dry-run: one JSON object a line)"
	}
	fs.BoolVar(&f.json, "json", false, jsonHelp)
	cmd.MarkFlagsMutuallyExclusive("overwrite", "no-clobber")
	cmd.MarkFlagsMutuallyExclusive("no-clobber", "skip-unchanged")
	cmd.MarkFlagsMutuallyExclusive("follow-symlinks", "ignore-symlinks")
	if withWait {
		cmd.MarkFlagsMutuallyExclusive("dry-run", "wait")
	}
}

// Request checks the command line against the configuration and builds the
// request; every error is a usage error naming the flag or argument.
func (f *Flags) Request(cmd *cobra.Command, cfg config.Producer, args []string) (producer.Request, error) {
	if len(args) < 2 {
		return producer.Request{}, cli.Usagef("%s needs at least one SOURCE and a gs://BUCKET/PREFIX destination", cmd.CommandPath())
	}
	if f.timeout < 0 {
		return producer.Request{}, cli.Usagef("--timeout %s: want 0 (no limit) or more", f.timeout)
	}
	changed := cmd.Flags().Changed
	if !changed("chunk-size") {
		f.chunkSize = cfg.ChunkSize
	} else if err := config.CheckChunkSize(f.chunkSize); err != nil {
		return producer.Request{}, cli.Usagef("--chunk-size: %w", err)
	}
	if !changed("max-rate") {
		f.maxRate = cfg.MaxRate
	}
	if !changed("codec") {
		f.codec = cfg.Codec
		if !changed("level") {
			f.level = cfg.Level
		}
	}
	if !changed("method") {
		f.method = cfg.Method
	}
	c, err := codec.Parse(f.codec)
	if err != nil {
		return producer.Request{}, cli.Usagef("--codec: %w", err)
	}
	req := producer.Request{
		Sources: args[:len(args)-1], Destination: args[len(args)-1], Codec: c, Level: f.level,
		ChunkSize: int64(f.chunkSize), Method: f.method, Labels: f.labels, IdempotencyKey: f.key,
		Overwrite: f.overwrite, NoClobber: f.noClobber, SkipUnchanged: f.skipUnchanged, Checksum: f.checksum, NoAppend: f.noAppend,
	}
	req.Selection = plan.Selection{Symlinks: plan.SymlinksFiles, SkipUnreadable: f.skipUnreadable, Filters: f.filters}
	switch {
	case f.followLinks:
		req.Selection.Symlinks = plan.SymlinksFollow
	case f.ignoreLinks:
		req.Selection.Symlinks = plan.SymlinksIgnore
	}
	if f.filesFrom != "" {
		list, err := readFilesFrom(cmd, f.filesFrom)
		if err != nil {
			return producer.Request{}, cli.Usagef("--files-from: %w", err)
		}
		req.Selection.FilesFrom = list
	}
	var schema []byte
	if f.schema != "" {
		if schema, err = readSmall(f.schema, maxSchemaFile); err != nil {
			return producer.Request{}, cli.Usagef("--schema: %w", err)
		}
	}
	if req.Convert, err = plan.ParseConvert(f.convert, f.convertMatch, schema, f.parquetCompression); err != nil {
		return producer.Request{}, cli.Usagef("--convert: %w", err)
	}
	if err := plan.SetBadRows(req.Convert, f.badRows); err != nil {
		return producer.Request{}, cli.Usagef("--bad-rows: %w", err)
	}
	if err := plan.SetText(req.Convert, f.encoding, f.nullMarkers, f.quote); err != nil {
		return producer.Request{}, cli.Usagef("--encoding, --null-marker, --quote: %w", err)
	}
	if err := plan.SetInferRows(req.Convert, f.inferRows); err != nil {
		return producer.Request{}, cli.Usagef("--infer-rows: %w", err)
	}
	if f.bqTable != "" || f.bqWrite != "" {
		if req.Load, err = message.ParseLoad(f.bqTable, f.bqWrite); err != nil {
			return producer.Request{}, cli.Usagef("--bq-table: %w", err)
		}
	}
	if plan.IsStdin(req.Sources) {
		if f.filesFrom == "-" {
			return producer.Request{}, cli.Usagef("--files-from - and SOURCE - both want standard input")
		}
		req.Stdin = cmd.InOrStdin()
	}
	if err := producer.Validate(req); err != nil {
		return producer.Request{}, &cli.UsageError{Err: err}
	}
	req.TransferID = message.KeyedTransferID(cfg.IDSecret, req.IdempotencyKey)
	return req, nil
}

// maxSchemaFile bounds a --schema file: BigQuery's own limit on a
// table's schema is 10,000 columns.
const maxSchemaFile = 4 << 20

// readSmall reads the file at name, refusing one over limit bytes.
func readSmall(name string, limit int64) ([]byte, error) {
	fh, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, limit)
	}
	return b, nil
}

// filterFlag is --exclude or --include: both append to one list, so the
// rules keep the order they were given in, as rsync's do.
type filterFlag struct {
	rules   *[]plan.Filter
	include bool
}

func (f *filterFlag) String() string { return "" }
func (f *filterFlag) Type() string   { return "PATTERN" }
func (f *filterFlag) Set(s string) error {
	r, err := plan.NewFilter(f.include, s)
	if err != nil {
		return err
	}
	*f.rules = append(*f.rules, r)
	return nil
}

// readFilesFrom reads a --files-from list: one path a line, blank lines
// ignored.
func readFilesFrom(cmd *cobra.Command, name string) ([]string, error) {
	r := cmd.InOrStdin()
	if name != "-" {
		fh, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer fh.Close()
		r = fh
	}
	list := []string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	for sc.Scan() {
		if line := strings.TrimRight(sc.Text(), "\r"); line != "" {
			list = append(list, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return list, nil
}

// labels is the repeatable --label KEY=VALUE.
type labels map[string]string

func (l labels) String() string { return fmt.Sprint(map[string]string(l)) }
func (l labels) Type() string   { return "KEY=VALUE" }
func (l labels) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("label %q: want KEY=VALUE", s)
	}
	l[k] = v
	return nil
}
