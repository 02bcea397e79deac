package prune

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"

	"github.com/worldbackup/worldbackup/archiver/catalog"
	"github.com/worldbackup/worldbackup/archiver/retention"
	"github.com/worldbackup/worldbackup/archiver/store"
	"github.com/worldbackup/worldbackup/internal/pgtest"
	"github.com/worldbackup/worldbackup/jobapi"
)

// TestPrunePacksOfAStoreSharingTheCatalog: two folder stores (two clusters'
// PVCs) share one catalog. A prune of store A with a grace of 1h condemns
// the packs A holds that nothing uses for 2h, and those unused past
// PackHorizon wherever they are; it leaves B's packs unused for 2h alone,
// registered or condemned by B's prune, so B's 3h backup still records its
// run, and B's prune removes its condemned pack. A's prune asks A only
// about the packs registered for A or for no store (before the catalog
// named stores).
func TestPrunePacksOfAStoreSharingTheCatalog(t *testing.T) {
	ctx := t.Context()
	u := pgtest.URL(t)
	db, err := catalog.Open(ctx, u, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	newStore := func() *store.Local {
		st, err := store.NewLocal(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	stA, stB := newStore(), newStore()

	putPack := func(st *store.Local, id string) string {
		t.Helper()
		key, err := jobapi.PackKey(id)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Put(ctx, key, func(w io.Writer) error { _, err := io.WriteString(w, "WBPK "+id); return err }); err != nil {
			t.Fatal(err)
		}
		return key
	}
	// register records a pack as a backup into st does (nil: a backup
	// from before the catalog named stores), unused for ago.
	register := func(st *store.Local, id string, ago time.Duration, condemned bool) {
		t.Helper()
		ref := ""
		if st != nil {
			ref = store.PacksRef(st)
		}
		if err := db.RegisterPack(ctx, id, ref); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, `UPDATE chunked_packs SET last_used = now() - $2::interval,
			condemned_at = CASE WHEN $3 THEN now() END WHERE pack_id = $1`,
			id, fmt.Sprintf("%d microseconds", ago.Microseconds()), condemned); err != nil {
			t.Fatal(err)
		}
	}
	type row struct{ known, condemned bool }
	rowOf := func(id string) row {
		t.Helper()
		var r row
		err := conn.QueryRow(ctx, `SELECT true, condemned_at IS NOT NULL FROM chunked_packs WHERE pack_id = $1`, id).
			Scan(&r.known, &r.condemned)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		return r
	}
	has := func(st *store.Local, key string) bool {
		t.Helper()
		ok, err := st.Holds(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	prune := func(st Store, server string) Report {
		t.Helper()
		rep, err := Prune(ctx, db, st, Options{Server: server, Policy: retention.Policy{Last: 1, MinKeep: 1},
			Grace: time.Hour}, hclog.NewNullLogger())
		if err != nil {
			t.Fatalf("Prune of %s: %v", server, err)
		}
		return rep
	}

	// B's backup of 3h registered a pack 2h ago and is still writing it.
	writingB := newPackID(t)
	register(stB, writingB, 2*time.Hour, false)
	// B's prune condemned a pack and stopped before removing it.
	condemnedB := newPackID(t)
	condemnedBKey := putPack(stB, condemnedB)
	register(stB, condemnedB, 2*time.Hour, true)
	// A registration in B past the horizon: a backup that died.
	staleB := newPackID(t)
	staleBKey := putPack(stB, staleB)
	register(stB, staleB, PackHorizon+time.Hour, false)
	// A's own pack, unused for 2h.
	oldA := newPackID(t)
	oldAKey := putPack(stA, oldA)
	register(stA, oldA, 2*time.Hour, false)
	// A pack of A registered before the catalog named stores, and one of
	// B's; both unused for 2h.
	legacyA, legacyB := newPackID(t), newPackID(t)
	legacyAKey, legacyBKey := putPack(stA, legacyA), putPack(stB, legacyB)
	register(nil, legacyA, 2*time.Hour, false)
	register(nil, legacyB, 2*time.Hour, false)

	asked := &askedStore{Local: stA}
	rep := prune(asked, "x")
	if rep.PacksRemoved != 3 {
		t.Errorf("the prune of A removed %d packs, want 3 (A's own two and B's stale registration)", rep.PacksRemoved)
	}
	slices.Sort(asked.keys)
	if want := []string{oldAKey, legacyAKey, legacyBKey}; !slices.Equal(asked.keys, slices.Sorted(slices.Values(want))) {
		t.Errorf("the prune of A asked A about %v, want only %v (A's and those registered for no store)", asked.keys, want)
	}
	if r := rowOf(legacyA); r.known || has(stA, legacyAKey) {
		t.Errorf("A's pack registered for no store: row %+v, in A %v; want both gone", r, has(stA, legacyAKey))
	}
	if r := rowOf(legacyB); !r.known || r.condemned || !has(stB, legacyBKey) {
		t.Errorf("B's pack registered for no store: row %+v, in B %v; want it left alone", r, has(stB, legacyBKey))
	}
	if r := rowOf(oldA); r.known || has(stA, oldAKey) {
		t.Errorf("A's pack unused for 2h: row %+v, in A %v; want both gone", r, has(stA, oldAKey))
	}
	if r := rowOf(staleB); r.known {
		t.Errorf("a pack unused past the horizon has its row %+v, want it condemned and forgotten", r)
	}
	if r := rowOf(writingB); !r.known || r.condemned {
		t.Errorf("B's pack being written: row %+v, want it there and not condemned", r)
	}
	if r := rowOf(condemnedB); !r.known || !r.condemned || !has(stB, condemnedBKey) {
		t.Errorf("B's condemned pack: row %+v, in B %v; want its row condemned and its object there", r, has(stB, condemnedBKey))
	}

	// B's backup writes its pack and records its run.
	putPack(stB, writingB)
	manifest, err := jobapi.ManifestKey("y", "y1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stB.Put(ctx, manifest, func(w io.Writer) error { _, err := io.WriteString(w, "manifest"); return err }); err != nil {
		t.Fatal(err)
	}
	added, fin := int64(10), time.Now()
	inserted, err := db.InsertChunked(ctx, catalog.Record{RunID: "y1", Server: "y", ArchiveRef: stB.Ref(manifest), SizeBytes: 8,
		SHA256: strings.Repeat("0", 64), Compression: "zstd", StartedAt: fin.Add(-3 * time.Hour), FinishedAt: fin,
		AddedBytes: &added}, []string{writingB})
	if err != nil || !inserted {
		t.Fatalf("B's backup records its run: %v, %v; want it recorded", inserted, err)
	}

	// B's prune removes its condemned pack, and the object of the stale
	// registration, now without a row (an orphan pack, written before the
	// grace period by its clock).
	rep, err = Prune(ctx, db, stB, Options{Server: "y", Policy: retention.Policy{Last: 1, MinKeep: 1}, Grace: time.Hour,
		Now: later}, hclog.NewNullLogger())
	if err != nil {
		t.Fatalf("Prune of y: %v", err)
	}
	if r := rowOf(condemnedB); r.known || has(stB, condemnedBKey) {
		t.Errorf("B's condemned pack after B's prune: row %+v, in B %v; want both gone", r, has(stB, condemnedBKey))
	}
	if has(stB, staleBKey) || rep.OrphanPacks != 1 {
		t.Errorf("B's prune: %d orphan packs, the stale one still there %v; want 1, removed", rep.OrphanPacks, has(stB, staleBKey))
	}
	if r := rowOf(writingB); !r.known || r.condemned {
		t.Errorf("the pack of B's recorded run: row %+v, want it there", r)
	}
	if _, err := db.Lookup(ctx, "y1"); err != nil {
		t.Errorf("B's run: %v", err)
	}
}

// askedStore records the keys its Holds is asked about.
type askedStore struct {
	*store.Local
	keys []string
}

func (a *askedStore) Holds(ctx context.Context, key string) (bool, error) {
	a.keys = append(a.keys, key)
	return a.Local.Holds(ctx, key)
}
