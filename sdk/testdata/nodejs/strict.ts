// Must NOT compile: under strict: true a value that may be undefined is no
// string. Proves the harness type-checks strictly rather than passing anything.
import * as worldbackup from "@worldbackup/pulumi-worldbackup";

const maybeImage: string | undefined = process.env.ARCHIVER_IMAGE;

new worldbackup.WorldBackup("backup", {
    server: "survival",
    runId: "2025-06-01T0300Z",
    image: maybeImage,
    backupClaimName: "world-backups",
});
