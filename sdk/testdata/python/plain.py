"""A program as the SDK takes it with plain values only: both components,
the restore's inputs written out by hand. Mirrors testdata/nodejs/plain.ts."""

import pulumi
import pulumi_worldbackup as worldbackup

backup = worldbackup.WorldBackup(
    "backup",
    server="survival",
    run_id="2025-06-01T0300Z",
    image="registry.example/worldbackup/archiver:v1",
    backup_claim_name="world-backups",
    deadline="45m",
    labels={"team": "games"},
    format=worldbackup.Format.TAR,
    compression=worldbackup.Compression.ZSTD,
)

restore = worldbackup.WorldRestore(
    "restore",
    worldbackup.WorldRestoreArgs(
        server="survival",
        run_id="restore-2025-06-01",
        archive_ref="/backups/survival/2025-06-01T0300Z.tar.zst",
        sha256="0" * 64,
        image="registry.example/worldbackup/archiver:v1",
        backup_claim_name="world-backups",
        security_mode=worldbackup.SecurityMode.RESTRICTED,
    ),
)

pulumi.export("archive_ref", backup.archive_ref)
pulumi.export("restore_job", restore.job_name)
