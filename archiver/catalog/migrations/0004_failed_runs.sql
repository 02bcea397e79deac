-- One row per failed backup attempt that reached the catalog. A failed
-- attempt is never restorable: it has no archive_ref nor sha256, and lives
-- apart from world_backups, whose run_id stays the idempotency key (a
-- failed attempt and a successful retry of the same run ID both record).
-- reason is the attempt's error, bounded and without secrets (the archiver
-- cuts and scrubs it; the CHECK is the last line).
CREATE TABLE world_backup_failures (
    id          bigserial   PRIMARY KEY,
    run_id      text        NOT NULL CHECK (run_id ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$'),
    server      text        NOT NULL CHECK (server ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'),
    started_at  timestamptz NOT NULL,
    finished_at timestamptz NOT NULL CONSTRAINT world_backup_failures_finished_at_check CHECK (finished_at >= started_at),
    reason      text        NOT NULL CONSTRAINT world_backup_failures_reason_check CHECK (octet_length(reason) BETWEEN 1 AND 1024),
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX world_backup_failures_server_finished_at ON world_backup_failures (server, finished_at);
