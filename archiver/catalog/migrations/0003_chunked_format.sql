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

-- The packs of the chunked store and the runs that reference them, so a
-- prune removes the packs no run needs without locking the store.
-- A backup registers each pack before writing it (last_used = now()), and
-- its row's transaction sets last_used = now() on every pack the run
-- references where condemned_at IS NULL, failing unless each one is there:
-- a prune condemns only packs no run references and unused for the grace
-- period, so the two never both succeed on one pack (the UPDATEs' row
-- locks order them, and the later one re-checks the row the earlier wrote).
CREATE TABLE chunked_packs (
    pack_id      text        PRIMARY KEY CHECK (pack_id ~ '^[0-9a-f]{64}$'),
    last_used    timestamptz NOT NULL DEFAULT now(),
    condemned_at timestamptz NULL
);
CREATE INDEX chunked_packs_last_used ON chunked_packs (last_used) WHERE condemned_at IS NULL;

CREATE TABLE chunked_run_packs (
    run_id  text NOT NULL REFERENCES world_backups (run_id) ON DELETE CASCADE,
    pack_id text NOT NULL REFERENCES chunked_packs (pack_id),
    PRIMARY KEY (run_id, pack_id)
);
CREATE INDEX chunked_run_packs_pack_id ON chunked_run_packs (pack_id);
