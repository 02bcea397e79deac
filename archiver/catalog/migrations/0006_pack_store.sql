-- The store each pack was registered for (store.PacksRef: its pack folder's
-- ref, such as s3://bucket/prefix/chunked/packs). Several stores may share
-- the catalog; a prune of one asks its store whether it holds a pack only
-- for the packs registered for it, or for no store (NULL: registered before
-- this column), and takes any other pack only past the horizon, as before.
-- It saves a prune of one bucket a HEAD per pack another bucket freed.
ALTER TABLE chunked_packs ADD COLUMN store_ref text NULL;
