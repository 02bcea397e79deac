// A program as Pulumi users compose components: the inputs come from config,
// from other resources and from the backup's own outputs, so they are
// Outputs, not strings. Both components must take them (issue 13).
import * as pulumi from "@pulumi/pulumi";
import * as worldbackup from "@worldbackup/pulumi-worldbackup";

// Another resource of the program whose outputs name what the Jobs use, as a
// PersistentVolumeClaim or Namespace of @pulumi/kubernetes would.
class Storage extends pulumi.ComponentResource {
    public readonly claimName: pulumi.Output<string>;
    public readonly namespace: pulumi.Output<string>;

    constructor(name: string, opts?: pulumi.ComponentResourceOptions) {
        super("example:index:Storage", name, {}, opts);
        this.claimName = pulumi.output(`${name}-backups`);
        this.namespace = pulumi.output("minecraft");
        this.registerOutputs({ claimName: this.claimName, namespace: this.namespace });
    }
}

const config = new pulumi.Config();
const storage = new Storage("world");
const image: pulumi.Output<string> = pulumi.output("registry.example/worldbackup/archiver:v1");
const runId: pulumi.Output<string> = pulumi.interpolate`nightly-${config.require("date")}`;

const backup = new worldbackup.WorldBackup("backup", {
    server: "survival",
    runId: runId,
    image: image,
    namespace: storage.namespace,
    backupClaimName: storage.claimName,
    configSecretName: pulumi.output("felis-config"),
    deadline: pulumi.output("45m"),
    cpuLimit: pulumi.output("2"),
    memoryLimit: pulumi.output("1Gi"),
    labels: pulumi.output({ team: "games" }),
    nodeSelector: pulumi.output({ "kubernetes.io/hostname": "node-1" }),
});

// The restore is declared from the backup's outputs: the archive it wrote,
// in the namespace and claim it used; the checksum is a secret Output.
const restore = new worldbackup.WorldRestore("restore", {
    server: "survival",
    runId: pulumi.interpolate`restore-${backup.runId}`,
    archiveRef: backup.archiveRef,
    sha256: config.requireSecret("sha256"),
    image: image,
    namespace: backup.namespace,
    backupClaimName: storage.claimName,
    serviceAccountName: pulumi.output("felis-restore"),
    deadline: pulumi.output("30m"),
});

// A restore declared from the backup's outputs alone: the archive and the
// checksum its run reported.
const again = new worldbackup.WorldRestore("restore-from-outputs", {
    server: "survival",
    runId: pulumi.interpolate`again-${backup.runId}`,
    archiveRef: backup.archiveRef,
    sha256: backup.sha256,
    image: image,
    backupClaimName: storage.claimName,
});

export const archiveRef: pulumi.Output<string> = backup.archiveRef;
export const restoreJob: pulumi.Output<string> = restore.jobName;
export const archiveSize: pulumi.Output<number> = backup.sizeBytes;
export const backupStatus: pulumi.Output<string> = backup.status;
export const restoreStatus: pulumi.Output<string> = again.status;
