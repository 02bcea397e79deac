"""Must NOT type-check: a value that may be None is no str where the Args
class requires one. Proves the harness type-checks rather than passing
anything. Mirrors testdata/nodejs/strict.ts."""

import os

import pulumi_worldbackup as worldbackup

maybe_image: str | None = os.environ.get("ARCHIVER_IMAGE")

worldbackup.WorldBackup(
    "backup",
    worldbackup.WorldBackupArgs(
        server="survival",
        run_id="2025-06-01T0300Z",
        image=maybe_image,
        backup_claim_name="world-backups",
    ),
)
