package catalog

import (
	"errors"
	"fmt"
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
		record("c.alpha.pre-restore-abc", "alpha", now.Add(-time.Minute)), // the world a restore replaced
		record("c.epsilon.pre-restore-abc", "epsilon", now.Add(-time.Minute)),
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
		{name: "latest is the newest run not in the future nor before a restore", server: "alpha", ref: jobapi.RunLatest, want: "alpha-2"},
		{name: "a run before a restore by its ID", server: "alpha", ref: "c.alpha.pre-restore-abc", want: "c.alpha.pre-restore-abc"},
		{name: "server with only a run before a restore", server: "epsilon", ref: jobapi.RunLatest, err: ErrNoRun},
		{name: "a run ID", server: "alpha", ref: "alpha-1", want: "alpha-1"},
		{name: "latest of another server", server: "beta", ref: jobapi.RunLatest, want: "beta-1"},
		{name: "unknown run ID", server: "alpha", ref: "nope", err: ErrNotFound},
		{name: "run of another server", server: "alpha", ref: "beta-1", err: ErrOtherServer},
		{name: "server without runs", server: "delta", ref: jobapi.RunLatest, err: ErrNoRun},
		{name: "server with only future runs", server: "gamma", ref: jobapi.RunLatest, err: ErrNoRun},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := db.Resolve(ctx, tt.server, "", tt.ref, now)
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
		if _, err := db.Resolve(ctx, "alpha", "", "../x", now); err == nil {
			t.Fatal("no error for an invalid reference")
		}
	})
}

// TestNewestByEndedAt: the latest run (Resolve) and the run a chunked
// backup builds on (LatestChunked) are the newest by Record.EndedAt: a run
// recorded by a node whose clock was behind (its row created well after
// its finished_at) is newer than a run that finished later by that
// node's clock but was recorded before it; without clock skew, the later
// finished_at wins.
func TestNewestByEndedAt(t *testing.T) {
	db := migrated(t)
	ctx := t.Context()
	now := time.Now()
	for i, tt := range []struct {
		name string
		// finished and created of the runs, inserted in this order; the
		// run named want must be the newest.
		runs []struct{ finished, created time.Duration }
		want int
	}{
		{name: "a clock three hours behind", runs: []struct{ finished, created time.Duration }{
			{-2 * time.Hour, -2 * time.Hour}, {-5 * time.Hour, -time.Hour}}, want: 1},
		{name: "no skew: the later finished_at", runs: []struct{ finished, created time.Duration }{
			{-time.Hour, -time.Hour}, {-2 * time.Hour, -2 * time.Hour}}, want: 0},
		{name: "recorded within FutureTolerance of finishing", runs: []struct{ finished, created time.Duration }{
			{-time.Hour, -time.Hour}, {-time.Hour - time.Minute, -time.Hour + FutureTolerance - 2*time.Minute}}, want: 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			server := fmt.Sprintf("skew-%d", i)
			var ids []string
			for i, r := range tt.runs {
				rec := record(fmt.Sprintf("%s-%d", server, i), server, now.Add(r.finished))
				rec.Format = jobapi.FormatChunked
				if _, err := db.Insert(ctx, rec); err != nil {
					t.Fatal(err)
				}
				if _, err := db.pool.Exec(ctx, `UPDATE world_backups SET created_at = $2 WHERE run_id = $1`, rec.RunID, now.Add(r.created)); err != nil {
					t.Fatal(err)
				}
				ids = append(ids, rec.RunID)
			}
			latest, err := db.Resolve(ctx, server, "", jobapi.RunLatest, now)
			if err != nil || latest.RunID != ids[tt.want] {
				t.Errorf("Resolve(latest) = %q, %v; want %q", latest.RunID, err, ids[tt.want])
			}
			chunked, err := db.LatestChunked(ctx, server, "", func(Record) bool { return true })
			if err != nil || chunked.RunID != ids[tt.want] {
				t.Errorf("LatestChunked = %q, %v; want %q", chunked.RunID, err, ids[tt.want])
			}
		})
	}
}
