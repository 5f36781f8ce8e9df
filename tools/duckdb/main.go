// Command duckdb-sql runs one DuckDB statement and prints its rows, one a
// line: what make bench's workload 8 needs of DuckDB (COPY … TO parquet)
// where no duckdb CLI is installed. It is a module of its own, built by
// make duckdb, so that ferry's own build never needs cgo.
package main

import (
	"database/sql"
	"fmt"
	"os"

	_ "github.com/duckdb/duckdb-go/v2"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: duckdb-sql 'STATEMENT'")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "duckdb-sql:", err)
		os.Exit(1)
	}
}

func run(stmt string) error {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return err
	}
	defer db.Close()
	rows, err := db.Query(stmt)
	if err != nil {
		return err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		fmt.Println(vals...)
	}
	return rows.Err()
}
