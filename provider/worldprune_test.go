package provider

import (
	"sync"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/worldbackup/worldbackup/provider/internal/jobtest"
	"github.com/worldbackup/worldbackup/provider/jobspec"
)

func validPrune() WorldPruneArgs {
	return WorldPruneArgs{
		JobInputs: JobInputs{
			Server:          "survival",
			RunID:           pulumi.String("prune-20250601"),
			Image:           pulumi.String("ghcr.io/worldbackup/worldbackup-archiver:v0.1.0"),
			BackupClaimName: pulumi.String("world-backups"),
		},
		Retention: &RetentionArgs{KeepDaily: pulumi.Int(7), MinKeep: pulumi.Int(3)},
	}
}

func TestWorldPruneRegistersOneJob(t *testing.T) {
	tests := []struct {
		name        string
		args        func() WorldPruneArgs
		want        func() jobspec.Prune
		wantTimeout string
	}{
		{"required inputs take the contract's defaults", validPrune, jobtest.DefaultPrune, "35m0s"},
		{"restricted dry run with a grace", func() WorldPruneArgs {
			a := validPrune()
			a.SecurityMode, a.DryRun, a.Retention.Grace = new(SecurityModeRestricted), true, pulumi.String("2h")
			return a
		}, func() jobspec.Prune {
			p := jobtest.DefaultPrune()
			p.Identity = jobspec.Identity{Mode: jobspec.Restricted, RunAsUser: 1000, RunAsGroup: 1000, FSGroup: 1000}
			p.DryRun, p.Retention.Grace = true, "2h"
			return p
		}, "35m0s"},
		{"a short grace that covers backupDeadline", func() WorldPruneArgs {
			a := validPrune()
			a.BackupDeadline, a.Retention.Grace = pulumi.String("2m"), pulumi.String("2m")
			return a
		}, func() jobspec.Prune {
			p := jobtest.DefaultPrune()
			p.Retention.Grace = "2m"
			return p
		}, "35m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got outputs
			var wg sync.WaitGroup
			m, err := runMocked(t, func(ctx *pulumi.Context) error {
				c, err := NewWorldPrune(ctx, "weekly", tt.args())
				if err != nil {
					return err
				}
				captureOutputs(&wg, &got, c.JobName, c.Namespace, c.RunID, pulumi.String("").ToStringOutput())
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			checkOneJob(t, m, WorldPruneType, "weekly", tt.wantTimeout, jobspec.BuildPrune(tt.want()))
			if got != (outputs{jobName: "survival-prune-prune-20250601", namespace: "minecraft", runID: "prune-20250601"}) {
				t.Fatalf("outputs %+v", got)
			}
		})
	}
}

func TestWorldPruneInvalidInputs(t *testing.T) {
	tests := []struct {
		name       string
		modify     func(a *WorldPruneArgs)
		wantInputs []string
		wantText   string
	}{
		{"no retention", func(a *WorldPruneArgs) { a.Retention = nil }, []string{"retention"}, "is required"},
		{"no rule", func(a *WorldPruneArgs) { a.Retention = &RetentionArgs{MinKeep: pulumi.Int(3)} }, []string{"retention"}, "no keep rule"},
		{"no floor", func(a *WorldPruneArgs) { a.Retention.MinKeep = pulumi.Int(0) }, []string{"retention.minKeep"}, "at least 1"},
		{"bad grace", func(a *WorldPruneArgs) { a.Retention.Grace = pulumi.String("0h") }, []string{"retention.grace"}, "positive"},
		{"grace shorter than a backup's default deadline", func(a *WorldPruneArgs) { a.Retention.Grace = pulumi.String("1m") },
			[]string{"retention.grace"}, `retention.grace "1m" is shorter than backupDeadline 30m: a prune could remove what a backup still running has written`},
		{"grace shorter than backupDeadline", func(a *WorldPruneArgs) {
			a.BackupDeadline, a.Retention.Grace = pulumi.String("2h"), pulumi.String("1h")
		}, []string{"retention.grace"}, "set the grace to at least 2h, or shorten backupDeadline, to the longest deadline of the backups into this store"},
		{"default grace shorter than backupDeadline", func(a *WorldPruneArgs) { a.BackupDeadline = pulumi.String("3h") },
			[]string{"retention.grace"}, "(not set: the default 1h) is shorter than backupDeadline 3h"},
		{"backupDeadline not a duration", func(a *WorldPruneArgs) { a.BackupDeadline = pulumi.String("30") }, []string{"backupDeadline"}, "has no unit"},
		{"no claim, no image", func(a *WorldPruneArgs) { a.BackupClaimName, a.Image = nil, nil }, []string{"image", "backupClaimName"}, "2 invalid inputs"},
		{"bad server", func(a *WorldPruneArgs) { a.Server = "Survival" }, []string{"server"}, "<server>-prune-<suffix>"},
		{"relative backup root", func(a *WorldPruneArgs) { a.BackupRoot = pulumi.String("backups") }, []string{"backupRoot"}, "absolute"},
		{"a world", func(a *WorldPruneArgs) { a.WorldRoot = pulumi.String("/world") }, []string{"worldRoot"}, "mounts no world"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := validPrune()
			tt.modify(&a)
			checkComponentInputError(t, a.Validate, func(ctx *pulumi.Context) error {
				_, err := NewWorldPrune(ctx, "weekly", a)
				return err
			}, tt.wantInputs, []string{tt.wantText})
		})
	}
}
