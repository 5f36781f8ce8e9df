// Package mutants proves that ferry's guards are tested: each mutant
// removes or weakens one line behind a promise (ok only over bytes GCS
// confirms, a delete that spares a newer version, memory that does not grow
// with the file count…), and the test named beside it must then fail.
//
// The mutants are applied with go test -overlay, so the checkout is never
// modified. make mutants runs them all (FERRY_MUTANTS=1); make test checks
// only that each still applies to the code and names a test that exists.
package mutants
