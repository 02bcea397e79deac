// Package catalog records backup runs in the world_backups table of a
// PostgreSQL database.
//
// Open connects (pgxpool + Ping); Migrate applies the numbered SQL files
// embedded from migrations/ once each, in order, in one transaction that holds
// a transaction-scoped advisory lock, so two archivers migrating at once are
// safe. Insert records a run idempotently (ON CONFLICT (run_id) DO NOTHING).
//
// Every call is bounded (see Timeouts): the connection setup, each statement
// (statement_timeout), each lock wait (lock_timeout), and the whole call on
// the client side, so a server that accepts and never answers fails the run
// instead of hanging it.
//
// No error or log line of this package contains the database URL or its
// password.
package catalog

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Record is one row of world_backups.
type Record struct {
	ID          int64   `db:"id"`
	RunID       string  `db:"run_id"`
	Server      string  `db:"server"`
	FormerOwner *string `db:"former_owner"`
	// Namespace is the Kubernetes namespace whose Job recorded the run
	// (migration 0009); "" when recorded without one: before that
	// migration, or by an archiver run by hand. See InNamespace.
	Namespace   string    `db:"namespace"`
	ArchiveRef  string    `db:"archive_ref"` // absolute path
	SizeBytes   int64     `db:"size_bytes"`
	SHA256      string    `db:"sha256"` // lowercase hex
	Compression string    `db:"compression"`
	FileCount   int64     `db:"file_count"`
	StartedAt   time.Time `db:"started_at"`
	FinishedAt  time.Time `db:"finished_at"`
	CreatedAt   time.Time `db:"created_at"` // set by the database; ignored by Insert
	// Format is "tar" or "chunked"; "" is recorded as "tar".
	Format string `db:"format"`
	// AddedBytes is what the run added to the store; nil when unknown
	// (rows older than migration 0003).
	AddedBytes *int64 `db:"added_bytes"`
	// MissingSince is when a prune first found the run's archive missing
	// from the store, while it stays missing (MarkMissing); nil otherwise.
	// Set by prunes only: Insert ignores it.
	MissingSince *time.Time `db:"missing_since"`
}

// FutureTolerance is how far after a reader's clock a run may have finished
// and still count as a run: the clock skew allowed between the nodes that
// record runs and those that judge them. A run finished further ahead
// (recorded by a node with a wrong clock) is anomalous: it is never fresh
// (status), and never the newest nor a place of the floor (prune).
const FutureTolerance = 5 * time.Minute

// InFuture reports whether r finished more than FutureTolerance after now.
func (r Record) InFuture(now time.Time) bool { return r.FinishedAt.After(now.Add(FutureTolerance)) }

// ClockBehind reports whether r was recorded by a node whose clock was
// behind: its row was created (by the database's clock) more than
// FutureTolerance after it finished (by the node's). A backup inserts its
// row within a minute or two of its finished_at.
func (r Record) ClockBehind() bool { return r.CreatedAt.Sub(r.FinishedAt) > FutureTolerance }

// EndedAt is when r's run ended as far as the catalog can tell: its
// finished_at, or, when ClockBehind, its created_at. Which run is a
// server's newest (prune's floor, a restore of the latest run, the run a
// chunked backup builds on) is judged by it. Freshness (status, the
// exporter) is judged by finished_at: a node whose clock is behind makes
// its runs look older, which alerts rather than hides.
func (r Record) EndedAt() time.Time {
	if r.ClockBehind() {
		return r.CreatedAt
	}
	return r.FinishedAt
}

// endedAtSQL is Record.EndedAt in SQL, over a row of world_backups.
var endedAtSQL = fmt.Sprintf(`(CASE WHEN created_at - finished_at > make_interval(secs => %d) THEN created_at ELSE finished_at END)`,
	int64(FutureTolerance/time.Second))

// ErrNotFound is returned by Lookup when the run has no row.
var ErrNotFound = errors.New("catalog: no such run")

// DB is a connection pool to the catalog database.
type DB struct {
	pool      *pgxpool.Pool
	log       hclog.Logger
	call      time.Duration // bound of one call, client side
	keepAlive time.Duration // Timeouts.LockKeepAlive
	locks     locks         // the session locks held, and a lost one
}

// Timeouts bound the database calls. A connect_timeout, statement_timeout
// or lock_timeout given in the URL wins over the defaults.
type Timeouts struct {
	// Connect bounds the connection setup (TCP, TLS, authentication);
	// default 10s.
	Connect time.Duration
	// Statement is the server's statement_timeout; default 60s.
	Statement time.Duration
	// Lock is the server's lock_timeout; default 15s.
	Lock time.Duration
	// Call bounds each call (Lookup, Insert, List, Migrate) on the client
	// side, whatever the server does; default Connect + Statement + 5s.
	Call time.Duration
	// LockKeepAlive is how often a held session lock's session is asked
	// whether it still holds it; default DefaultLockKeepAlive.
	LockKeepAlive time.Duration
}

// Default timeouts.
const (
	DefaultConnectTimeout   = 10 * time.Second
	DefaultStatementTimeout = 60 * time.Second
	DefaultLockTimeout      = 15 * time.Second
)

func (t Timeouts) withDefaults() Timeouts {
	if t.Connect <= 0 {
		t.Connect = DefaultConnectTimeout
	}
	if t.Statement <= 0 {
		t.Statement = DefaultStatementTimeout
	}
	if t.Lock <= 0 {
		t.Lock = DefaultLockTimeout
	}
	if t.Call <= 0 {
		t.Call = t.Connect + t.Statement + 5*time.Second
	}
	if t.LockKeepAlive <= 0 {
		t.LockKeepAlive = DefaultLockKeepAlive
	}
	return t
}

// columns is the select list matching Record, over world_backups (not
// aliased). The namespace is read through the row's JSON (namespaceSQL), so
// an archiver newer than its catalog's migrations (the exporter, a restore,
// before a backup has migrated it) still reads it.
const columns = `id, run_id, server, former_owner, archive_ref, size_bytes, sha256, compression,
	file_count, started_at, finished_at, created_at, format, added_bytes, missing_since,
	coalesce(` + namespaceSQL + `, '') AS namespace`

// namespaceSQL is a row's namespace column (migration 0009), NULL in a
// catalog that has not applied it: read by name out of the row's JSON, not
// as a column, which PostgreSQL would refuse to plan without it.
// failureNamespaceSQL is the same over world_backup_failures.
const (
	namespaceSQL        = `(to_jsonb(world_backups)->>'namespace')`
	failureNamespaceSQL = `(to_jsonb(world_backup_failures)->>'namespace')`
)

// In reports whether r is one of the runs the Jobs of namespace see: as
// InNamespace, in Go.
func (r Record) In(namespace string) bool {
	return namespace == "" || r.Namespace == "" || r.Namespace == namespace
}

// InNamespace returns the condition, over world_backups, that a row is one
// of the runs the Jobs of namespace (the query's parameter $n) see: recorded
// from it, or without a namespace (before migration 0009, or by hand); every
// row when the parameter is "" (an archiver run by hand without
// --namespace). Two servers of one name in two namespaces that share a
// catalog then do not build on, prune or restore each other's runs.
func InNamespace(n int) string { return inNamespace(namespaceSQL, n) }

// inNamespace is InNamespace over the namespace column col.
func inNamespace(col string, n int) string {
	return fmt.Sprintf(`($%d = '' OR coalesce(%s, $%d) = $%d)`, n, col, n, n)
}

// Open connects to the database at url with the default timeouts and checks
// the connection with Ping. Errors never contain the URL or the password.
func Open(ctx context.Context, url string, log hclog.Logger) (*DB, error) {
	return OpenWith(ctx, url, log, Timeouts{})
}

// OpenWith is Open with timeouts t (zero fields: the defaults).
func OpenWith(ctx context.Context, url string, log hclog.Logger, t Timeouts) (*DB, error) {
	t = t.withDefaults()
	if log == nil {
		log = hclog.NewNullLogger()
	}
	log = log.Named("catalog")
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's parse errors quote the connection string, redacted only on a
		// best-effort basis (net/url errors quote it whole): say what is wrong
		// without quoting anything.
		return nil, errors.New("database url is not a valid PostgreSQL connection string " +
			"(postgres://user:password@host:5432/dbname, with special characters in the password percent-encoded)")
	}
	if cfg.MaxConns > 4 {
		cfg.MaxConns = 4
	}
	if cfg.ConnConfig.ConnectTimeout <= 0 {
		cfg.ConnConfig.ConnectTimeout = t.Connect
	}
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	for name, d := range map[string]time.Duration{"statement_timeout": t.Statement, "lock_timeout": t.Lock} {
		if _, ok := cfg.ConnConfig.RuntimeParams[name]; !ok {
			cfg.ConnConfig.RuntimeParams[name] = strconv.FormatInt(d.Milliseconds(), 10)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, t.Call)
	defer cancel()
	password := cfg.ConnConfig.Password
	where := fmt.Sprintf("host %s port %d database %s user %s",
		cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database, cfg.ConnConfig.User)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("opening database (%s): %w", where, scrub(err, password))
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connecting to database (%s): %w", where, scrub(err, password))
	}
	log.Debug("connected", "host", cfg.ConnConfig.Host, "port", cfg.ConnConfig.Port,
		"database", cfg.ConnConfig.Database, "user", cfg.ConnConfig.User)
	return &DB{pool: pool, log: log, call: t.Call, keepAlive: t.LockKeepAlive}, nil
}

// bound returns ctx limited to one call's time.
func (db *DB) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, db.call)
}

// closeWait bounds Close: closing a connection to a server that stopped
// answering waits for a cancel request up to 15s (pgconn).
const closeWait = 2 * time.Second

// Close closes the pool, waiting at most closeWait for its connections to
// say goodbye; the rest close in the background.
func (db *DB) Close() {
	done := make(chan struct{})
	go func() {
		db.pool.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(closeWait):
		db.log.Debug("closing the database connections in the background")
	}
}

// Lookup returns the row of runID, or an error wrapping ErrNotFound.
func (db *DB) Lookup(ctx context.Context, runID string) (Record, error) {
	ctx, cancel := db.bound(ctx)
	defer cancel()
	r, err := lookupRow(ctx, db.pool, runID)
	if errors.Is(err, pgx.ErrNoRows) {
		return Record{}, fmt.Errorf("run %q: %w", runID, ErrNotFound)
	}
	if err != nil {
		return Record{}, fmt.Errorf("looking up run %q: %w", runID, err)
	}
	return r, nil
}

// lookupRow reads the row of runID through q (the pool, or a transaction);
// pgx.ErrNoRows when there is none.
func lookupRow(ctx context.Context, q interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}, runID string) (Record, error) {
	rows, _ := q.Query(ctx, `SELECT `+columns+` FROM world_backups WHERE run_id = $1`, runID)
	return pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Record])
}

// LookupSettled is Lookup once no transaction that writes world_backups is
// under way: it takes the table's SHARE lock (which every insert's and
// delete's lock conflicts with) in a transaction of its own, and reads the
// row under it. An insert whose COMMIT was sent and whose answer was lost
// (a dropped connection, the client's deadline) may still be committing
// on the server, its row not yet visible to Lookup; once it has ended,
// applied or not, a missing row stays missing. A writer that holds the
// table past lock_timeout fails the call: it does not answer "not found".
func (db *DB) LookupSettled(ctx context.Context, runID string) (Record, error) {
	ctx, cancel := db.bound(ctx)
	defer cancel()
	var r Record
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `LOCK TABLE world_backups IN SHARE MODE`); err != nil {
			return err
		}
		var err error
		r, err = lookupRow(ctx, tx, runID)
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return Record{}, fmt.Errorf("run %q: %w", runID, ErrNotFound)
	}
	if err != nil {
		return Record{}, fmt.Errorf("looking up run %q once its writers ended: %w", runID, err)
	}
	return r, nil
}

// ErrCommitUnknown is wrapped by the error of an Insert or InsertChunked
// whose COMMIT was sent and whose answer did not come (a connection that
// dropped, the call's deadline, a server shut down while it committed):
// the row may be there or not, and LookupSettled says which. Any other
// error of theirs means nothing was recorded.
var ErrCommitUnknown = errors.New("the COMMIT was sent and its answer lost: the row may exist")

// record runs fn in a transaction of its own and commits it, as
// pgx.BeginFunc does, unless a lock of db was lost (checkLocks); its error wraps ErrCommitUnknown when the COMMIT was
// sent and its outcome is unknown. An error before the COMMIT, a COMMIT
// not sent (pgconn.SafeToRetry), or one the server answered with an ERROR
// or a ROLLBACK leaves the transaction rolled back.
func (db *DB) record(ctx context.Context, fn func(tx pgx.Tx) error) error {
	if err := db.checkLocks(ctx); err != nil {
		return err
	}
	committing := false
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		committing = true
		return nil
	})
	if err == nil || !committing || pgconn.SafeToRetry(err) || errors.Is(err, pgx.ErrTxCommitRollback) {
		return err
	}
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok && (pe.SeverityUnlocalized == "ERROR" || pe.SeverityUnlocalized == "" && pe.Severity == "ERROR") {
		return err // the server rolled back (a FATAL, as at a shutdown, may follow an applied commit)
	}
	return fmt.Errorf("%w: %w", ErrCommitUnknown, err)
}

// Insert records r in one transaction. It returns false, and changes
// nothing, when r.RunID already has a row. ID and CreatedAt are ignored; an
// empty Namespace is recorded as NULL.
// Constraint violations (a malformed sha256, a negative size, an unknown
// compression, ...) are errors naming the constraint. An error wrapping
// ErrCommitUnknown may have recorded r.
func (db *DB) Insert(ctx context.Context, r Record) (inserted bool, err error) {
	ctx, cancel := db.bound(ctx)
	defer cancel()
	err = db.record(ctx, func(tx pgx.Tx) error {
		var id int64
		err := tx.QueryRow(ctx, `INSERT INTO world_backups
			(run_id, server, former_owner, archive_ref, size_bytes, sha256, compression, file_count, started_at, finished_at,
			 format, added_bytes, namespace)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, COALESCE(NULLIF($11, ''), 'tar'), $12, NULLIF($13, ''))
			ON CONFLICT (run_id) DO NOTHING
			RETURNING id`,
			r.RunID, r.Server, r.FormerOwner, r.ArchiveRef, r.SizeBytes, r.SHA256, r.Compression,
			r.FileCount, r.StartedAt, r.FinishedAt, r.Format, r.AddedBytes, r.Namespace).Scan(&id)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return nil
		case err != nil:
			return err
		}
		inserted = true
		db.log.Debug("recorded run", "run_id", r.RunID, "id", id)
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("inserting run %q: %w", r.RunID, err)
	}
	return inserted, nil
}

// List returns the rows of server ("" for every server) ordered by
// finished_at, then id.
func (db *DB) List(ctx context.Context, server string) ([]Record, error) {
	ctx, cancel := db.bound(ctx)
	defer cancel()
	rows, _ := db.pool.Query(ctx, `SELECT `+columns+` FROM world_backups
		WHERE $1 = '' OR server = $1
		ORDER BY finished_at, id`, server)
	rs, err := pgx.CollectRows(rows, pgx.RowToStructByName[Record])
	if err != nil {
		return nil, fmt.Errorf("listing runs: %w", err)
	}
	return rs, nil
}

// LatestChunked returns the newest chunked run of server (by EndedAt)
// that namespace sees (InNamespace) and for which in is true (its archive
// is in the store at hand: a catalog shared by a folder store and an S3
// one holds runs of both), or an error wrapping ErrNotFound: the run a
// chunked backup reuses unchanged files of. The rows are read newest
// first, one at a time, until one is in.
func (db *DB) LatestChunked(ctx context.Context, server, namespace string, in func(Record) bool) (Record, error) {
	ctx, cancel := db.bound(ctx)
	defer cancel()
	rows, err := db.pool.Query(ctx, `SELECT `+columns+` FROM world_backups
		WHERE server = $1 AND format = 'chunked' AND `+InNamespace(2)+`
		ORDER BY `+endedAtSQL+` DESC, id DESC`, server, namespace)
	if err != nil {
		return Record{}, fmt.Errorf("finding the newest chunked run of %q: %w", server, err)
	}
	defer rows.Close()
	for rows.Next() {
		r, err := pgx.RowToStructByName[Record](rows)
		if err != nil {
			return Record{}, fmt.Errorf("finding the newest chunked run of %q: %w", server, err)
		}
		if in(r) {
			return r, nil
		}
	}
	if err := rows.Err(); err != nil {
		return Record{}, fmt.Errorf("finding the newest chunked run of %q: %w", server, err)
	}
	return Record{}, fmt.Errorf("server %q has no chunked run in this store: %w", server, ErrNotFound)
}

// scrub removes password from err's message. pgx does not put passwords in
// connection errors; this is a second line of defence. The result does not
// wrap err, so nothing can unwrap back to the original text.
func scrub(err error, password string) error {
	if err == nil || password == "" || !strings.Contains(err.Error(), password) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), password, "xxxxx"))
}

// Newest is the newest run of one server that counts as a backup (it did
// not finish in the future, and no prune found its archive missing), and the
// runs that do not.
type Newest struct {
	Server string `db:"server"`
	// RunID and FinishedAt are the newest run's; empty and nil when no run
	// of the server counts.
	RunID      string     `db:"run_id"`
	FinishedAt *time.Time `db:"finished_at"`
	Runs       int64      `db:"runs"` // every run of the server
	// Future counts the runs finished more than FutureTolerance after the
	// asked time; FutureRunID is the one that finished last.
	Future      int64  `db:"future"`
	FutureRunID string `db:"future_run_id"`
	// Missing counts the runs whose archive the last prune found missing
	// from the store (MarkMissing); MissingRunID is the newest of them.
	Missing      int64  `db:"missing"`
	MissingRunID string `db:"missing_run_id"`
}

// NewestByServer returns, for every server that has a run, its newest run
// finished at most FutureTolerance after now whose archive no prune found
// missing, and the counts of the others (anomalous: see FutureTolerance and
// MarkMissing), ordered by server.
func (db *DB) NewestByServer(ctx context.Context, now time.Time) ([]Newest, error) {
	ctx, cancel := db.bound(ctx)
	defer cancel()
	rows, _ := db.pool.Query(ctx, `WITH s AS (
			SELECT server, count(*) AS runs, count(*) FILTER (WHERE finished_at > $1) AS future,
				count(*) FILTER (WHERE missing_since IS NOT NULL) AS missing
			FROM world_backups GROUP BY server)
		SELECT s.server, coalesce(n.run_id, '') AS run_id, n.finished_at, s.runs, s.future,
			coalesce(f.run_id, '') AS future_run_id, s.missing, coalesce(m.run_id, '') AS missing_run_id
		FROM s
		LEFT JOIN LATERAL (SELECT run_id, finished_at FROM world_backups w
			WHERE w.server = s.server AND w.finished_at <= $1 AND w.missing_since IS NULL
			ORDER BY finished_at DESC, id DESC LIMIT 1) n ON true
		LEFT JOIN LATERAL (SELECT run_id FROM world_backups w
			WHERE w.server = s.server AND w.missing_since IS NOT NULL ORDER BY finished_at DESC, id DESC LIMIT 1) m ON true
		LEFT JOIN LATERAL (SELECT run_id FROM world_backups w
			WHERE w.server = s.server AND w.finished_at > $1 ORDER BY finished_at DESC, id DESC LIMIT 1) f ON true
		ORDER BY s.server`, now.Add(FutureTolerance))
	ns, err := pgx.CollectRows(rows, pgx.RowToStructByName[Newest])
	if err != nil {
		return nil, fmt.Errorf("finding the newest runs: %w", schemaErr(err))
	}
	return ns, nil
}
