package prune

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

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
