package provider

import (
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/worldbackup/worldbackup/jobapi"
)

// TestRulesAreTheArchivers shows that the components accept exactly what
// the archiver accepts for the rules both apply: an input that passes
// Validate no longer fails the Job with exit 2 after `pulumi up`, and an
// input the archiver takes is not refused. Each case was a drift before
// the rules had one owner (jobapi).
func TestRulesAreTheArchivers(t *testing.T) {
	tests := []struct {
		name   string
		modify func(a *WorldPruneArgs)
		ok     bool
	}{
		// The archiver caps weeks and days at 100000; the component took any count.
		{"keepWithin past the archiver's range", func(a *WorldPruneArgs) { a.Retention.KeepWithin = pulumi.String("200000d") }, false},
		{"keepWithin at the archiver's range", func(a *WorldPruneArgs) { a.Retention.KeepWithin = pulumi.String("100000d") }, true},
		// The archiver takes Go durations after the days; the component refused seconds and fractions.
		{"keepWithin in seconds", func(a *WorldPruneArgs) { a.Retention.KeepWithin = pulumi.String("90s") }, true},
		{"keepWithin as a fraction", func(a *WorldPruneArgs) { a.Retention.KeepWithin = pulumi.String("1.5h") }, true},
		{"grace as a fraction", func(a *WorldPruneArgs) { a.Retention.Grace = pulumi.String("1.5h") }, true},
		{"grace past the archiver's range", func(a *WorldPruneArgs) { a.Retention.Grace = pulumi.String("200000w") }, false},
		{"keepWithin not a duration", func(a *WorldPruneArgs) { a.Retention.KeepWithin = pulumi.String("3 days") }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := validPrune()
			tc.modify(&a)
			if err := a.Validate(); (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok %v (the archiver's parser: %v)", err, tc.ok,
					firstErr(jobapi.ParseDuration(str(a.Retention.KeepWithin)+str(a.Retention.Grace))))
			}
		})
	}
	// The archiver records a former owner of up to 256 bytes; the component
	// refused more than 253.
	for _, n := range []int{jobapi.MaxFormerOwnerLen, jobapi.MaxFormerOwnerLen + 1} {
		a := validArgs()
		a.FormerOwner = pulumi.String(strings.Repeat("o", n))
		if err := a.Validate(); (err == nil) != (n <= jobapi.MaxFormerOwnerLen) {
			t.Errorf("formerOwner of %d bytes: Validate() = %v, want ok %v", n, err, n <= jobapi.MaxFormerOwnerLen)
		}
	}
}

func firstErr[T any](_ T, err error) error { return err }
