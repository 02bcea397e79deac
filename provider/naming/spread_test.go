package naming

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// checkCron fails unless s is five cron fields, each a number in its range
// or "*".
func checkCron(t *testing.T, s string) []int {
	t.Helper()
	f := strings.Fields(s)
	if len(f) != 5 {
		t.Fatalf("%q has %d fields, want 5", s, len(f))
	}
	ranges := [5][2]int{{0, 59}, {0, 23}, {1, 31}, {1, 12}, {0, 6}}
	vals := make([]int, 5)
	for i, v := range f {
		if v == "*" {
			vals[i] = -1
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < ranges[i][0] || n > ranges[i][1] {
			t.Fatalf("%q: field %d (%q) is not a number from %d to %d", s, i, v, ranges[i][0], ranges[i][1])
		}
		vals[i] = n
	}
	return vals
}

func TestSpreadScheduleStable(t *testing.T) {
	for _, tc := range []struct {
		schedule string
		window   time.Duration
	}{{DailyRandom, 0}, {HourlyRandom, 0}, {WeeklyRandom, 0}, {MonthlyRandom, 0}, {"0 3 * * *", 2 * time.Hour}, {"@hourly", 30 * time.Minute}} {
		t.Run(tc.schedule, func(t *testing.T) {
			a, err := SpreadSchedule(tc.schedule, tc.window, SpreadKey("eu", "survival"))
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if b, _ := SpreadSchedule(tc.schedule, tc.window, SpreadKey("eu", "survival")); b != a {
					t.Fatalf("the same key gave %q, then %q", a, b)
				}
			}
			checkCron(t, a)
			other, _ := SpreadSchedule(tc.schedule, tc.window, SpreadKey("us", "survival"))
			other2, _ := SpreadSchedule(tc.schedule, tc.window, SpreadKey("eu", "lobby"))
			if a == other && a == other2 {
				t.Errorf("another cluster and another server both give %q: the key does not reach the offset", a)
			}
		})
	}
}

// spreadCase is a schedule and window, and how to read a spread
// expression of it.
type spreadCase struct {
	name     string
	schedule string
	window   time.Duration
	minutes  int               // window length in minutes
	offset   func(v []int) int // minutes into the window
	buckets  int
	days     func(v []int) bool // day fields as expected
}

// spreadCases are the schedules and windows the spread tests cover.
var spreadCases = []spreadCase{
	{"daily-random", DailyRandom, 0, 1440, func(v []int) int { return v[1]*60 + v[0] }, 24, func(v []int) bool { return v[2] == -1 && v[3] == -1 && v[4] == -1 }},
	{"hourly-random", HourlyRandom, 0, 60, func(v []int) int { return v[0] }, 6, func(v []int) bool { return v[1] == -1 && v[2] == -1 && v[4] == -1 }},
	{"weekly-random", WeeklyRandom, 0, 7 * 1440, func(v []int) int { return v[4]*1440 + v[1]*60 + v[0] }, 7, func(v []int) bool { return v[2] == -1 && v[3] == -1 }},
	{"monthly-random", MonthlyRandom, 0, 28 * 1440, func(v []int) int { return (v[2]-1)*1440 + v[1]*60 + v[0] }, 28, func(v []int) bool { return v[2] <= 28 && v[3] == -1 && v[4] == -1 }},
	{"03:00 + 2h", "0 3 * * *", 2 * time.Hour, 120, func(v []int) int { return v[1]*60 + v[0] - 180 }, 8, func(v []int) bool { return v[2] == -1 }},
	{"23:30 + 1h wraps", "30 23 * * *", time.Hour, 60, func(v []int) int { return (v[1]*60 + v[0] - 23*60 - 30 + 1440) % 1440 }, 4, func(v []int) bool { return v[2] == -1 }},
	{"weekly + 3h", "@weekly", 3 * time.Hour, 180, func(v []int) int { return v[1]*60 + v[0] }, 6, func(v []int) bool { return v[4] == 0 }},
	{"hourly at :15 + 30m", "15 * * * *", 30 * time.Minute, 30, func(v []int) int { return v[0] - 15 }, 3, func(v []int) bool { return v[1] == -1 }},
}

// TestSpreadScheduleCoversWindow: 2,000 servers land in every part of the
// window, none outside it, each bucket near its share.
func TestSpreadScheduleCoversWindow(t *testing.T) {
	const n = 2000
	for _, tc := range spreadCases {
		t.Run(tc.name, func(t *testing.T) {
			counts := make([]int, tc.buckets)
			distinct := map[string]bool{}
			for i := range n {
				s, err := SpreadSchedule(tc.schedule, tc.window, SpreadKey("eu", fmt.Sprintf("server-%d", i)))
				if err != nil {
					t.Fatal(err)
				}
				v := checkCron(t, s)
				if !tc.days(v) {
					t.Fatalf("%q: day fields changed", s)
				}
				o := tc.offset(v)
				if o < 0 || o >= tc.minutes {
					t.Fatalf("%q is %d minutes into a window of %d", s, o, tc.minutes)
				}
				counts[o*tc.buckets/tc.minutes]++
				distinct[s] = true
			}
			share := n / tc.buckets
			for b, c := range counts {
				if c < share/2 || c > share*3/2 {
					t.Errorf("bucket %d of %d holds %d of %d servers, want about %d: %v", b, tc.buckets, c, n, share, counts)
				}
			}
			if want := min(tc.minutes, n) / 2; len(distinct) < want {
				t.Errorf("%d distinct schedules for %d servers, want at least %d", len(distinct), n, want)
			}
		})
	}
}

// TestVerifySpreadScheduleHalfAway: for the same schedule and key, a
// server's verify fires half the window (the period of a *-random schedule)
// away from its backup, within the same window and days: never at the same
// minute, @daily-random twelve hours apart.
func TestVerifySpreadScheduleHalfAway(t *testing.T) {
	for _, tc := range spreadCases {
		t.Run(tc.name, func(t *testing.T) {
			for i := range 200 {
				key := SpreadKey("eu", fmt.Sprintf("server-%d", i))
				backup, err := SpreadSchedule(tc.schedule, tc.window, key)
				if err != nil {
					t.Fatal(err)
				}
				verify, err := VerifySpreadSchedule(tc.schedule, tc.window, key)
				if err != nil {
					t.Fatal(err)
				}
				b, v := checkCron(t, backup), checkCron(t, verify)
				if !tc.days(v) {
					t.Fatalf("verify %q: day fields changed", verify)
				}
				bo, vo := tc.offset(b), tc.offset(v)
				if vo < 0 || vo >= tc.minutes {
					t.Fatalf("verify %q is %d minutes into a window of %d", verify, vo, tc.minutes)
				}
				if d := (vo - bo + tc.minutes) % tc.minutes; d != tc.minutes/2 && d != (tc.minutes+1)/2 {
					t.Fatalf("%s: backup %q, verify %q: %d minutes apart in a window of %d, want half of it", key, backup, verify, d, tc.minutes)
				}
			}
		})
	}
}

func TestSpreadScheduleRefuses(t *testing.T) {
	for _, tc := range []struct {
		schedule string
		window   time.Duration
		want     string
	}{
		{DailyRandom, time.Hour, "whole period"},
		{"0 3 * * *", 90 * time.Second, "whole number of minutes"},
		{"0 3 * * *", 25 * time.Hour, "from 1m to 24h"},
		{"0 3 * * *", -time.Minute, "from 1m to 24h"},
		{"*/5 * * * *", time.Hour, "single numbers"},
		{"0 1-5 * * *", time.Hour, "single numbers"},
		{"0 * * * *", 2 * time.Hour, "at most 1h"},
		{"0 23 * * 1", 2 * time.Hour, "past midnight"},
		{"0 3 * *", time.Hour, "five-field"},
	} {
		t.Run(tc.schedule+"/"+tc.window.String(), func(t *testing.T) {
			got, err := SpreadSchedule(tc.schedule, tc.window, "eu/survival")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("SpreadSchedule = %q, %v; want an error saying %q", got, err, tc.want)
			}
		})
	}
}

func TestSpreadScheduleWithoutWindow(t *testing.T) {
	for _, s := range []string{"0 4 * * *", "@daily", "*/15 * * * *"} {
		if got, err := SpreadSchedule(s, 0, "eu/survival"); err != nil || got != s {
			t.Errorf("SpreadSchedule(%q, 0) = %q, %v; want it unchanged", s, got, err)
		}
	}
}
