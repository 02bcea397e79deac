package catalog

import (
	"errors"
	"testing"
	"time"

	"github.com/worldbackup/worldbackup/jobapi"
)

func TestResolve(t *testing.T) {
	db := migrated(t)
	ctx := t.Context()
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, r := range []Record{
		record("alpha-1", "alpha", now.Add(-2*time.Hour)),
		record("alpha-2", "alpha", now.Add(-time.Hour)),
		record("alpha-future", "alpha", now.Add(FutureTolerance+time.Hour)), // a node with a wrong clock
		record("beta-1", "beta", now.Add(-3*time.Hour)),
		record("gamma-future", "gamma", now.Add(2*FutureTolerance)),
	} {
		if _, err := db.Insert(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		name, server, ref string
		want              string
		err               error
	}{
		{name: "latest is the newest run not in the future", server: "alpha", ref: jobapi.RunLatest, want: "alpha-2"},
		{name: "a run ID", server: "alpha", ref: "alpha-1", want: "alpha-1"},
		{name: "latest of another server", server: "beta", ref: jobapi.RunLatest, want: "beta-1"},
		{name: "unknown run ID", server: "alpha", ref: "nope", err: ErrNotFound},
		{name: "run of another server", server: "alpha", ref: "beta-1", err: ErrOtherServer},
		{name: "server without runs", server: "delta", ref: jobapi.RunLatest, err: ErrNoRun},
		{name: "server with only future runs", server: "gamma", ref: jobapi.RunLatest, err: ErrNoRun},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := db.Resolve(ctx, tt.server, tt.ref, now)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("Resolve = %+v, %v; want %v", got, err, tt.err)
				}
				return
			}
			if err != nil || got.RunID != tt.want {
				t.Fatalf("Resolve = %q, %v; want %q", got.RunID, err, tt.want)
			}
		})
	}
	t.Run("bad reference", func(t *testing.T) {
		if _, err := db.Resolve(ctx, "alpha", "../x", now); err == nil {
			t.Fatal("no error for an invalid reference")
		}
	})
}
