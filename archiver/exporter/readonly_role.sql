-- The exporter's read-only role (archiver metrics): it reads four tables and
-- writes nothing. Run as the catalog's owner, with your own password and,
-- for a database not named felis, its name; then give the exporter a
-- felis.toml whose [database] url logs in as worldbackup_metrics.
CREATE ROLE worldbackup_metrics LOGIN PASSWORD 'change-me';
ALTER ROLE worldbackup_metrics SET default_transaction_read_only = on;
GRANT CONNECT ON DATABASE felis TO worldbackup_metrics;
GRANT USAGE ON SCHEMA public TO worldbackup_metrics;
GRANT SELECT ON world_backups, world_backup_failures, world_prunes, world_retired_servers TO worldbackup_metrics;
