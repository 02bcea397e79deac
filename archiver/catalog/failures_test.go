package catalog

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/worldbackup/worldbackup/internal/pgtest"
)

func TestReason(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		secrets []string
		want    func(string) bool
	}{
		{"nil", nil, nil, func(s string) bool { return s == "unknown error" }},
		{"plain", errors.New("disk full"), nil, func(s string) bool { return s == "disk full" }},
		{"secret masked", errors.New("auth hunter2pw failed for hunter2pw"), []string{"hunter2pw"},
			func(s string) bool { return s == "auth xxxxx failed for xxxxx" }},
		{"short secret left", errors.New("a b c"), []string{"b"}, func(s string) bool { return s == "a b c" }},
		{"control characters", errors.New("line1\nline2\x1b[31m"), nil,
			func(s string) bool { return !strings.ContainsAny(s, "\n\x1b") && strings.HasPrefix(s, "line1 line2") }},
		{"cut on a rune", errors.New(strings.Repeat("é", 2000)), nil,
			func(s string) bool {
				return len(s) <= MaxReasonBytes && utf8.ValidString(s) && strings.HasSuffix(s, "...")
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Reason(tt.err, tt.secrets...); !tt.want(got) {
				t.Errorf("Reason = %q", got)
			}
		})
	}
}

// TestFailuresAndRetry: failed attempts record beside the run-ID
// idempotency key: two failures and then a successful run of one run ID
// all record; Failures lists them newest first, bounded by limit.
func TestFailuresAndRetry(t *testing.T) {
	db := migrated(t)
	ctx := t.Context()
	t0 := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	for i, reason := range []string{"first: connection reset", "second: " + strings.Repeat("x", 3000)} {
		f := Failure{RunID: "r1", Server: "survival", StartedAt: t0.Add(time.Duration(i) * time.Hour),
			FinishedAt: t0.Add(time.Duration(i)*time.Hour + time.Minute), Reason: reason}
		if err := db.RecordFailure(ctx, f); err != nil {
			t.Fatalf("RecordFailure %d: %v", i, err)
		}
	}
	rec := Record{RunID: "r1", Server: "survival", ArchiveRef: "/b/survival/r1.tar.zst", SizeBytes: 1,
		SHA256: strings.Repeat("a", 64), Compression: "zstd", StartedAt: t0.Add(2 * time.Hour), FinishedAt: t0.Add(2*time.Hour + time.Minute)}
	if ok, err := db.Insert(ctx, rec); err != nil || !ok {
		t.Fatalf("Insert after failures: %v, %v", ok, err)
	}
	if err := db.RecordFailure(ctx, Failure{RunID: "other", Server: "creative", StartedAt: t0, FinishedAt: t0, Reason: "x"}); err != nil {
		t.Fatal(err)
	}
	fs, err := db.Failures(ctx, "survival", "", 0)
	if err != nil || len(fs) != 2 {
		t.Fatalf("Failures: %v, %d rows", err, len(fs))
	}
	if !strings.HasPrefix(fs[0].Reason, "second") || len(fs[0].Reason) > MaxReasonBytes || fs[1].Reason != "first: connection reset" {
		t.Errorf("failures not newest first or reason not bounded: %q / %q", fs[0].Reason[:20], fs[1].Reason)
	}
	if fs, err := db.Failures(ctx, "", "", 1); err != nil || len(fs) != 1 || fs[0].Server != "survival" {
		t.Errorf("Failures limit 1: %v %+v", err, fs)
	}
	if r, err := db.Lookup(ctx, "r1"); err != nil || r.SHA256 != rec.SHA256 {
		t.Errorf("Lookup r1 after failures: %v", err)
	}
	runs, err := db.NewestRuns(ctx, "", "", 0)
	if err != nil || len(runs) != 1 {
		t.Errorf("NewestRuns: %v %d", err, len(runs))
	}
}

// TestNoSchema: reads of a database never migrated wrap ErrNoSchema.
func TestNoSchema(t *testing.T) {
	db := open(t, pgtest.URL(t))
	if _, err := db.Failures(t.Context(), "", "", 0); !errors.Is(err, ErrNoSchema) {
		t.Errorf("Failures on an unmigrated database: %v, want ErrNoSchema", err)
	}
	if _, err := db.NewestRuns(t.Context(), "", "", 0); !errors.Is(err, ErrNoSchema) {
		t.Errorf("NewestRuns on an unmigrated database: %v, want ErrNoSchema", err)
	}
}
