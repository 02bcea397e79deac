package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/worldbackup/worldbackup/archiver/backup"
	"github.com/worldbackup/worldbackup/jobapi"
)

// TestTerminationLogBounded shows that every summary the archiver writes
// fits Kubernetes' termination-message limit and stays valid JSON, whichever
// of its errors is long: the backup's, the prune's after a backup, or a
// prune's own.
func TestTerminationLogBounded(t *testing.T) {
	long := strings.Repeat("é\"x", 3000) // escaping makes it longer still
	tests := []struct {
		name  string
		write func(t terminationLog)
		check func(t *testing.T, b []byte)
	}{
		{
			name: "backup error",
			write: func(tl terminationLog) {
				tl.write(hclog.NewNullLogger(), jobapi.BackupResult{BackupRun: backup.Summary{Status: backup.StatusFailed, Server: "s", Error: long}})
			},
			check: func(t *testing.T, b []byte) {
				var s jobapi.BackupResult
				mustDecode(t, b, &s)
				if s.Status != backup.StatusFailed || !strings.HasSuffix(s.Error, "...") {
					t.Errorf("summary = %+v, want the failed status and a shortened error", s.BackupRun)
				}
			},
		},
		{
			name: "prune error after a backup",
			write: func(tl terminationLog) {
				tl.write(hclog.NewNullLogger(), jobapi.BackupResult{BackupRun: backup.Summary{Status: backup.StatusDone, Server: "s", RunID: "r1"},
					Prune: &jobapi.PruneResult{Status: "failed", Server: "s", Error: long}})
			},
			check: func(t *testing.T, b []byte) {
				var s jobapi.BackupResult
				mustDecode(t, b, &s)
				if s.RunID != "r1" || s.Prune == nil || !strings.HasSuffix(s.Prune.Error, "...") {
					t.Errorf("summary = %+v (prune %+v), want the run kept and the prune error shortened", s.BackupRun, s.Prune)
				}
			},
		},
		{
			name: "prune's own error",
			write: func(tl terminationLog) {
				ps := jobapi.PruneResult{Status: "failed", Server: "s", Error: long}
				tl.writeBounded(hclog.NewNullLogger(), &ps, &ps.Error)
			},
			check: func(t *testing.T, b []byte) {
				var s jobapi.PruneResult
				mustDecode(t, b, &s)
				if s.Status != "failed" || !strings.HasSuffix(s.Error, "...") {
					t.Errorf("summary = %+v, want the failed status and a shortened error", s)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "termination-log")
			tt.write(terminationLog{path: path, explicit: true})
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) > maxTerminationMessage {
				t.Fatalf("termination message is %d bytes, over Kubernetes' %d", len(b), maxTerminationMessage)
			}
			tt.check(t, b)
		})
	}
}

func mustDecode(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("termination message is not JSON (%v): %.200s", err, b)
	}
}
