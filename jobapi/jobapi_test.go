package jobapi

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestMaxJobServerLenFitsEveryKind(t *testing.T) {
	for _, k := range Kinds() {
		if n := MaxJobServerLen + len("-"+k+"-") + JobHashLen; n > MaxLabelLen {
			t.Errorf("<server>-%s-<hash> is %d characters for a server of %d: longer than a label (%d)", k, n, MaxJobServerLen, MaxLabelLen)
		}
	}
	if MaxJobServerLen != 46 {
		t.Errorf("MaxJobServerLen = %d, want 46", MaxJobServerLen)
	}
}

func TestCheckS3EndpointErrors(t *testing.T) {
	tests := []struct {
		endpoint string
		want     error // nil: accepted; errAny: refused
	}{
		{"http://minio.storage:9000", nil},
		{"https://s3.example/", nil},
		{"minio:9000", errAny},
		{"ftp://h", errAny},
		{"http://h/path", errAny},
		{"http://h:9000?x=1", errAny},
		{"http://h:9000#f", errAny},
		{"http://AKIA:secret@minio:9000", ErrEndpointCredentials},
	}
	for _, tc := range tests {
		t.Run(tc.endpoint, func(t *testing.T) {
			err := CheckS3Endpoint(tc.endpoint)
			switch {
			case tc.want == nil && err != nil, tc.want != nil && err == nil:
				t.Fatalf("CheckEndpoint = %v, want %v", err, tc.want)
			case tc.want == ErrEndpointCredentials && !errors.Is(err, ErrEndpointCredentials):
				t.Fatalf("CheckEndpoint = %v, want ErrEndpointCredentials", err)
			case err != nil && strings.Contains(err.Error(), "secret"):
				t.Fatalf("the error %q quotes the credentials", err)
			}
		})
	}
}

var errAny = errors.New("any error")

func TestShortDuration(t *testing.T) {
	for in, want := range map[string]string{"1h0m0s": "1h", "1h30m0s": "1h30m", "30m0s": "30m", "90s": "1m30s"} {
		d, err := ParseDuration(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := ShortDuration(d); got != want {
			t.Errorf("ShortDuration(%s) = %q, want %q", in, got, want)
		}
	}
}

// TestEveryResultDecodes shows that the components' decoder reads every
// kind's termination message.
func TestEveryResultDecodes(t *testing.T) {
	tests := []struct {
		name   string
		result any
		want   Summary
	}{
		{"backup", BackupResult{BackupRun: BackupRun{Status: StatusDone, Server: "s", RunID: "r", ArchiveRef: "/b/s/r.tar.zst", SHA256: "ab", SizeBytes: 9}},
			Summary{Status: StatusDone, RunID: "r", ArchiveRef: "/b/s/r.tar.zst", SHA256: "ab", SizeBytes: 9}},
		{"backup, prune failed", BackupResult{BackupRun: BackupRun{Status: StatusAlreadyRecorded, RunID: "r"}, Prune: &PruneResult{Status: StatusFailed, Error: "x"}},
			Summary{Status: StatusAlreadyRecorded, RunID: "r"}},
		{"prune", PruneResult{Status: StatusFailed, Server: "s", Error: "no catalog"}, Summary{Status: StatusFailed, Error: "no catalog"}},
		{"restore", RestoreResult{Status: StatusAlreadyRestored, RunID: "r", ArchiveRef: "s3://b/k", SHA256: "cd", SizeBytes: 3},
			Summary{Status: StatusAlreadyRestored, RunID: "r", ArchiveRef: "s3://b/k", SHA256: "cd", SizeBytes: 3}},
		{"verify", VerifyResult{Status: StatusVerified, RunID: "r", ArchiveRef: "/b/s/r.tar.zst", SHA256: "ef", ChunksChecked: 40, Chunks: 400, Regions: 2},
			Summary{Status: StatusVerified, RunID: "r", ArchiveRef: "/b/s/r.tar.zst", SHA256: "ef", ChunksChecked: 40}},
		{"verify, a problem", VerifyResult{Status: StatusFailed, ArchiveRef: "/b/s/r.tar", ChunksChecked: 9, ProblemsTotal: 2, Problem: "world/level.dat: no DataVersion"},
			Summary{Status: StatusFailed, ArchiveRef: "/b/s/r.tar", ChunksChecked: 9, ProblemsTotal: 2, Problem: "world/level.dat: no DataVersion"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.result)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseSummary(string(b) + "\n")
			if err != nil || got != tc.want {
				t.Fatalf("ParseSummary(%s) = %+v, %v; want %+v", b, got, err, tc.want)
			}
		})
	}
}
