package catalog

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/worldbackup/worldbackup/jobapi"
)

// TestPrunesRecorded: each prune recorded is read back once, in order,
// after the ID the reader has seen; bad counts and times are clamped, a
// server name the table's CHECK refuses is an error.
func TestPrunesRecorded(t *testing.T) {
	db := migrated(t)
	ctx := t.Context()
	t0 := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	for _, p := range []PruneRecord{
		{Server: "survival", StartedAt: t0, FinishedAt: t0.Add(time.Second), RunsDeleted: 3, BytesFreed: 3 << 20},
		{Server: "lobby", StartedAt: t0, FinishedAt: t0.Add(-time.Hour), RunsDeleted: -1, BytesFreed: -5},
	} {
		if err := db.RecordPrune(ctx, p); err != nil {
			t.Fatalf("RecordPrune(%+v): %v", p, err)
		}
	}
	evs, err := db.PrunesAfter(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].Server != "survival" || evs[0].RunsDeleted != 3 || evs[0].BytesFreed != 3<<20 ||
		evs[1].Server != "lobby" || evs[1].RunsDeleted != 0 || evs[1].BytesFreed != 0 {
		t.Fatalf("PrunesAfter(0) = %+v", evs)
	}
	if more, err := db.PrunesAfter(ctx, evs[1].ID, 10); err != nil || len(more) != 0 {
		t.Fatalf("PrunesAfter(last) = %+v, %v: want none", more, err)
	}
	if first, err := db.PrunesAfter(ctx, 0, 1); err != nil || len(first) != 1 || first[0].ID != evs[0].ID {
		t.Fatalf("PrunesAfter(0, limit 1) = %+v, %v", first, err)
	}
	if err := db.RecordPrune(ctx, PruneRecord{Server: "Not A Server", StartedAt: t0, FinishedAt: t0}); err == nil {
		t.Fatal("a server name the table refuses was recorded")
	}
}

// TestMarkMissing: a prune's marks of missing archives are kept from the
// first prune that found them, cleared by one that finds them again, touch
// only the server's named rows, and take the runs out of what status and
// the exporter count as backups.
func TestMarkMissing(t *testing.T) {
	db := migrated(t)
	ctx := t.Context()
	t0 := time.Now().Add(-3 * time.Hour).Truncate(time.Second)
	for i, r := range []Record{
		record("a1", "alpha", t0),
		record("a2", "alpha", t0.Add(time.Hour)),
		record("a3", "alpha", t0.Add(2*time.Hour)),
		record("b1", "beta", t0.Add(2*time.Hour)),
	} {
		if ok, err := db.Insert(ctx, r); err != nil || !ok {
			t.Fatalf("Insert %d: %v, %v", i, ok, err)
		}
	}
	since := func(runID string) *time.Time {
		t.Helper()
		r, err := db.Lookup(ctx, runID)
		if err != nil {
			t.Fatal(err)
		}
		return r.MissingSince
	}
	newest := func() map[string]Newest {
		t.Helper()
		ns, err := db.NewestByServer(ctx, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]Newest{}
		for _, n := range ns {
			m[n.Server] = n
		}
		return m
	}
	overview := func() map[string]ServerOverview {
		t.Helper()
		os, err := db.Overview(ctx, time.Now(), 10, 10, nil)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]ServerOverview{}
		for _, o := range os {
			m[o.Server] = o
		}
		return m
	}
	runIDs := func(rs []Record) (ids []string) {
		for _, r := range rs {
			ids = append(ids, r.RunID)
		}
		return ids
	}
	first, later := t0.Add(3*time.Hour), t0.Add(4*time.Hour)

	t.Run("found missing", func(t *testing.T) {
		// b1 is beta's: a prune of alpha naming it changes nothing.
		if err := db.MarkMissing(ctx, "alpha", []string{"a3", "b1"}, []string{"a1", "a2"}, first); err != nil {
			t.Fatal(err)
		}
		if s := since("a3"); s == nil || !s.Equal(first) {
			t.Fatalf("a3 missing_since = %v, want %v", s, first)
		}
		for _, id := range []string{"a1", "a2", "b1"} {
			if s := since(id); s != nil {
				t.Fatalf("%s missing_since = %v, want none", id, s)
			}
		}
		n := newest()["alpha"]
		if n.RunID != "a2" || n.Runs != 3 || n.Missing != 1 || n.MissingRunID != "a3" {
			t.Fatalf("alpha's newest = %+v, want a2, 3 runs, a3 missing", n)
		}
		if n := newest()["beta"]; n.RunID != "b1" || n.Missing != 0 {
			t.Fatalf("beta's newest = %+v, want b1 and nothing missing", n)
		}
		o := overview()["alpha"]
		if got := runIDs(o.Runs); !slices.Equal(got, []string{"a2", "a1"}) || o.ArchivesMissing != 1 || o.RunCount != 3 {
			t.Fatalf("alpha's overview: runs %v, %d missing, %d in all; want [a2 a1], 1, 3", got, o.ArchivesMissing, o.RunCount)
		}
		// latest is the newest run that can be restored; a3 by its ID
		// is still a3, marked.
		if r, err := db.Resolve(ctx, "alpha", "", jobapi.RunLatest, time.Now()); err != nil || r.RunID != "a2" {
			t.Fatalf("Resolve(latest) = %q, %v; want a2", r.RunID, err)
		}
		if r, err := db.Resolve(ctx, "alpha", "", "a3", time.Now()); err != nil || r.MissingSince == nil {
			t.Fatalf("Resolve(a3) = %+v, %v; want a3 with its mark", r, err)
		}
	})
	t.Run("still missing keeps the first time", func(t *testing.T) {
		if err := db.MarkMissing(ctx, "alpha", []string{"a3"}, nil, later); err != nil {
			t.Fatal(err)
		}
		if s := since("a3"); s == nil || !s.Equal(first) {
			t.Fatalf("a3 missing_since = %v, want still %v", s, first)
		}
	})
	t.Run("found again", func(t *testing.T) {
		if err := db.MarkMissing(ctx, "alpha", nil, []string{"a1", "a2", "a3"}, later); err != nil {
			t.Fatal(err)
		}
		if s := since("a3"); s != nil {
			t.Fatalf("a3 missing_since = %v after its archive was found again, want none", s)
		}
		if n := newest()["alpha"]; n.RunID != "a3" || n.Missing != 0 || n.MissingRunID != "" {
			t.Fatalf("alpha's newest = %+v, want a3 and nothing missing", n)
		}
	})
	t.Run("every archive missing", func(t *testing.T) {
		if err := db.MarkMissing(ctx, "alpha", []string{"a1", "a2", "a3"}, nil, later); err != nil {
			t.Fatal(err)
		}
		n := newest()["alpha"]
		if n.RunID != "" || n.FinishedAt != nil || n.Missing != 3 || n.MissingRunID != "a3" {
			t.Fatalf("alpha's newest = %+v, want none, 3 missing, the newest a3", n)
		}
		if o := overview()["alpha"]; len(o.Runs) != 0 || o.ArchivesMissing != 3 {
			t.Fatalf("alpha's overview: runs %v, %d missing; want none, 3", runIDs(o.Runs), o.ArchivesMissing)
		}
		_, err := db.Resolve(ctx, "alpha", "", jobapi.RunLatest, time.Now())
		if !errors.Is(err, ErrNoRun) || !strings.Contains(err.Error(), "a3") || !strings.Contains(err.Error(), "missing") {
			t.Fatalf("Resolve(latest) with every archive missing: %v; want ErrNoRun naming a3 as missing", err)
		}
	})
	t.Run("nothing to mark", func(t *testing.T) {
		if err := db.MarkMissing(ctx, "alpha", nil, nil, later); err != nil {
			t.Fatal(err)
		}
	})
}
