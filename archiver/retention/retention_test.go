package retention

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 30, 22, 0, 0, 0, time.UTC) // a Monday

// every makes n runs, the newest at t0, one every step going back.
func every(n int, step time.Duration) []Run {
	runs := make([]Run, n)
	for i := range runs {
		at := t0.Add(-time.Duration(i) * step)
		runs[i] = Run{ID: at.Format("2006-01-02T15:04"), FinishedAt: at}
	}
	return runs
}

func kept(ds []Decision) []string {
	var ids []string
	for _, d := range ds {
		if d.Keep {
			ids = append(ids, d.ID)
		}
	}
	return ids
}

func countReason(ds []Decision, prefix string) int {
	n := 0
	for _, d := range ds {
		for _, r := range d.Reasons {
			if strings.HasPrefix(r, prefix) {
				n++
			}
		}
	}
	return n
}

func TestApply(t *testing.T) {
	day := 24 * time.Hour
	tests := []struct {
		name string
		runs []Run
		p    Policy
		want []string
	}{
		{
			name: "keep-last 3 of 5",
			runs: every(5, day),
			p:    Policy{Last: 3, MinKeep: 1},
			want: []string{"2026-11-30T22:00", "2026-11-29T22:00", "2026-11-28T22:00"},
		},
		{
			name: "keep-daily 3 keeps the newest run of each of the last 3 days that have one",
			runs: every(10, 12*time.Hour), // 22:00 and 10:00 each day
			p:    Policy{Daily: 3, MinKeep: 1},
			want: []string{"2026-11-30T22:00", "2026-11-29T22:00", "2026-11-28T22:00"},
		},
		{
			name: "keep-hourly counts hours that have a run, not clock hours",
			runs: []Run{
				{ID: "a", FinishedAt: t0.Add(20 * time.Minute)},
				{ID: "b", FinishedAt: t0.Add(5 * time.Minute)},
				{ID: "c", FinishedAt: t0.Add(-5 * time.Hour)},
				{ID: "d", FinishedAt: t0.Add(-30 * time.Hour)},
			},
			p:    Policy{Hourly: 3, MinKeep: 1},
			want: []string{"a", "c", "d"},
		},
		{
			name: "keep-within is relative to the newest run, not to now",
			runs: []Run{
				{ID: "new", FinishedAt: t0.AddDate(-1, 0, 0)},
				{ID: "day-before", FinishedAt: t0.AddDate(-1, 0, -1)},
				{ID: "week-before", FinishedAt: t0.AddDate(-1, 0, -7)},
			},
			p:    Policy{Within: 48 * time.Hour, MinKeep: 1},
			want: []string{"new", "day-before"},
		},
		{
			name: "a run kept by any rule is kept",
			runs: every(40, day),
			p:    Policy{Last: 2, Weekly: 2, MinKeep: 1},
			// last 2: 30 Nov (Mon), 29 Nov; weekly: the week of 30 Nov (30 Nov), the week before (29 Nov, a Sunday).
			want: []string{"2026-11-30T22:00", "2026-11-29T22:00"},
		},
		{
			name: "the floor: a policy that would keep only the newest keeps min-keep",
			runs: every(6, day),
			p:    Policy{Within: time.Hour, MinKeep: 3},
			want: []string{"2026-11-30T22:00", "2026-11-29T22:00", "2026-11-28T22:00"},
		},
		{
			name: "the newest run is always kept",
			runs: every(3, day),
			p:    Policy{Within: time.Nanosecond, MinKeep: 1},
			want: []string{"2026-11-30T22:00"},
		},
		{
			name: "fewer runs than the floor: all kept",
			runs: every(2, day),
			p:    Policy{Last: 1, MinKeep: 5},
			want: []string{"2026-11-30T22:00", "2026-11-29T22:00"},
		},
		{
			name: "unsorted input",
			runs: []Run{every(3, day)[2], every(3, day)[0], every(3, day)[1]},
			p:    Policy{Last: 2, MinKeep: 1},
			want: []string{"2026-11-30T22:00", "2026-11-29T22:00"},
		},
		{
			name: "no runs",
			p:    Policy{Last: 2, MinKeep: 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.p.Validate(); err != nil {
				t.Fatal(err)
			}
			ds := Apply(tc.runs, tc.p)
			if got := kept(ds); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("kept %v, want %v\n%v", got, tc.want, ds)
			}
		})
	}
}

// TestResticDocumentedExample is the example of restic's documentation:
// daily snapshots for 100 years, `forget --keep-daily 7 --keep-weekly 5
// --keep-monthly 12 --keep-yearly 75` keeps the 7 newest dailies, then the
// last snapshot of 4 more weeks (7 dailies already include a week), of 11 or
// 12 more months and of the years, back 75 years.
func TestResticDocumentedExample(t *testing.T) {
	runs := every(36525, 24*time.Hour)
	ds := Apply(runs, Policy{Daily: 7, Weekly: 5, Monthly: 12, Yearly: 75, MinKeep: 1})
	for rule, want := range map[string]int{"daily": 7, "weekly": 5, "monthly": 12, "yearly": 75} {
		if got := countReason(ds, rule+" "); got != want {
			t.Errorf("%s kept %d runs, want %d", rule, got, want)
		}
	}
	k := kept(ds)
	if len(k) < 7+4+11+74-2 || len(k) > 7+5+12+75 {
		t.Errorf("kept %d runs, want about 7 + 4 + 11 + 74", len(k))
	}
	oldest := k[len(k)-1]
	if !strings.HasPrefix(oldest, "1952-12-31") {
		t.Errorf("oldest kept run %s, want the last day of 1952 (75 years back)", oldest)
	}
	// Each weekly keep is the newest run of its ISO week: a Sunday here,
	// but for the current week.
	for _, d := range ds {
		for _, r := range d.Reasons {
			if strings.HasPrefix(r, "weekly") && d.FinishedAt != t0 && d.FinishedAt.Weekday() != time.Sunday {
				t.Errorf("weekly keep %s is a %s, want a Sunday", d.ID, d.FinishedAt.Weekday())
			}
		}
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		p    Policy
		want string
	}{
		{"no rule", Policy{MinKeep: 1}, "no keep rule"},
		{"no floor", Policy{Last: 3}, "min-keep is 0"},
		{"negative", Policy{Daily: -1, MinKeep: 1}, "keep-daily is -1"},
		{"negative within", Policy{Within: -time.Hour, MinKeep: 1}, "keep-within"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want %q", err, tc.want)
			}
		})
	}
}
