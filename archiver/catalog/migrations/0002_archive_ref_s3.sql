-- An archive is a file of the local store (an absolute path) or an object of
-- an S3 store (its s3://bucket/key URL).
ALTER TABLE world_backups DROP CONSTRAINT world_backups_archive_ref_check;
ALTER TABLE world_backups ADD CONSTRAINT world_backups_archive_ref_check
    CHECK (archive_ref LIKE '/%' OR archive_ref ~ '^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/.+');
