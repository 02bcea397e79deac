package catalog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Failure is one row of world_backup_failures: a backup attempt that
// failed after it reached the catalog. It is never restorable.
type Failure struct {
	ID         int64     `db:"id"`
	RunID      string    `db:"run_id"`
	Server     string    `db:"server"`
	StartedAt  time.Time `db:"started_at"`
	FinishedAt time.Time `db:"finished_at"`
	Reason     string    `db:"reason"` // at most MaxReasonBytes, one line
	CreatedAt  time.Time `db:"created_at"`
	// Namespace is the attempt's Job's namespace (migration 0009); "" when
	// recorded without one.
	Namespace string `db:"namespace"`
}

// MaxReasonBytes bounds a failure's reason (the table's CHECK agrees).
const MaxReasonBytes = 1024

// failureColumns is the select list matching Failure, over
// world_backup_failures (not aliased); see columns for the namespace.
const failureColumns = `id, run_id, server, started_at, finished_at, reason, created_at,
	coalesce(` + failureNamespaceSQL + `, '') AS namespace`

// ErrNoSchema is wrapped by the errors of calls that found a table of the
// catalog missing: the database was never migrated, or is older than this
// archiver.
var ErrNoSchema = errors.New("the catalog's tables are missing or out of date: run `archiver migrate` (with the same felis.toml)")

// schemaErr wraps err with ErrNoSchema when PostgreSQL said a table or
// column is missing (undefined_table, undefined_column).
func schemaErr(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "42703") {
		return fmt.Errorf("%w (%s)", ErrNoSchema, pe.Message)
	}
	return err
}

// Reason returns err's text as a failure reason: one line, control
// characters replaced, each of secrets (passwords, keys) masked, cut to
// MaxReasonBytes on a character boundary. An empty text is "unknown error".
func Reason(err error, secrets ...string) string {
	s := "unknown error"
	if err != nil && err.Error() != "" {
		s = err.Error()
	}
	for _, sec := range secrets {
		if len(sec) >= 4 { // shorter ones would mask ordinary words
			s = strings.ReplaceAll(s, sec, "xxxxx")
		}
	}
	s = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	if len(s) > MaxReasonBytes {
		cut := MaxReasonBytes - len("...")
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}

// RecordFailure records the failed attempt f (ID and CreatedAt ignored; an
// empty Namespace as NULL).
// Its reason should come from Reason; a longer one is cut, an empty one is
// "unknown error". A run ID may have any number of failed attempts and a
// row in world_backups besides.
func (db *DB) RecordFailure(ctx context.Context, f Failure) error {
	ctx, cancel := db.bound(ctx)
	defer cancel()
	f.Reason = Reason(errors.New(f.Reason))
	if f.FinishedAt.Before(f.StartedAt) {
		f.FinishedAt = f.StartedAt
	}
	var id int64
	err := db.pool.QueryRow(ctx, `INSERT INTO world_backup_failures (run_id, server, started_at, finished_at, reason, namespace)
		VALUES ($1, $2, $3, $4, $5, NULLIF($6, '')) RETURNING id`, f.RunID, f.Server, f.StartedAt, f.FinishedAt, f.Reason, f.Namespace).Scan(&id)
	if err != nil {
		return fmt.Errorf("recording the failed attempt of run %q: %w", f.RunID, schemaErr(err))
	}
	db.log.Debug("recorded failed attempt", "run_id", f.RunID, "id", id)
	return nil
}

// Failures returns the failed attempts of server ("" for every server)
// that namespace sees (as InNamespace; "" for every namespace), newest
// first, at most limit (<= 0: every one).
func (db *DB) Failures(ctx context.Context, server, namespace string, limit int) ([]Failure, error) {
	ctx, cancel := db.bound(ctx)
	defer cancel()
	rows, _ := db.pool.Query(ctx, `SELECT `+failureColumns+` FROM world_backup_failures
		WHERE ($1 = '' OR server = $1) AND `+inNamespace(failureNamespaceSQL, 3)+`
		ORDER BY finished_at DESC, id DESC LIMIT NULLIF($2, 0)`, server, max(limit, 0), namespace)
	fs, err := pgx.CollectRows(rows, pgx.RowToStructByName[Failure])
	if err != nil {
		return nil, fmt.Errorf("listing failed attempts: %w", schemaErr(err))
	}
	return fs, nil
}

// NewestRuns returns the runs of server ("" for every server) that
// namespace sees (InNamespace; "" for every namespace), newest first, at
// most limit (<= 0: every one).
func (db *DB) NewestRuns(ctx context.Context, server, namespace string, limit int) ([]Record, error) {
	ctx, cancel := db.bound(ctx)
	defer cancel()
	rows, _ := db.pool.Query(ctx, `SELECT `+columns+` FROM world_backups
		WHERE ($1 = '' OR server = $1) AND `+InNamespace(3)+`
		ORDER BY finished_at DESC, id DESC LIMIT NULLIF($2, 0)`, server, max(limit, 0), namespace)
	rs, err := pgx.CollectRows(rows, pgx.RowToStructByName[Record])
	if err != nil {
		return nil, fmt.Errorf("listing runs: %w", schemaErr(err))
	}
	return rs, nil
}
