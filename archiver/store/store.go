// Package store keeps archives: Local writes them to a folder atomically
// (temp file, fsync, rename, folder fsync), Mem keeps them in memory for
// tests. Both pass the conformance suite in store/storetest.
//
// A key is a slash path below the store's root such as
// "survival/run-42.tar.zst"; no element may start with '.', which is
// reserved for the store's temp and lock files.
package store

import (
	"errors"

	"github.com/worldbackup/worldbackup/jobapi"
)

// ErrInvalidKey is returned for keys that are not plain relative slash paths.
var ErrInvalidKey = jobapi.ErrInvalidKey

// ErrNoRoot is wrapped by the errors of a Local store whose root folder is
// missing (or not a folder).
var ErrNoRoot = errors.New("archive root is missing")

// ErrDiscarded is returned by Put when CleanTemps discarded its temporary
// data before it was committed.
var ErrDiscarded = errors.New("temporary archive was discarded before commit")

// checkKey returns an error wrapping ErrInvalidKey unless key is a valid
// key (jobapi.CheckKey, the rule of every store).
func checkKey(key string) error { return jobapi.CheckKey(key) }

// PacksRef names the store's pack folder (jobapi.PacksDir) by its Ref,
// such as s3://bucket/prefix/chunked/packs: the store a pack's catalog row
// says it was registered for (catalog.RegisterPack), so a prune of one of
// several stores sharing a catalog asks its store only about its own. Two
// stores that share the name (folder stores mounted at one path in two
// clusters) are both asked; one store named two ways (another prefix
// spelling) only waits longer for its packs to go.
func PacksRef(st interface{ Ref(key string) string }) string { return st.Ref(jobapi.PacksDir) }
