package prune

import (
	"context"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/worldbackup/worldbackup/archiver/retention"
	"github.com/worldbackup/worldbackup/archiver/store"
)

// TestPruneMarksMissingArchives: a prune marks the rows whose archives the
// store does not hold (so status and the exporter stop counting them), keeps
// the time the first prune found one gone, clears the mark once the archive
// is back, and touches neither in a dry run nor a row of another store.
func TestPruneMarksMissingArchives(t *testing.T) {
	f := newFixture(t)
	day := func(n int) time.Time { return time.Date(2026, 11, n, 3, 0, 0, 0, time.UTC) }
	for i := 1; i <= 3; i++ {
		f.put(t, "s", fmt.Sprintf("r%d", i), day(i), true)
	}
	f.putElsewhere(t, "s", "offsite", day(2))
	// Another store's prune found offsite's archive gone: this one does
	// not judge it, so its mark stays whatever this store holds.
	if _, err := f.pool.Exec(t.Context(), `UPDATE world_backups SET missing_since = $1 WHERE run_id = 'offsite'`, day(3)); err != nil {
		t.Fatal(err)
	}
	if err := f.st.Remove(t.Context(), "s/r3.tar.zst"); err != nil {
		t.Fatal(err)
	}
	marks := func(t *testing.T) map[string]string {
		t.Helper()
		recs, err := f.db.List(t.Context(), "s")
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, r := range recs {
			m[r.RunID] = "-"
			if r.MissingSince != nil {
				m[r.RunID] = r.MissingSince.UTC().Format(time.RFC3339)
			}
		}
		return m
	}
	prune := func(t *testing.T, now time.Time, dry bool) Report {
		t.Helper()
		rep, err := Prune(t.Context(), f.db, memRef{f.st}, Options{Server: "s", DryRun: dry,
			Policy: retention.Policy{Last: 5, MinKeep: 1}, Now: func() time.Time { return now }}, hclog.NewNullLogger())
		if err != nil {
			t.Fatalf("Prune: %v", err)
		}
		return rep
	}
	first, second := day(10), day(11)
	offsite := day(3).Format(time.RFC3339)
	steps := []struct {
		name   string
		before func(t *testing.T)
		now    time.Time
		dry    bool
		want   map[string]string
	}{
		{name: "a dry run marks nothing", now: first, dry: true,
			want: map[string]string{"r1": "-", "r2": "-", "r3": "-", "offsite": offsite}},
		{name: "the first prune that finds it gone marks it", now: first,
			want: map[string]string{"r1": "-", "r2": "-", "r3": first.Format(time.RFC3339), "offsite": offsite}},
		{name: "a later prune keeps the first time", now: second,
			want: map[string]string{"r1": "-", "r2": "-", "r3": first.Format(time.RFC3339), "offsite": offsite}},
		{name: "a dry run with the archive back clears nothing", now: second, dry: true,
			before: func(t *testing.T) {
				if _, err := f.st.Put(t.Context(), "s/r3.tar.zst", func(w io.Writer) error {
					_, err := io.WriteString(w, "archive r3")
					return err
				}); err != nil {
					t.Fatal(err)
				}
			},
			want: map[string]string{"r1": "-", "r2": "-", "r3": first.Format(time.RFC3339), "offsite": offsite}},
		{name: "a prune that finds it again clears the mark", now: second,
			want: map[string]string{"r1": "-", "r2": "-", "r3": "-", "offsite": offsite}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if s.before != nil {
				s.before(t)
			}
			rep := prune(t, s.now, s.dry)
			if got := marks(t); fmt.Sprint(got) != fmt.Sprint(s.want) {
				t.Errorf("marks %v, want %v", got, s.want)
			}
			if rep.RowsDeleted != 0 {
				t.Errorf("deleted %d rows, want none (keep-last 5)", rep.RowsDeleted)
			}
		})
	}
}

// lossyList is a store whose listings miss the keys in lost (a page lost,
// a listing that lags the writes); asked about one, it holds it.
type lossyList struct {
	memRef
	lost map[string]bool
}

func (l lossyList) List(ctx context.Context, prefix string) ([]store.Object, error) {
	objs, err := l.memRef.List(ctx, prefix)
	return slices.DeleteFunc(objs, func(o store.Object) bool { return l.lost[o.Key] }), err
}

// TestPruneAsksBeforeMarkingMissing: a run whose archive a listing misses
// but the store holds is neither marked missing (which would make a
// restore of latest pass over it) nor left out of the rules.
func TestPruneAsksBeforeMarkingMissing(t *testing.T) {
	f := newFixture(t)
	day := func(n int) time.Time { return time.Date(2026, 11, n, 3, 0, 0, 0, time.UTC) }
	for i := 1; i <= 3; i++ {
		f.put(t, "s", fmt.Sprintf("r%d", i), day(i), true)
	}
	st := lossyList{memRef{f.st}, map[string]bool{"s/r3.tar.zst": true}}
	rep, err := Prune(t.Context(), f.db, st, Options{Server: "s", Policy: retention.Policy{Last: 5, MinKeep: 1},
		Now: func() time.Time { return day(10) }}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	if rep.ArchivesMissing != 0 {
		t.Errorf("%d archives missing, want 0: the store holds r3's", rep.ArchivesMissing)
	}
	recs, err := f.db.List(t.Context(), "s")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.MissingSince != nil {
			t.Errorf("run %s marked missing since %s", r.RunID, r.MissingSince)
		}
	}
}
