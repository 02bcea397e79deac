// A program as the SDK takes it with plain values only: both components, the
// restore's inputs written out by hand. Compiles with every schema so far.
import * as worldbackup from "@worldbackup/pulumi-worldbackup";

const backup = new worldbackup.WorldBackup("backup", {
    server: "survival",
    runId: "2025-06-01T0300Z",
    image: "registry.example/worldbackup/archiver:v1",
    backupClaimName: "world-backups",
    deadline: "45m",
    labels: { team: "games" },
});

const restore = new worldbackup.WorldRestore("restore", {
    server: "survival",
    runId: "restore-2025-06-01",
    archiveRef: "/backups/survival/2025-06-01T0300Z.tar.zst",
    sha256: "0".repeat(64),
    image: "registry.example/worldbackup/archiver:v1",
    backupClaimName: "world-backups",
});

export const archiveRef = backup.archiveRef;
export const restoreJob = restore.jobName;
