package catalog

import (
	"testing"
	"time"
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
