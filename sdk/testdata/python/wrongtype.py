"""Must NOT type-check: an int where a str input is required (the keyword
form, where every argument is optional), and a misspelled enum member."""

import pulumi_worldbackup as worldbackup

worldbackup.WorldBackup(
    "backup",
    server="survival",
    run_id=20250601,
    image="registry.example/worldbackup/archiver:v1",
    backup_claim_name="world-backups",
    compression=worldbackup.Compression.ZSTDD,
)
