"""A program as Pulumi users compose components: the inputs come from
config, from other resources and from the backup's own outputs, so they are
Outputs, not strings. Both components must take them (issue 13), in both
forms the SDK offers: keyword arguments and the Args class. Mirrors
testdata/nodejs/outputs.ts."""

from typing import Optional

import pulumi
import pulumi_worldbackup as worldbackup


class Storage(pulumi.ComponentResource):
    """Another resource of the program whose outputs name what the Jobs use,
    as a PersistentVolumeClaim or Namespace of pulumi_kubernetes would."""

    claim_name: pulumi.Output[str]
    namespace: pulumi.Output[str]

    def __init__(self, name: str, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("example:index:Storage", name, None, opts)
        self.claim_name = pulumi.Output.from_input(f"{name}-backups")
        self.namespace = pulumi.Output.from_input("minecraft")
        self.register_outputs({"claim_name": self.claim_name, "namespace": self.namespace})


config = pulumi.Config()
storage = Storage("world")
image: pulumi.Output[str] = pulumi.Output.from_input("registry.example/worldbackup/archiver:v1")
run_id: pulumi.Output[str] = pulumi.Output.concat("nightly-", config.require("date"))
# The checksum is a secret Output; the restore must take it as it is.
sha256: pulumi.Output[str] = config.require_secret("sha256")

backup = worldbackup.WorldBackup(
    "backup",
    server="survival",
    run_id=run_id,
    image=image,
    namespace=storage.namespace,
    backup_claim_name=storage.claim_name,
    config_secret_name=pulumi.Output.from_input("felis-config"),
    deadline=pulumi.Output.from_input("45m"),
    cpu_limit=pulumi.Output.from_input("2"),
    memory_limit=pulumi.Output.from_input("1Gi"),
    labels=pulumi.Output.from_input({"team": "games"}),
    node_selector=pulumi.Output.from_input({"kubernetes.io/hostname": "node-1"}),
    format=pulumi.Output.from_input(worldbackup.Format.TAR),
    compression=pulumi.Output.from_input(worldbackup.Compression.GZIP),
)

# The restore is declared from the backup's outputs: the archive it wrote, in
# the namespace it used.
restore = worldbackup.WorldRestore(
    "restore",
    worldbackup.WorldRestoreArgs(
        server="survival",
        run_id=pulumi.Output.concat("restore-", backup.run_id),
        archive_ref=backup.archive_ref,
        sha256=sha256,
        image=image,
        namespace=backup.namespace,
        backup_claim_name=storage.claim_name,
        service_account_name=pulumi.Output.from_input("felis-restore"),
        deadline=pulumi.Output.from_input("30m"),
    ),
)

# A restore declared from the backup's outputs alone: the archive and the
# checksum its run reported (keyword form).
again = worldbackup.WorldRestore(
    "restore-from-outputs",
    server="survival",
    run_id=pulumi.Output.concat("again-", backup.run_id),
    archive_ref=backup.archive_ref,
    sha256=backup.sha256,
    image=image,
    backup_claim_name=storage.claim_name,
)

archive_ref: pulumi.Output[str] = backup.archive_ref
restore_job: pulumi.Output[str] = restore.job_name
archive_size: pulumi.Output[int] = backup.size_bytes
backup_status: pulumi.Output[str] = backup.status
restore_status: pulumi.Output[str] = again.status
pulumi.export("archive_ref", archive_ref)
pulumi.export("restore_job", restore_job)
pulumi.export("archive_size", archive_size)
pulumi.export("backup_status", backup_status)
pulumi.export("restore_status", restore_status)
