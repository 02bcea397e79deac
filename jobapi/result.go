package jobapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Status is the outcome a Job reports in its termination message.
type Status string

// The statuses of every kind.
const (
	// backup
	StatusDone            Status = "done"             // archived and recorded now (prune: pruned)
	StatusAlreadyRecorded Status = "already-recorded" // the run ID had a row: nothing written
	StatusFailed          Status = "failed"           // backup and prune
	// restore
	StatusRestored        Status = "restored"
	StatusAlreadyRestored Status = "already-restored" // the world holds this run's marker
	// verify: the archive verified and the world it holds passed the checks
	// (a problem: StatusFailed)
	StatusVerified Status = "verified"
)

// BackupRun describes one backup run.
type BackupRun struct {
	Status          Status  `json:"status"`
	Server          string  `json:"server"`
	RunID           string  `json:"run_id"`
	ArchiveRef      string  `json:"archive_ref,omitempty"`
	SizeBytes       int64   `json:"size_bytes,omitempty"`
	SHA256          string  `json:"sha256,omitempty"`
	Compression     string  `json:"compression,omitempty"`
	Format          string  `json:"format,omitempty"`      // tar or chunked
	AddedBytes      int64   `json:"added_bytes,omitempty"` // what the run added to the store
	FileCount       int64   `json:"file_count,omitempty"`
	InputBytes      int64   `json:"input_bytes,omitempty"`
	Warnings        int64   `json:"warnings,omitempty"`
	DurationSeconds float64 `json:"duration_seconds"`
	MBPerSecond     float64 `json:"mb_per_s,omitempty"`
	Error           string  `json:"error,omitempty"`
}

// BackupResult is the termination message of a backup: the run and, when
// a retention policy was given, what the prune after it did.
type BackupResult struct {
	BackupRun
	Prune *PruneResult `json:"prune,omitempty"`
}

// PruneResult is the termination message of a prune.
type PruneResult struct {
	Status       Status `json:"status"` // done or failed
	Server       string `json:"server"`
	DryRun       bool   `json:"dry_run,omitempty"`
	RowsDeleted  int    `json:"rows_deleted"`
	FilesRemoved int    `json:"files_removed"`
	BytesFreed   int64  `json:"bytes_freed"`
	FilesMissing int    `json:"files_missing"` // deleted rows whose archive was already gone
	// ArchivesMissing counts the rows kept because the store does not
	// hold their archives (nothing to restore from them).
	ArchivesMissing int    `json:"archives_missing,omitempty"`
	Error           string `json:"error,omitempty"`
}

// RestoreResult is the termination message of a restore that succeeded (a
// failed one writes none: the pod's message is then the log's tail).
type RestoreResult struct {
	Status Status `json:"status"` // restored | already-restored
	RunID  string `json:"run_id,omitempty"`
	// ArchiveRef and SHA256 are the archive the world holds: the one
	// restored now, or (already-restored) the one this run restored
	// before, which a re-created Job may name another (ArchiveRef is ""
	// when the world's marker, of an older archiver, does not say).
	ArchiveRef string `json:"archive_ref"`
	SHA256     string `json:"sha256"`
	SizeBytes  int64  `json:"size_bytes,omitempty"`
	WorldState string `json:"world_state"`
}

// VerifyResult is the termination message of a verify Job: what it
// checked and, when it failed, the first problem (a world check's, naming
// the file and chunk) or the error that stopped it.
type VerifyResult struct {
	Status        Status `json:"status"`           // verified | failed
	RunID         string `json:"run_id,omitempty"` // the verified run, from the archive's name
	ArchiveRef    string `json:"archive_ref"`
	SHA256        string `json:"sha256"`
	ChunksChecked int64  `json:"chunks_checked"`
	Chunks        int64  `json:"chunks"` // in the location tables
	Regions       int    `json:"regions"`
	ProblemsTotal int    `json:"problems_total"`
	Problem       string `json:"problem,omitempty"` // the first problem
	Error         string `json:"error,omitempty"`   // the archive was refused or the check could not run
}

// Summary is what the components read from any kind's termination
// message: the fields they expose as outputs.
type Summary struct {
	Status     Status `json:"status"`
	RunID      string `json:"run_id"`
	ArchiveRef string `json:"archive_ref"`
	SHA256     string `json:"sha256"`
	SizeBytes  int64  `json:"size_bytes"`
	Error      string `json:"error"`
	// verify
	ChunksChecked int64  `json:"chunks_checked"`
	ProblemsTotal int    `json:"problems_total"`
	Problem       string `json:"problem"`
}

// ParseSummary decodes a termination message: one JSON object, possibly
// followed by a newline. Unknown fields are ignored (a result reports more
// than the components expose).
func ParseSummary(msg string) (Summary, error) {
	msg = strings.TrimSpace(msg)
	if msg == "" {
		return Summary{}, errors.New("the termination message is empty")
	}
	var s Summary
	if err := json.Unmarshal([]byte(msg), &s); err != nil {
		return Summary{}, fmt.Errorf("the termination message is not the archiver's JSON summary: %w", err)
	}
	if s.Status == "" {
		return Summary{}, errors.New("the termination message has no status")
	}
	return s, nil
}
