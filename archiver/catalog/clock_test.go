package catalog

import (
	"testing"
	"time"
)

// TestEndedAt: a row created (the database's clock) more than
// FutureTolerance after its finished_at (the node's) was recorded by a node
// whose clock was behind, and its run ended when the row was created.
func TestEndedAt(t *testing.T) {
	finished := time.Date(2026, 11, 20, 3, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		created time.Time
		behind  bool
	}{
		{"recorded a second after it finished", finished.Add(time.Second), false},
		{"recorded FutureTolerance after it finished", finished.Add(FutureTolerance), false},
		{"recorded just past FutureTolerance after", finished.Add(FutureTolerance + time.Second), true},
		{"recorded three days after: a clock three days behind", finished.Add(72 * time.Hour), true},
		{"recorded before it finished: a clock ahead", finished.Add(-time.Hour), false},
		{"no created_at (a record not read from the catalog)", time.Time{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Record{FinishedAt: finished, CreatedAt: tt.created}
			want := finished
			if tt.behind {
				want = tt.created
			}
			if r.ClockBehind() != tt.behind || !r.EndedAt().Equal(want) {
				t.Errorf("ClockBehind %v, EndedAt %v; want %v, %v", r.ClockBehind(), r.EndedAt(), tt.behind, want)
			}
		})
	}
}
