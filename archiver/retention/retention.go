// Package retention decides which backup runs to keep, with restic's
// `forget` semantics and a floor that no policy can go under.
//
// A run kept by any rule is kept. The bucket rules (hourly, daily, weekly,
// monthly, yearly) walk the runs from newest to oldest and keep the newest
// run of each of the last N buckets that hold a run; last keeps the N newest
// runs; within keeps every run finished within that duration of the newest
// run (not of now, so a server that stopped backing up keeps its history).
// The floor: the newest run is always kept, and never fewer than MinKeep runs.
// Apply is a pure function of the runs and the policy.
package retention

import (
	"errors"
	"fmt"
	"sort"
	"time"
)

// Policy is a retention policy for one server's runs.
type Policy struct {
	Last, Hourly, Daily, Weekly, Monthly, Yearly int
	Within                                       time.Duration
	// MinKeep is the floor: never fewer runs than this (at least 1).
	MinKeep int
	// Location is the time zone of the buckets (default UTC).
	Location *time.Location
}

// Validate checks the policy a user typed.
func (p Policy) Validate() error {
	var errs []error
	for _, c := range []struct {
		name string
		n    int
	}{{"keep-last", p.Last}, {"keep-hourly", p.Hourly}, {"keep-daily", p.Daily}, {"keep-weekly", p.Weekly}, {"keep-monthly", p.Monthly}, {"keep-yearly", p.Yearly}} {
		if c.n < 0 {
			errs = append(errs, fmt.Errorf("%s is %d: want 0 or more", c.name, c.n))
		}
	}
	if p.Within < 0 {
		errs = append(errs, fmt.Errorf("keep-within is %s: want 0 or more", p.Within))
	}
	if p.MinKeep < 1 {
		errs = append(errs, fmt.Errorf("min-keep is %d: want 1 or more (the floor of archives that are never removed)", p.MinKeep))
	}
	if p.Last+p.Hourly+p.Daily+p.Weekly+p.Monthly+p.Yearly == 0 && p.Within == 0 {
		errs = append(errs, errors.New("no keep rule: set at least one of keep-last, keep-hourly, keep-daily, keep-weekly, keep-monthly, keep-yearly, keep-within"))
	}
	return errors.Join(errs...)
}

// Run is one recorded backup run.
type Run struct {
	ID         string
	FinishedAt time.Time
}

// Decision is the verdict on one run, with every reason it is kept.
type Decision struct {
	Run
	Keep    bool
	Reasons []string
}

// Apply decides for each run; the result is sorted newest first (ties by ID).
// The policy must be valid.
func Apply(runs []Run, p Policy) []Decision {
	loc := p.Location
	if loc == nil {
		loc = time.UTC
	}
	out := make([]Decision, len(runs))
	for i, r := range runs {
		out[i] = Decision{Run: r}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].FinishedAt.Equal(out[j].FinishedAt) {
			return out[i].FinishedAt.After(out[j].FinishedAt)
		}
		return out[i].ID > out[j].ID
	})
	if len(out) == 0 {
		return out
	}

	type rule struct {
		name  string
		left  int
		key   func(t time.Time, i int) string
		last  string
		valid bool
	}
	rules := []*rule{
		{name: "last", left: p.Last, key: func(_ time.Time, i int) string { return fmt.Sprint(i) }},
		{name: "hourly", left: p.Hourly, key: func(t time.Time, _ int) string { return t.Format("2006-01-02 15") }},
		{name: "daily", left: p.Daily, key: func(t time.Time, _ int) string { return t.Format("2006-01-02") }},
		{name: "weekly", left: p.Weekly, key: func(t time.Time, _ int) string { y, w := t.ISOWeek(); return fmt.Sprintf("%d-W%02d", y, w) }},
		{name: "monthly", left: p.Monthly, key: func(t time.Time, _ int) string { return t.Format("2006-01") }},
		{name: "yearly", left: p.Yearly, key: func(t time.Time, _ int) string { return t.Format("2006") }},
	}
	newest := out[0].FinishedAt
	kept := 0
	for i := range out {
		d := &out[i]
		t := d.FinishedAt.In(loc)
		for _, r := range rules {
			if r.left == 0 {
				continue
			}
			k := r.key(t, i)
			if r.valid && k == r.last {
				continue // a newer run already holds this bucket
			}
			r.last, r.valid = k, true
			r.left--
			d.Reasons = append(d.Reasons, r.name+" "+k)
		}
		if p.Within > 0 && !d.FinishedAt.Before(newest.Add(-p.Within)) {
			d.Reasons = append(d.Reasons, "within "+p.Within.String()+" of the newest")
		}
		if i == 0 {
			d.Reasons = append(d.Reasons, "newest run")
		}
		if d.Reasons != nil {
			d.Keep = true
			kept++
		}
	}
	for i := range out {
		if kept >= p.MinKeep {
			break
		}
		if !out[i].Keep {
			out[i].Keep = true
			out[i].Reasons = append(out[i].Reasons, fmt.Sprintf("min-keep %d", p.MinKeep))
			kept++
		}
	}
	return out
}
