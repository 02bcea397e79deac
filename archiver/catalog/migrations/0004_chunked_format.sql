-- A run is a "tar" archive (one file or object) or a "chunked" run (a
-- manifest naming content-addressed blobs in pack files; archive_ref is the
-- manifest, sha256 its hash, size_bytes the length of its tar stream).
-- added_bytes is what the run added to the store (a tar run: its archive;
-- a chunked run: its new packs and its manifest); NULL for rows older than
-- this migration.
ALTER TABLE world_backups ADD COLUMN format text NOT NULL DEFAULT 'tar'
    CONSTRAINT world_backups_format_check CHECK (format IN ('tar', 'chunked'));
ALTER TABLE world_backups ADD COLUMN added_bytes bigint NULL
    CONSTRAINT world_backups_added_bytes_check CHECK (added_bytes >= 0);
CREATE INDEX world_backups_server_format_finished_at ON world_backups (server, format, finished_at);
