package observe

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func waitingPod(uid, reason, msg string) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, UID: types.UID(uid)},
		Status: corev1.PodStatus{
			Phase: corev1.PodPending,
			ContainerStatuses: []corev1.ContainerStatus{{
				Name:  ArchiverContainer,
				Image: "example.org/archiver:no-such-tag",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}},
			}},
		},
	}
}

func unschedulablePod(uid string) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, UID: types.UID(uid)},
		Status: corev1.PodStatus{
			Phase: corev1.PodPending,
			Conditions: []corev1.PodCondition{{
				Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
				Message: "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.",
			}},
		},
	}
}

func TestStuck(t *testing.T) {
	running := waitingPod("a", "", "")
	running.Status.Phase = corev1.PodRunning
	running.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	failed := waitingPod("b", "ImagePullBackOff", "")
	failed.Status.Phase = corev1.PodFailed
	deleting := waitingPod("c", "ErrImagePull", "")
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}

	tests := []struct {
		name       string
		pod        corev1.Pod
		kind       Kind
		reason     string
		mentioning []string
	}{
		{"image pull backoff", waitingPod("1", "ImagePullBackOff", `Back-off pulling image "example.org/archiver:no-such-tag"`), Container, "ImagePullBackOff", []string{"no-such-tag"}},
		{"image pull error names the image", waitingPod("2", "ErrImagePull", "not found"), Container, "ErrImagePull", []string{"image example.org/archiver:no-such-tag", "not found"}},
		{"invalid image name", waitingPod("3", "InvalidImageName", "bad"), Container, "InvalidImageName", nil},
		{"never pull", waitingPod("4", "ErrImageNeverPull", ""), Container, "ErrImageNeverPull", nil},
		{"config error", waitingPod("5", "CreateContainerConfigError", `couldn't find key felis.toml in Secret`), Container, "CreateContainerConfigError", []string{"felis.toml"}},
		{"unschedulable", unschedulablePod("6"), Unschedulable, "Unschedulable", []string{"node affinity"}},
		{"creating is not stuck", waitingPod("7", "ContainerCreating", ""), NotStuck, "", nil},
		{"pulling is not stuck", waitingPod("8", "PodInitializing", ""), NotStuck, "", nil},
		{"running", running, NotStuck, "", nil},
		{"finished", failed, NotStuck, "", nil},
		{"being deleted", deleting, NotStuck, "", nil},
		{"no status yet", corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "new"}}, NotStuck, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Stuck(&tt.pod)
			if c.Kind != tt.kind || c.Reason != tt.reason {
				t.Fatalf("Stuck = %+v, want kind %d reason %q", c, tt.kind, tt.reason)
			}
			for _, w := range append(tt.mentioning, tt.reason, tt.pod.Name) {
				if c.Kind != NotStuck && !strings.Contains(c.String(), w) {
					t.Errorf("cause %q does not mention %q", c, w)
				}
			}
		})
	}
}

func TestTracker(t *testing.T) {
	g := Grace{Container: time.Minute, Unschedulable: 5 * time.Minute}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pull := waitingPod("a", "ErrImagePull", "not found")
	backoff := waitingPod("a", "ImagePullBackOff", "back-off")
	started := waitingPod("a", "", "")
	started.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}

	type look struct {
		after time.Duration
		pods  []corev1.Pod
		due   bool
	}
	tests := []struct {
		name  string
		looks []look
	}{
		{"stuck past the grace is due", []look{
			{0, []corev1.Pod{pull}, false},
			{30 * time.Second, []corev1.Pod{backoff}, false}, // the reason alternates: still stuck since t0
			{time.Minute, []corev1.Pod{pull}, true},
		}},
		{"a pod that starts is forgotten", []look{
			{0, []corev1.Pod{pull}, false},
			{50 * time.Second, []corev1.Pod{started}, false},
			{70 * time.Second, []corev1.Pod{pull}, false},
			{2 * time.Minute, []corev1.Pod{pull}, false},
			{130 * time.Second, []corev1.Pod{pull}, true},
		}},
		{"a replaced pod starts its own clock", []look{
			{0, []corev1.Pod{pull}, false},
			{50 * time.Second, []corev1.Pod{waitingPod("b", "ErrImagePull", "")}, false},
			{100 * time.Second, []corev1.Pod{waitingPod("b", "ErrImagePull", "")}, false},
			{110 * time.Second, []corev1.Pod{waitingPod("b", "ErrImagePull", "")}, true},
		}},
		{"unschedulable gets the longer grace", []look{
			{0, []corev1.Pod{unschedulablePod("u")}, false},
			{2 * time.Minute, []corev1.Pod{unschedulablePod("u")}, false},
			{5 * time.Minute, []corev1.Pod{unschedulablePod("u")}, true},
		}},
		{"no pods", []look{{0, nil, false}, {time.Hour, nil, false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tr Tracker
			for i, l := range tt.looks {
				c, due := tr.Observe(l.pods, t0.Add(l.after), g)
				if due != l.due {
					t.Fatalf("look %d (+%s): due %v (%v), want %v", i, l.after, due, c, l.due)
				}
			}
		})
	}
}

func TestParseSummary(t *testing.T) {
	tests := []struct {
		name    string
		msg     string
		want    Summary
		wantErr string
	}{
		{
			name: "backup done",
			msg: `{"status":"done","server":"lobby","run_id":"node-lobby-r1","archive_ref":"/backups/lobby/node-lobby-r1.tar.zst",` +
				`"size_bytes":1234,"sha256":"` + strings.Repeat("ab", 32) + `","compression":"zstd","file_count":3,"duration_seconds":0.5}` + "\n",
			want: Summary{Status: "done", RunID: "node-lobby-r1", ArchiveRef: "/backups/lobby/node-lobby-r1.tar.zst", SHA256: strings.Repeat("ab", 32), SizeBytes: 1234},
		},
		{
			name: "already recorded with a prune",
			msg:  `{"status":"already-recorded","run_id":"r","sha256":"00","size_bytes":7,"duration_seconds":0,"prune":{"deleted":1}}`,
			want: Summary{Status: "already-recorded", RunID: "r", SHA256: "00", SizeBytes: 7},
		},
		{
			name: "restore",
			msg:  `{"status":"restored","run_id":"x","archive_ref":"/backups/a.tar","sha256":"11"}`,
			want: Summary{Status: "restored", RunID: "x", ArchiveRef: "/backups/a.tar", SHA256: "11"},
		},
		{name: "empty", msg: " \n", wantErr: "empty"},
		{name: "log tail", msg: "archiver backup: open felis.toml: no such file", wantErr: "not the archiver's JSON summary"},
		{name: "no status", msg: `{"run_id":"r"}`, wantErr: "no status"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSummary(tt.msg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseSummary error %v, want one mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseSummary = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}
