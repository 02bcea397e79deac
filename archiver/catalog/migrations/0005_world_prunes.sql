-- One row per prune that ran for real (not a dry run) and finished its
-- catalog step: what it deleted and what it freed in the store, so the
-- exporter can count prunes and the bytes they freed even after the runs
-- themselves are gone. A prune that could not record its row still pruned:
-- the row is a report, never a lock or a condition.
CREATE TABLE world_prunes (
    id           bigserial   PRIMARY KEY,
    server       text        NOT NULL CHECK (server ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'),
    started_at   timestamptz NOT NULL,
    finished_at  timestamptz NOT NULL CONSTRAINT world_prunes_finished_at_check CHECK (finished_at >= started_at),
    runs_deleted integer     NOT NULL CHECK (runs_deleted >= 0),
    bytes_freed  bigint      NOT NULL CHECK (bytes_freed >= 0),
    created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX world_prunes_server_finished_at ON world_prunes (server, finished_at);
