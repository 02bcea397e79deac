package worldbackup_test

import (
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/worldbackup/worldbackup/sdk/go/worldbackup"
)

// A backup run of one server's world: a new runId is a new backup.
func ExampleNewWorldBackup() {
	pulumi.Run(func(ctx *pulumi.Context) error {
		backup, err := worldbackup.NewWorldBackup(ctx, "survival", &worldbackup.WorldBackupArgs{
			Server:          "survival",
			RunId:           pulumi.String("nightly-2026-12-01"),
			Image:           pulumi.String("ghcr.io/worldbackup/worldbackup-archiver:v0.1.0"),
			BackupClaimName: pulumi.String("world-backups"),
			SecurityMode:    worldbackup.SecurityModeRestricted,
			Rcon:            &worldbackup.RconArgs{ChartRelease: pulumi.String("survival")},
			Retention:       &worldbackup.RetentionArgs{KeepDaily: pulumi.Int(7), MinKeep: pulumi.Int(3)},
		})
		if err != nil {
			return err
		}
		ctx.Export("archiveRef", backup.ArchiveRef)
		ctx.Export("sha256", backup.SHA256)
		return nil
	})
}

// A restore from a backup's outputs: it waits for that backup, and checks
// the archive against the checksum the run reported.
func ExampleNewWorldRestore() {
	pulumi.Run(func(ctx *pulumi.Context) error {
		backup, err := worldbackup.NewWorldBackup(ctx, "survival", &worldbackup.WorldBackupArgs{
			Server:          "survival",
			RunId:           pulumi.String("before-restore"),
			Image:           pulumi.String("ghcr.io/worldbackup/worldbackup-archiver:v0.1.0"),
			BackupClaimName: pulumi.String("world-backups"),
		})
		if err != nil {
			return err
		}
		_, err = worldbackup.NewWorldRestore(ctx, "creative-from-survival", &worldbackup.WorldRestoreArgs{
			Server:          "creative",
			RunId:           pulumi.String("restore-1"),
			Image:           pulumi.String("ghcr.io/worldbackup/worldbackup-archiver:v0.1.0"),
			BackupClaimName: pulumi.String("world-backups"),
			ArchiveRef:      backup.ArchiveRef,
			Sha256:          backup.SHA256,
		})
		return err
	})
}

// Nightly backups as a CronJob, on a tainted node pool, in a second
// cluster given by its own Kubernetes provider.
func ExampleNewWorldBackupSchedule() {
	pulumi.Run(func(ctx *pulumi.Context) error {
		west, err := kubernetes.NewProvider(ctx, "west", &kubernetes.ProviderArgs{Context: pulumi.String("west")})
		if err != nil {
			return err
		}
		_, err = worldbackup.NewWorldBackupSchedule(ctx, "survival-nightly", &worldbackup.WorldBackupScheduleArgs{
			Server:          "survival",
			Image:           pulumi.String("ghcr.io/worldbackup/worldbackup-archiver:v0.1.0"),
			BackupClaimName: pulumi.String("world-backups"),
			Schedule:        "0 4 * * *",
			TimeZone:        "Europe/Berlin",
			Tolerations:     []worldbackup.TolerationArgs{{Key: "games", Operator: "Exists", Effect: "NoSchedule"}},
		}, pulumi.Provider(west))
		return err
	})
}

// A prune by a retention policy, first as a dry run.
func ExampleNewWorldPrune() {
	pulumi.Run(func(ctx *pulumi.Context) error {
		_, err := worldbackup.NewWorldPrune(ctx, "survival-prune", &worldbackup.WorldPruneArgs{
			Server:          "survival",
			RunId:           pulumi.String("prune-2026-12"),
			Image:           pulumi.String("ghcr.io/worldbackup/worldbackup-archiver:v0.1.0"),
			BackupClaimName: pulumi.String("world-backups"),
			Retention:       &worldbackup.RetentionArgs{KeepWeekly: pulumi.Int(4), MinKeep: pulumi.Int(3)},
			DryRun:          true,
			Preflight:       pulumi.BoolRef(false),
		})
		return err
	})
}

// Verify the newest backup of a server every night, down to a tenth of
// each region's chunks, in an emptyDir of 20Gi.
func ExampleNewWorldVerifySchedule() {
	pulumi.Run(func(ctx *pulumi.Context) error {
		_, err := worldbackup.NewWorldVerifySchedule(ctx, "survival-check", &worldbackup.WorldVerifyScheduleArgs{
			Server:          "survival",
			Image:           pulumi.String("ghcr.io/worldbackup/worldbackup-archiver:v0.1.0"),
			BackupClaimName: pulumi.String("world-backups"),
			ChunkSample:     pulumi.String("10%"),
			ScratchSize:     pulumi.String("20Gi"),
			Schedule:        "@daily-random",
		})
		return err
	})
}

// Verify the archive a backup of this run just wrote.
func ExampleNewWorldVerify() {
	pulumi.Run(func(ctx *pulumi.Context) error {
		backup, err := worldbackup.NewWorldBackup(ctx, "survival", &worldbackup.WorldBackupArgs{
			Server:          "survival",
			RunId:           pulumi.String("2026-12-02"),
			Image:           pulumi.String("ghcr.io/worldbackup/worldbackup-archiver:v0.1.0"),
			BackupClaimName: pulumi.String("world-backups"),
		})
		if err != nil {
			return err
		}
		_, err = worldbackup.NewWorldVerify(ctx, "survival-verify", &worldbackup.WorldVerifyArgs{
			Server:          "survival",
			RunId:           pulumi.String("2026-12-02.verify"),
			Image:           pulumi.String("ghcr.io/worldbackup/worldbackup-archiver:v0.1.0"),
			BackupClaimName: pulumi.String("world-backups"),
			ArchiveRef:      backup.ArchiveRef,
			Sha256:          backup.SHA256,
		})
		return err
	})
}
