"""One backup run of a Minecraft world, quiesced over RCON and followed by a
prune, and a restore declared from that backup's outputs: the Python form of
examples/typescript (see README.md). sdk/sdk_test.go type-checks this file
against the generated SDK with pyright in strict mode."""

import pulumi
import pulumi_worldbackup as worldbackup

config = pulumi.Config()
server = config.get("server") or "survival"
image = config.require("image")
backup_claim_name = config.get("backupClaim") or "world-backups"
# Empty: the kubeconfig's current context.
kube_context = config.get("kubeContext") or None

backup = worldbackup.WorldBackup(
    "backup",
    worldbackup.WorldBackupArgs(
        server=server,
        run_id=config.get("runId") or "initial",
        image=image,
        backup_claim_name=backup_claim_name,
        kube_context=kube_context,
        deadline="45m",
        format=worldbackup.Format.CHUNKED,
        excludes=["*.jar", "cache/", "logs/"],
        labels={"team": "games"},
        # The nested inputs are the schema's types Rcon and Retention (module
        # index): RconArgs and RetentionArgs at the package's top level.
        rcon=worldbackup.RconArgs(chart_release=server),
        retention=worldbackup.RetentionArgs(keep_daily=7, keep_weekly=4, min_keep=3),
    ),
)

# Not run by `pulumi up` until its run ID is set: a restore replaces the world.
# It takes the archive and checksum the backup reported; its Job waits for the
# backup's. It restores once per restoreRunId: the backup's next run gives it a
# new archive, which replaces its Job, but the new Job finds the world's marker
# for this run ID and does nothing. Set a new restoreRunId to restore the
# newest backup.
restore_run_id = config.get("restoreRunId")
if restore_run_id:
    restore = worldbackup.WorldRestore(
        "restore",
        worldbackup.WorldRestoreArgs(
            server=server,
            run_id=restore_run_id,
            image=image,
            backup_claim_name=backup_claim_name,
            kube_context=kube_context,
            archive_ref=backup.archive_ref,
            sha256=backup.sha256,
        ),
    )
    pulumi.export("restore_job", restore.job_name)

pulumi.export("job_name", backup.job_name)
pulumi.export("archive_ref", backup.archive_ref)
pulumi.export("sha256", backup.sha256)
pulumi.export("size_bytes", backup.size_bytes)
