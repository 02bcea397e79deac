package naming

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Spread macros: a schedule of this form fires once per period at a minute
// chosen by SpreadSchedule from its key (k8up's @daily-random and kin), so
// a fleet's schedules do not all fire at the period's start.
const (
	HourlyRandom  = "@hourly-random"
	DailyRandom   = "@daily-random"
	WeeklyRandom  = "@weekly-random"
	MonthlyRandom = "@monthly-random"
)

// MaxSpread is the longest spread window: a day.
const MaxSpread = 24 * time.Hour

// SpreadMacros lists the schedules that SpreadSchedule spreads by itself.
func SpreadMacros() []string {
	return []string{HourlyRandom, DailyRandom, WeeklyRandom, MonthlyRandom}
}

// SpreadKey is the key a server's spread offset is derived from: its
// cluster and its name, so the same server in the same cluster always
// fires at the same minute, and servers (and the same server in several
// clusters) fire at different ones.
func SpreadKey(cluster, server string) string {
	return cluster + "/" + server
}

// SpreadSchedule returns the cron expression that schedule becomes for key:
//
//   - a spread macro (@hourly-random, @daily-random, @weekly-random,
//     @monthly-random; window must be 0) fires once per hour, day, week or
//     month at an offset within the whole period: minute 0-59, then hour
//     0-23, weekday 0-6, day of the month 1-28 (every month has it);
//   - a schedule with a window (a whole number of minutes, at most 24h) is
//     shifted by an offset in [0, window): one whose minute and hour are
//     single numbers ("0 3 * * *", or @daily, @weekly, ...) by minutes and
//     hours, wrapping past midnight only when its day fields are "*"; an
//     hourly one ("15 * * * *", @hourly) by minutes, with a window of at
//     most 1h;
//   - any other schedule with no window is returned as it is.
//
// The offset is a SHA-256 of key, so the same key always gives the same
// minute and keys spread evenly over the window. It is the offset of a
// server's backup schedule; VerifySpreadSchedule gives its verify's.
func SpreadSchedule(schedule string, window time.Duration, key string) (string, error) {
	return spreadSchedule(schedule, window, key, false)
}

// VerifySpreadSchedule returns the cron expression of the verify schedule
// of the server whose backup schedule SpreadSchedule gives for key: the
// same rules, with the offset half the period (or window) away from the
// backup's, so the same schedule and key never fire the backup and the
// verify at the same minute (for a window of at least 2m): @daily-random
// verifies twelve hours after or before the backup, @hourly-random thirty
// minutes.
func VerifySpreadSchedule(schedule string, window time.Duration, key string) (string, error) {
	return spreadSchedule(schedule, window, key, true)
}

// spreadSchedule is SpreadSchedule, the offset moved by half its range when
// opposite is set.
func spreadSchedule(schedule string, window time.Duration, key string, opposite bool) (string, error) {
	schedule = strings.TrimSpace(schedule)
	if window < 0 || window > MaxSpread || window%time.Minute != 0 {
		return "", fmt.Errorf("spread %s must be a whole number of minutes from 1m to 24h", window)
	}
	hash := spreadHash(key)
	// offset is the key's offset in [0, n) (n minutes), or half of n past it.
	offset := func(n uint64) uint64 {
		if opposite {
			return (hash%n + n/2) % n
		}
		return hash % n
	}
	const day = 24 * 60
	switch schedule {
	case HourlyRandom, DailyRandom, WeeklyRandom, MonthlyRandom:
		if window != 0 {
			return "", fmt.Errorf("%s spreads over its whole period: leave spread unset, or give a schedule such as \"0 3 * * *\" with spread", schedule)
		}
		switch schedule {
		case HourlyRandom:
			return fmt.Sprintf("%d * * * *", offset(60)), nil
		case DailyRandom:
			o := offset(day)
			return fmt.Sprintf("%d %d * * *", o%60, o/60), nil
		case WeeklyRandom:
			o := offset(7 * day)
			return fmt.Sprintf("%d %d * * %d", o%60, o/60%24, o/day), nil
		default:
			o := offset(28 * day)
			return fmt.Sprintf("%d %d %d * *", o%60, o/60%24, o/day+1), nil
		}
	}
	if window == 0 {
		return schedule, nil
	}
	fields := strings.Fields(expandMacro(schedule))
	if len(fields) != 5 {
		return "", fmt.Errorf("spread needs a five-field schedule (or @hourly, @daily, @weekly, @monthly, @yearly), not %q", schedule)
	}
	minute, mok := cronNumber(fields[0], 59)
	hour, hok := cronNumber(fields[1], 23)
	w := uint64(window / time.Minute)
	switch {
	case mok && fields[1] == "*":
		if w > 60 {
			return "", fmt.Errorf("schedule %q fires every hour: its spread may be at most 1h, not %s", schedule, window)
		}
		fields[0] = strconv.FormatUint((minute+offset(w))%60, 10)
	case mok && hok:
		t := hour*60 + minute + offset(w)
		if hour*60+minute+w > day && strings.Join(fields[2:], " ") != "* * *" {
			return "", fmt.Errorf("schedule %q with spread %s may fire past midnight, on another day than its day fields say: shorten spread to at most %s or start earlier", schedule, window, time.Duration(day-hour*60-minute)*time.Minute)
		}
		t %= day
		fields[0], fields[1] = strconv.FormatUint(t%60, 10), strconv.FormatUint(t/60, 10)
	default:
		return "", fmt.Errorf("spread needs a schedule whose minute and hour are single numbers (e.g. \"0 3 * * *\") or an hourly one (\"0 * * * *\"), not %q; or use one of %s", schedule, strings.Join(SpreadMacros(), ", "))
	}
	return strings.Join(fields, " "), nil
}

// expandMacro returns the five fields that a cron macro stands for.
func expandMacro(s string) string {
	switch s {
	case "@hourly":
		return "0 * * * *"
	case "@daily", "@midnight":
		return "0 0 * * *"
	case "@weekly":
		return "0 0 * * 0"
	case "@monthly":
		return "0 0 1 * *"
	case "@yearly", "@annually":
		return "0 0 1 1 *"
	}
	return s
}

// cronNumber parses a cron field that is a single number from 0 to max.
func cronNumber(f string, max uint64) (uint64, bool) {
	n, err := strconv.ParseUint(f, 10, 8)
	return n, err == nil && n <= max
}

func spreadHash(key string) uint64 {
	sum := sha256.Sum256([]byte(key))
	return binary.BigEndian.Uint64(sum[:8])
}
