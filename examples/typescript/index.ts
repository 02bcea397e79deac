// One backup run of a Minecraft world, quiesced over RCON and followed by a
// prune, and a restore declared from that backup's outputs: the TypeScript
// form of examples/yaml (see README.md). sdk/sdk_test.go compiles this file
// against the generated SDK in strict mode.
import * as pulumi from "@pulumi/pulumi";
import * as worldbackup from "@worldbackup/pulumi-worldbackup";

const config = new pulumi.Config();
const server = config.get("server") ?? "survival";
const image = config.require("image");
const backupClaimName = config.get("backupClaim") ?? "world-backups";
// Empty: the kubeconfig's current context.
const kubeContext = config.get("kubeContext") || undefined;

// The nested inputs are the schema's types Rcon and Retention (module index):
// worldbackup.types.input.RconArgs and RetentionArgs.
const rcon: worldbackup.types.input.RconArgs = {
    chartRelease: server, // the itzg/minecraft release: Service and Secret <release>-minecraft-rcon
};
const retention: worldbackup.types.input.RetentionArgs = {
    keepDaily: 7,
    keepWeekly: 4,
    minKeep: 3,
};

const backup = new worldbackup.WorldBackup("backup", {
    server,
    runId: config.get("runId") ?? "initial",
    image,
    backupClaimName,
    kubeContext,
    deadline: "45m",
    format: worldbackup.Format.Chunked,
    excludes: ["*.jar", "cache/", "logs/"],
    labels: { team: "games" },
    rcon,
    retention,
});

// Not run by `pulumi up` until its runId is set: a restore replaces the world.
// It takes the archive and checksum the backup reported; its Job waits for
// the backup's. It restores once per restoreRunId: the backup's next run
// gives it a new archive, which replaces its Job, but the new Job finds the
// world's marker for this runId and does nothing. Set a new restoreRunId to
// restore the newest backup.
const restoreRunId = config.get("restoreRunId");
const restore = restoreRunId
    ? new worldbackup.WorldRestore("restore", {
          server,
          runId: restoreRunId,
          image,
          backupClaimName,
          kubeContext,
          archiveRef: backup.archiveRef,
          sha256: backup.sha256,
      })
    : undefined;

export const jobName = backup.jobName;
export const archiveRef = backup.archiveRef;
export const sha256 = backup.sha256;
export const sizeBytes = backup.sizeBytes;
export const restoreJob = restore?.jobName;
