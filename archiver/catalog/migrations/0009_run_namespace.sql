-- The Kubernetes namespace whose Job recorded the run (`--namespace`, which
-- the components pass). A server's runs as one namespace's Jobs see them (a
-- chunked backup's previous run, a prune's, a restore's `latest`) are that
-- namespace's and those whose namespace is NULL: recorded before this
-- migration, or by an archiver run by hand without --namespace. So two
-- servers of one name in two namespaces that share a catalog do not build
-- on, prune or restore each other's runs, and a run ID one of them recorded
-- is refused to the other instead of being taken as its own. A failed
-- attempt records it too, for `archiver list`.
ALTER TABLE world_backups ADD COLUMN namespace text NULL
    CONSTRAINT world_backups_namespace_check CHECK (namespace ~ '^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$');
ALTER TABLE world_backup_failures ADD COLUMN namespace text NULL
    CONSTRAINT world_backup_failures_namespace_check CHECK (namespace ~ '^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$');
