package pgtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestProxy(t *testing.T) {
	u := URL(t)
	p := NewProxy(t, Target(t, u))
	conn := connect(t, p.URL(t, u))
	var one int
	if err := conn.QueryRow(t.Context(), "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("query through the proxy: %d, %v", one, err)
	}

	// Blackhole: the open connection stops answering, and so do new ones.
	p.Blackhole()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("query after Blackhole: %v, want it to wait until its deadline", err)
	}
	ctx, cancel = context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if c, err := pgx.Connect(ctx, p.URL(t, u)); err == nil {
		c.Close(context.Background())
		t.Error("a new connection to the blackhole succeeded")
	} else if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("connecting to the blackhole: %v, want it to wait until its deadline", err)
	}
}

// TestCommitCut: the proxy lets through the transactions that do not
// match, and cuts the first that does at its COMMIT: applied (the row is
// there) or not (the server rolled back), the client gets an error either
// way; afterwards it forwards again, or answers nothing when Silent.
func TestCommitCut(t *testing.T) {
	for _, tt := range []struct {
		name            string
		applied, silent bool
	}{
		{name: "applied, answer lost", applied: true},
		{name: "not applied", applied: false},
		{name: "applied, then silent", applied: true, silent: true},
		{name: "not applied, then silent", applied: false, silent: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			u := URL(t)
			direct := connect(t, u)
			if _, err := direct.Exec(t.Context(), "CREATE TABLE rows (name text PRIMARY KEY)"); err != nil {
				t.Fatal(err)
			}
			cut := NewCommitCut(t, Target(t, u), &CommitCut{Match: "INSERT INTO rows", Applied: tt.applied, Silent: tt.silent})
			conn := connect(t, cut.URL(t, u))
			insert := func(conn *pgx.Conn, name string) error {
				return pgx.BeginFunc(t.Context(), conn, func(tx pgx.Tx) error {
					_, err := tx.Exec(t.Context(), "INSERT INTO rows VALUES ($1)", name)
					return err
				})
			}
			// Another transaction commits through the proxy.
			if err := pgx.BeginFunc(t.Context(), conn, func(tx pgx.Tx) error {
				_, err := tx.Exec(t.Context(), "SELECT 1")
				return err
			}); err != nil || cut.Cut() {
				t.Fatalf("a transaction that does not match: %v, cut %v", err, cut.Cut())
			}
			if err := insert(conn, "cut"); err == nil || !cut.Cut() {
				t.Fatalf("the matching transaction: %v, cut %v; want an error and the cut", err, cut.Cut())
			}
			var n int
			if err := direct.QueryRow(t.Context(), "SELECT count(*) FROM rows WHERE name = 'cut'").Scan(&n); err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: 1, false: 0}[tt.applied]; n != want {
				t.Errorf("%d rows after the cut, want %d", n, want)
			}
			// The next connection.
			ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
			defer cancel()
			next, err := pgx.Connect(ctx, cut.URL(t, u))
			if err == nil {
				defer next.Close(context.Background())
				err = insert(next, "after")
			}
			switch {
			case tt.silent && !errors.Is(err, context.DeadlineExceeded):
				t.Errorf("a connection after the cut: %v, want it to wait until its deadline", err)
			case !tt.silent && err != nil:
				t.Errorf("a connection after the cut: %v, want it forwarded", err)
			}
		})
	}
}

func TestTarget(t *testing.T) {
	for u, want := range map[string]string{
		"postgres://u:p@db:6543/x":  "db:6543",
		"postgres://u@db/x":         "db:5432",
		"postgresql://[::1]:5433/x": "[::1]:5433",
	} {
		if got := Target(t, u); got != want {
			t.Errorf("Target(%q) = %q, want %q", u, got, want)
		}
	}
}
