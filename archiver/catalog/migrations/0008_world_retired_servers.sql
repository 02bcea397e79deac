-- Servers retired from `archiver status` and the exporter (`archiver retire`):
-- a server that left the fleet keeps its rows (list and prune still work on
-- them) but is no longer judged stale. A retirement holds while the server
-- records nothing newer than the rows it saw: last_run_id and last_failure_id
-- are the highest ids of the server's world_backups and world_backup_failures
-- rows when it was retired (0: none), so a later run or failed attempt (a
-- schedule still running, a server that came back) brings it back without
-- comparing clocks.
CREATE TABLE world_retired_servers (
    server          text        PRIMARY KEY CHECK (server ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'),
    retired_at      timestamptz NOT NULL DEFAULT now(),
    last_run_id     bigint      NOT NULL CHECK (last_run_id >= 0),
    last_failure_id bigint      NOT NULL CHECK (last_failure_id >= 0)
);
