package jobapi

import (
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Retention are the rules of a prune (archiver prune, or backup --keep-*):
// restic's forget rules with a floor of MinKeep archives.
type Retention struct {
	KeepLast, KeepHourly, KeepDaily, KeepWeekly, KeepMonthly, KeepYearly int
	KeepWithin                                                           string // a Duration, e.g. "30d"; "" = none
	MinKeep                                                              int
	Grace                                                                string // a Duration; "" = DefaultGrace
}

// RetentionFlags returns the flag names of Retention.
func RetentionFlags() []string {
	return []string{FlagKeepLast, FlagKeepHourly, FlagKeepDaily, FlagKeepWeekly, FlagKeepMonthly, FlagKeepYearly,
		FlagKeepWithin, FlagMinKeep, FlagGrace}
}

// withDefaults returns r with Grace set.
func (r Retention) withDefaults() Retention {
	if r.Grace == "" {
		r.Grace = DefaultGrace.String()
	}
	return r
}

// args appends the flags of r: the non-zero counts, keepWithin when set,
// always --min-keep, and --grace when set.
func (r Retention) args(a *args) {
	for _, f := range []struct {
		flag string
		n    int
	}{{FlagKeepLast, r.KeepLast}, {FlagKeepHourly, r.KeepHourly}, {FlagKeepDaily, r.KeepDaily},
		{FlagKeepWeekly, r.KeepWeekly}, {FlagKeepMonthly, r.KeepMonthly}, {FlagKeepYearly, r.KeepYearly}} {
		a.int(f.flag, int64(f.n))
	}
	a.str(FlagKeepWithin, r.KeepWithin)
	a.always(FlagMinKeep, strconv.Itoa(r.MinKeep))
	a.str(FlagGrace, r.Grace)
}

// Args returns the archiver flags of r.
func (r Retention) Args() []string {
	var a args
	r.args(&a)
	return a
}

// Bind registers the retention flags on fs, storing into r.
func (r *Retention) Bind(fs *flag.FlagSet) {
	fs.IntVar(&r.KeepLast, FlagKeepLast, 0, "keep the N newest runs")
	fs.IntVar(&r.KeepHourly, FlagKeepHourly, 0, "keep the newest run of each of the last N hours that have one")
	fs.IntVar(&r.KeepDaily, FlagKeepDaily, 0, "keep the newest run of each of the last N days that have one")
	fs.IntVar(&r.KeepWeekly, FlagKeepWeekly, 0, "keep the newest run of each of the last N ISO weeks that have one")
	fs.IntVar(&r.KeepMonthly, FlagKeepMonthly, 0, "keep the newest run of each of the last N months that have one")
	fs.IntVar(&r.KeepYearly, FlagKeepYearly, 0, "keep the newest run of each of the last N years that have one")
	fs.StringVar(&r.KeepWithin, FlagKeepWithin, "", "keep every run finished within this long of the newest ("+DurationExamples+")")
	fs.IntVar(&r.MinKeep, FlagMinKeep, 0, "never fewer runs than this, at least 1 (required with any keep rule)")
	fs.StringVar(&r.Grace, FlagGrace, DefaultGrace.String(), "keep runs and archive files younger than this")
}

// MaxDeadline is the longest deadline a Job may have (the provider refuses
// a longer one): no backup runs longer, so a pack registered this long ago
// and never used since is not being written by any backup, in any store
// (see the archiver's prune.PackHorizon).
const MaxDeadline = 7 * 24 * time.Hour

// CheckGrace reports whether grace, a prune's grace period, covers
// deadline, the longest a backup into the same store may run (its Job's
// activeDeadlineSeconds): a prune keeps only the runs, files and packs
// younger than grace, so a shorter one could remove what a backup still
// running has written. deadlineOf names the deadline in the error, which
// starts "is shorter than <deadlineOf> <deadline>" for the caller to
// prefix with the grace input.
func CheckGrace(grace, deadline time.Duration, deadlineOf string) error {
	if grace >= deadline {
		return nil
	}
	return fmt.Errorf("is shorter than %s %s: a prune could remove what a backup still running has written (it keeps only what is younger than grace); set the grace to at least %s, or shorten %s",
		deadlineOf, ShortDuration(deadline), ShortDuration(deadline), deadlineOf)
}

// GraceOf returns a grace input's duration, DefaultGrace when it is
// empty, and how a message shows it; ok is false when it does not parse to
// a positive duration (its own check names that).
func GraceOf(grace string) (d time.Duration, shown string, ok bool) {
	if grace == "" {
		return DefaultGrace, "(not set: the default " + ShortDuration(DefaultGrace) + ")", true
	}
	d, err := ParseDuration(grace)
	return d, strconv.Quote(grace), err == nil && d > 0
}

// ShortDuration formats d as Go does, without zero minutes and seconds at
// its end: "1h" for an hour, "1h30m" for 90 minutes.
func ShortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// DurationExamples are examples of the Duration grammar for messages.
const DurationExamples = "30d, 2w, 36h"

// MaxDurationCount is the largest count of weeks or days a Duration takes.
const MaxDurationCount = 100000

// ParseDuration parses a retention duration (keepWithin, grace): Go's
// syntax ("36h", "90m", "1.5h") with weeks and days in front ("2w", "30d",
// "1w3d12h"), each count at most MaxDurationCount, the whole at most what a
// time.Duration holds (about 292 years).
func ParseDuration(s string) (time.Duration, error) {
	rest, total := s, time.Duration(0)
	for _, u := range []struct {
		suffix byte
		d      time.Duration
	}{{'w', 7 * 24 * time.Hour}, {'d', 24 * time.Hour}} {
		i := 0
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		if i > 0 && i < len(rest) && rest[i] == u.suffix {
			n, err := strconv.Atoi(rest[:i])
			if err != nil || n > MaxDurationCount || time.Duration(n) > (math.MaxInt64-total)/u.d {
				return 0, fmt.Errorf("duration %q: %q is out of range", s, rest[:i+1])
			}
			total += time.Duration(n) * u.d
			rest = rest[i+1:]
		}
	}
	if rest != "" {
		d, err := time.ParseDuration(rest)
		if err != nil || d < 0 {
			return 0, fmt.Errorf("duration %q is invalid: use e.g. %s or 1w3d12h", s, DurationExamples)
		}
		if d > math.MaxInt64-total {
			return 0, fmt.Errorf("duration %q is out of range: at most about 292 years", s)
		}
		total += d
	} else if s == "" {
		return 0, fmt.Errorf("duration is empty: use e.g. %s or 1w3d12h", DurationExamples)
	}
	return total, nil
}
