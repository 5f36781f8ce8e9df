package command

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/ferry-dev/ferry/internal/config"
	"github.com/ferry-dev/ferry/internal/setup"
	"github.com/ferry-dev/ferry/internal/submit"
)

func submitCommand(version string) *cobra.Command {
	f := NewFlags()
	cmd := &cobra.Command{
		Use: "submit [flags] SOURCE... gs://BUCKET/PREFIX",
		Example: `  producer submit data/ gs://my-bucket/landing --wait
  producer submit -n --skip-unchanged data/ gs://my-bucket/landing
  pg_dump mydb | producer submit - gs://my-bucket/dumps/mydb.sql`,
		Short: "transfer files and directories to gs://BUCKET/PREFIX",
		Long: `Transfers each SOURCE, a file or a directory (always walked recursively; a
directory keeps its own name, as with gcloud storage cp -r), to
gs://BUCKET/PREFIX/<relative path>.zst. Flags may come before or after the
arguments.

SOURCE - reads standard input (pg_dump | producer submit - gs://b/dumps/db.sql)
into one object, named as gcloud storage cp - names it, plus the codec's
extension: gs://b/dumps/db.sql.zst. Memory stays within FERRY_PRODUCER_MEMORY;
chunks start at --chunk-size and double every FERRY_MAX_CHUNKS/16 chunks up to
what that memory (or, with FERRY_TRANSPORT=pubsub, FERRY_MESSAGE_MAX) allows,
so the longest stream is about 73 GB at the defaults (9.37 GB with
FERRY_TRANSPORT=pubsub); a longer one fails, naming the variables to raise.

Inside a directory, links to files are followed and links to directories
skipped (as gcloud storage cp -r does); -L follows those too, skipping a
link back to a directory being walked, and --ignore-symlinks skips every
link. FIFOs, sockets and devices are skipped, never opened. Each skipped file
is counted in the done event and named, with its reason, in the transfer's
listing (gs://BUCKET/.ferry-done/ID.objects.ndjson). A file that cannot be
read fails the transfer before anything is sealed, naming the file, unless
--skip-unreadable. A file that changes while it is read (size, mtime or
ctime) fails the transfer: a torn file is never stored.

--exclude and --include take rsync's patterns, matched on the path inside
the source directory, first match wins: --include '*/' --include '*.csv'
--exclude '*' sends only CSV files. --files-from FILE (- for standard input)
sends exactly the paths it lists, one a line, relative to the one SOURCE
directory. --dry-run walks, filters and checks the destination as a real run
would, prints what would be sent and skipped with totals (--json: one JSON
object a line), and sends nothing.

-n skips files whose final object exists. --skip-unchanged skips files whose
final object has the source's size and mtime (ferry-raw-size, ferry-mtime:
one listing of the destination, no file read) and replaces those that
changed; with --checksum it compares size and CRC32C, reading the files.
Skipped files are counted in the done event and the benchmark row. A file
that grew is sent as its tail only, composed onto its object, once the
CRC32C of the object's raw bytes (ferry-raw-crc32c) matches that many of the
file's first bytes, read to check; anything else goes whole, and
--no-append sends every changed file whole.

--convert parquet sends each .csv and .tsv file (and each file whose name a
--convert-match glob matches) as typed Parquet: the file is cut at record
boundaries (quoted newlines respected) into parts of about --chunk-size, and
each part becomes gs://BUCKET/PREFIX/<path>/part-NNNNN.parquet, one row group,
every part of one schema. The schema is --schema FILE (BigQuery's JSON schema,
as bq show --schema prints it) or inferred from the header and the first
10,000 records: INT64, NUMERIC (every value with the same decimals, so 0.51
stays exact), FLOAT64, BOOL, DATE, TIMESTAMP (microseconds, UTC), else STRING;
--dry-run prints it. A record that does not fit (field count, type, invalid
UTF-8, a field over 4 MiB, an unterminated quote) fails the transfer, naming
file, line and column, and no part of it is left; --bad-rows N lets up to N
records with the wrong number of fields or a value that does not fit be left
out instead (a broken quote still fails the file), each named, with its text,
in PREFIX/<path>/rejects.ndjson beside the parts. Other files travel as
usual. BigQuery reads the parts with bq load --source_format=PARQUET.

--bq-table PROJECT.DATASET.TABLE has the merger run one BigQuery load job
over exactly this transfer's Parquet parts (or, without --convert and with
--codec gzip or none, its .csv, .tsv, .ndjson and .jsonl objects as sent,
hive-partitioned when they sit in key=value directories) when it ends ok:
the job id is derived from the transfer, so it loads once however often the
end is repeated, and --bq-write says how it writes the table (empty, the
default, append or truncate). Appends of Parquet parts into one table that
end within FERRY_BQ_TABLE_BATCH_WINDOW (1 minute) share one job, as BigQuery
runs 1,500 a table a day. The done event and the benchmark row carry the
table, the job id and the rows loaded; a failed load ends the transfer failed
with BigQuery's error and leaves the parts in place. The dataset must be in
FERRY_BQ_LOAD_DATASETS; a merger without FERRY_BQ_DATASET writes the job
request to FERRY_LOADS_FILE instead of running it.

While one transfer writes under a destination, another that could write the
same objects (the same command again, a directory above or below, one of its
files) is refused before it sends anything, naming the one that runs; other
prefixes, and other names in one directory, run side by side.

--pool has the pool's agents (ferry agent, one on each host that mounts the
share) send the files: this command walks the sources, cuts them into shards
of FERRY_SHARD_FILES files and publishes them on FERRY_SHARDS_TOPIC, reads no
file, and seals the transfer once every shard is sent. Sources must be
absolute paths under the agents' FERRY_SOURCE_ROOTS; zstd without --level
uses level 3, so that a shard sent twice makes the same bytes.

Prints the transfer id on stdout once the transfer has started. With --wait it
blocks until the transfer's done event and exits 0 only if the transfer
succeeded. --timeout bounds the whole command: connecting, reading and
publishing, and waiting.

Exit status: 0 success, 1 the transfer failed or could not start, 2 a usage
or configuration error.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSubmit(cmd.Context(), cmd, f, args, version)
		},
	}
	f.Register(cmd, true)
	cmd.Flags().BoolVar(&f.pool, "pool", false, "have the pool's agents (ferry agent) read, compress and upload the files, each on its own host")
	return cmd
}

func runSubmit(ctx context.Context, cmd *cobra.Command, f *Flags, args []string, version string) error {
	var cfg config.Producer
	if err := config.FromEnvironment(ctx, &cfg); err != nil {
		return err
	}
	req, err := f.Request(cmd, cfg, args)
	if err != nil {
		return err
	}
	req.Pool = f.pool
	// The process's limit, not the library's: a test binary that submits
	// keeps its own.
	setup.MemoryLimit(int64(cfg.MemoryLimit))
	return submit.Run(ctx, &cfg, submit.Options{
		Request: req, Wait: f.Wait(), JSON: f.JSON(), DryRun: f.DryRun(), Timeout: f.Timeout(), MaxRate: f.MaxRate(),
		Version: version, ID: submit.HostID(), Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr(),
	})
}
