-- One row per finished backup run; run_id is the idempotency key.
CREATE TABLE world_backups (
    id           bigserial   PRIMARY KEY,
    run_id       text        NOT NULL UNIQUE CHECK (run_id ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$'),
    server       text        NOT NULL CHECK (server ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'),
    former_owner text        NULL,
    archive_ref  text        NOT NULL CHECK (archive_ref LIKE '/%'),
    size_bytes   bigint      NOT NULL CHECK (size_bytes >= 0),
    sha256       text        NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    compression  text        NOT NULL CHECK (compression IN ('zstd', 'gzip', 'none')),
    file_count   bigint      NOT NULL CHECK (file_count >= 0),
    started_at   timestamptz NOT NULL,
    finished_at  timestamptz NOT NULL CONSTRAINT world_backups_finished_at_check CHECK (finished_at >= started_at),
    created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX world_backups_server_finished_at ON world_backups (server, finished_at);
