package prune

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/worldbackup/worldbackup/archiver/catalog"
	"github.com/worldbackup/worldbackup/archiver/retention"
)

// TestPruneRunFinishedInTheFuture: one row finished a year ahead (a node
// with a wrong clock) neither pushes the real runs out of keep-within nor
// takes a place of the floor; it stays, and the report and the log say why.
func TestPruneRunFinishedInTheFuture(t *testing.T) {
	f := newFixture(t)
	now := time.Now()
	for i := 1; i <= 10; i++ {
		f.put(t, "s", fmt.Sprintf("r%02d", i), now.Add(-time.Duration(i)*24*time.Hour), true)
	}
	f.put(t, "s", "skewed", now.AddDate(1, 0, 0), true)
	var logs strings.Builder
	log := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn})
	rep, err := Prune(t.Context(), f.db, memRef{f.st}, Options{Server: "s", Now: func() time.Time { return now },
		Policy: retention.Policy{Within: 30 * 24 * time.Hour, MinKeep: 2}}, log)
	if err != nil {
		t.Fatal(err)
	}
	rows, _ := f.state(t, "s")
	if len(rows) != 11 || rep.RowsDeleted != 0 {
		t.Fatalf("rows %v, %d deleted: want all 11 kept (10 real runs within 30 days, and the skewed one)", rows, rep.RowsDeleted)
	}
	i := slices.IndexFunc(rep.Runs, func(r Run) bool { return r.RunID == "skewed" })
	if i < 0 || !rep.Runs[i].Keep || !strings.Contains(strings.Join(rep.Runs[i].Reasons, ","), "in the future") {
		t.Errorf("runs %+v: want skewed kept as finished in the future", rep.Runs)
	}
	for _, r := range rep.Runs {
		if r.RunID == "r01" && !slices.Contains(r.Reasons, "newest run") {
			t.Errorf("r01's reasons %v: want it the newest run", r.Reasons)
		}
	}
	if !strings.Contains(logs.String(), "skewed") || !strings.Contains(logs.String(), "future") {
		t.Errorf("log %q: want a warning naming skewed", logs.String())
	}
}

// TestPruneRunOfANodeWhoseClockWasBehind: a run whose row the catalog
// created more than catalog.FutureTolerance after its finished_at (a node
// whose clock was behind) is judged by its created_at, and the log names it;
// a row created within the tolerance is judged by its finished_at. Seven
// daily runs at noon, --keep-daily 7 --min-keep 3.
func TestPruneRunOfANodeWhoseClockWasBehind(t *testing.T) {
	now := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name               string
		finished, recorded time.Time // the run's finished_at and created_at
		wantKept           bool
		wantReason         string
		wantGone           string // the daily run that lost its bucket
	}{
		{
			name:     "three days behind, recorded 10 minutes ago: the newest run, not a 3-day-old one",
			finished: now.Add(-73 * time.Hour), recorded: now.Add(-10 * time.Minute),
			wantKept: true, wantReason: "newest run", wantGone: "d7",
		},
		{
			name:     "behind, recorded 10 days ago: judged as a 10-day-old run",
			finished: now.Add(-20 * 24 * time.Hour), recorded: now.Add(-10 * 24 * time.Hour),
		},
		{
			name:     "recorded 4 minutes after it finished (within the tolerance): judged by finished_at",
			finished: now.Add(-73 * time.Hour), recorded: now.Add(-73*time.Hour + 4*time.Minute),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			for d := 1; d <= 7; d++ {
				f.put(t, "s", fmt.Sprintf("d%d", d), now.AddDate(0, 0, -d), true)
			}
			f.put(t, "s", "skewed", tt.finished, true)
			f.createdAt(t, "skewed", tt.recorded)
			var logs strings.Builder
			log := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn})
			rep, err := Prune(t.Context(), f.db, memRef{f.st}, Options{Server: "s", Now: func() time.Time { return now },
				Policy: retention.Policy{Daily: 7, MinKeep: 3}}, log)
			if err != nil {
				t.Fatal(err)
			}
			rows, _ := f.state(t, "s")
			i := slices.IndexFunc(rep.Runs, func(r Run) bool { return r.RunID == "skewed" })
			if i < 0 {
				t.Fatalf("runs %+v: no verdict on skewed", rep.Runs)
			}
			got := rep.Runs[i]
			if got.Keep != tt.wantKept || slices.Contains(rows, "skewed") != tt.wantKept ||
				(tt.wantReason != "" && !slices.Contains(got.Reasons, tt.wantReason)) {
				t.Errorf("skewed kept %v for %v, rows %v; want kept %v (%q)", got.Keep, got.Reasons, rows, tt.wantKept, tt.wantReason)
			}
			if tt.wantGone != "" && slices.Contains(rows, tt.wantGone) {
				t.Errorf("rows %v: want %s gone (7 daily buckets, the newest skewed's)", rows, tt.wantGone)
			}
			behind := tt.recorded.Sub(tt.finished) > catalog.FutureTolerance
			if named := strings.Contains(logs.String(), "clock was behind") && strings.Contains(logs.String(), "skewed"); named != behind ||
				(rep.ClockBehind == 1) != behind {
				t.Errorf("clock_behind_runs %d, log %q: want the run named %v", rep.ClockBehind, logs.String(), behind)
			}
		})
	}
}
