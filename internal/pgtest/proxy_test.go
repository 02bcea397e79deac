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
