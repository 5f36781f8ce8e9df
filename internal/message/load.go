package message

import (
	"fmt"
	"regexp"
	"strings"
)

// Load asks the merger to load a transfer's Parquet parts into a BigQuery
// table once the transfer ends ok (producer submit --bq-table, --bq-write;
// a request's bq_table, bq_write), or, with Objects, its delimited text or
// NDJSON objects as they were sent (gzip'd or raw: what BigQuery reads).
type Load struct {
	Table string `json:"table"` // PROJECT.DATASET.TABLE
	Write string `json:"write"` // LoadAppend, LoadTruncate or LoadEmpty
	// Objects loads the transfer's objects of one LoadKind, not Parquet
	// parts (the transfer converted nothing).
	Objects bool `json:"objects,omitempty"`
}

// The kinds of object a load without conversion takes, by the source
// file's name: one kind a job, as a load job reads one format with one
// delimiter.
const (
	KindCSV  = "CSV"                    // .csv
	KindTSV  = "TSV"                    // .tsv: CSV with a tab
	KindJSON = "NEWLINE_DELIMITED_JSON" // .ndjson, .jsonl
)

// LoadKind is the kind of object a load without conversion takes the
// source file path as, "" for a file it does not load.
func LoadKind(path string) string {
	lower := strings.ToLower(path)
	switch {
	case strings.HasSuffix(lower, ".csv"):
		return KindCSV
	case strings.HasSuffix(lower, ".tsv"):
		return KindTSV
	case strings.HasSuffix(lower, ".ndjson"), strings.HasSuffix(lower, ".jsonl"):
		return KindJSON
	}
	return ""
}

// HivePrefix is the source URI prefix of a hive-partitioned load of the
// objects names (of bucket), or "" when they are not laid out as BigQuery
// reads hive partitions: every object directly inside key=value
// directories, the same keys in the same order, below one shared prefix.
// A Parquet part (<file>/part-NNNNN.parquet) is not: its directory is
// its file's name.
func HivePrefix(bucket string, names []string) string {
	var base, keys []string
	for k, name := range names {
		dirs := strings.Split(name, "/")
		dirs = dirs[:len(dirs)-1]
		i := len(dirs)
		for i > 0 && HiveKey(dirs[i-1]) != "" {
			i--
		}
		if i == len(dirs) {
			return "" // no key=value directory above it
		}
		var ks []string
		for _, d := range dirs[i:] {
			ks = append(ks, HiveKey(d))
		}
		if k == 0 {
			base, keys = dirs[:i], ks
			continue
		}
		if strings.Join(dirs[:i], "/") != strings.Join(base, "/") || strings.Join(ks, "/") != strings.Join(keys, "/") {
			return ""
		}
	}
	if len(keys) == 0 {
		return ""
	}
	p := "gs://" + bucket + "/"
	if len(base) > 0 {
		p += strings.Join(base, "/") + "/"
	}
	return p
}

// HiveKey is the key of a key=value directory, "" for any other: a key is
// a column name (a letter or underscore, then letters, digits,
// underscores), the value not empty.
func HiveKey(dir string) string {
	k, v, ok := strings.Cut(dir, "=")
	if !ok || v == "" || !hiveKeyRE.MatchString(k) {
		return ""
	}
	return k
}

var hiveKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,299}$`)

// Loaded is what a transfer's load did: the table, the load job (its id and
// location) and the rows it loaded.
type Loaded struct {
	Table    string `json:"table"`
	JobID    string `json:"job_id"`
	Location string `json:"location,omitempty"`
	Rows     int64  `json:"rows"`
}

// How a load writes its table, as bq load's flags and BigQuery's write
// dispositions say it.
const (
	LoadAppend   = "append"   // WRITE_APPEND
	LoadTruncate = "truncate" // WRITE_TRUNCATE
	LoadEmpty    = "empty"    // WRITE_EMPTY: the table must be empty or absent
)

// BigQuery's names: a project id (6 to 30 lowercase letters, digits and
// hyphens, starting with a letter), a dataset (letters, digits and
// underscores) and a table (letters, digits, underscores and hyphens; ferry
// takes no others).
var (
	projectRE = regexp.MustCompile(`^[a-z][a-z0-9-]{4,28}[a-z0-9]$`)
	datasetRE = regexp.MustCompile(`^[A-Za-z0-9_]+$`)
	tableRE   = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
)

// ParseLoad checks a table reference and a write disposition ("" is
// LoadEmpty, as bq load refuses to overwrite by default).
func ParseLoad(table, write string) (*Load, error) {
	if _, _, _, err := SplitTable(table); err != nil {
		return nil, err
	}
	switch write {
	case "":
		write = LoadEmpty
	case LoadAppend, LoadTruncate, LoadEmpty:
	default:
		return nil, fmt.Errorf("bq write %.32q: want append, truncate or empty", write)
	}
	return &Load{Table: table, Write: write}, nil
}

// SplitTable splits PROJECT.DATASET.TABLE; the error names what is wrong.
func SplitTable(ref string) (project, dataset, table string, err error) {
	parts := strings.Split(ref, ".")
	if len(parts) != 3 || len(ref) > 2100 {
		return "", "", "", fmt.Errorf("bigquery table %.128q: want PROJECT.DATASET.TABLE", ref)
	}
	project, dataset, table = parts[0], parts[1], parts[2]
	switch {
	case !projectRE.MatchString(project):
		return "", "", "", fmt.Errorf("bigquery table %.128q: %.64q is not a project id", ref, project)
	case !datasetRE.MatchString(dataset) || len(dataset) > 1024:
		return "", "", "", fmt.Errorf("bigquery table %.128q: %.64q is not a dataset name (letters, digits, underscores)", ref, dataset)
	case !tableRE.MatchString(table) || len(table) > 1024:
		return "", "", "", fmt.Errorf("bigquery table %.128q: %.64q is not a table name ferry loads (letters, digits, underscores, hyphens)", ref, table)
	}
	return project, dataset, table, nil
}

// LoadJobID is the id of transfer tid's load job: derived from the
// transfer, so that a merger that ends the transfer again finds the job
// instead of loading twice.
func LoadJobID(tid string) string { return "ferry_load_" + tid }
