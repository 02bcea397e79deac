-- When a prune last found a run's archive missing from its store (a bucket
-- lifecycle rule, a volume rolled back, the wrong volume mounted): set at the
-- first prune that finds it gone, kept while it stays gone, cleared by a
-- prune that finds it again. NULL: found, or never looked for. `archiver
-- status` and the exporter do not count such a run as a fresh backup: nothing
-- can be restored from it.
ALTER TABLE world_backups ADD COLUMN missing_since timestamptz NULL;
