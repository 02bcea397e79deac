package observe

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

const ns, jobName = "minecraft", "lobby-backup-abc"

func job(uid string, conds ...batchv1.JobConditionType) *batchv1.Job {
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: jobName, Namespace: ns, UID: types.UID(uid)},
		Spec: batchv1.JobSpec{
			ActiveDeadlineSeconds: new(int64(1800)),
			Selector:              &metav1.LabelSelector{MatchLabels: map[string]string{"controller-uid": uid}},
		},
	}
	for _, c := range conds {
		j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: c, Status: corev1.ConditionTrue})
	}
	return j
}

func jobPod(uid string, p corev1.Pod) *corev1.Pod {
	p.Namespace = ns
	p.Labels = map[string]string{"controller-uid": uid}
	return &p
}

func deadline(t *testing.T, c *fake.Clientset) int64 {
	t.Helper()
	j, err := c.BatchV1().Jobs(ns).Get(t.Context(), jobName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return *j.Spec.ActiveDeadlineSeconds
}

func TestWatchdogStep(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	running := waitingPod("r", "", "")
	running.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	mounting := creatingPod("m")
	mountEvent := warning("m", "FailedMount", mountFailed, 1)
	refusal := warning("j1", "FailedCreate", psa, 1)
	quotaInUse := warning("j1", "FailedCreate", quotaFilled, 1)
	tests := []struct {
		name       string
		objs       []runtime.Object
		after      time.Duration // the second look; 0: DefaultGrace.Container
		done       bool          // after the second look
		failed     bool
		mentioning []string
	}{
		{
			name:       "a pod whose volume cannot be mounted fails the Job after its grace",
			objs:       []runtime.Object{job("j1"), jobPod("j1", mounting), &mountEvent},
			after:      DefaultGrace.Creating,
			done:       true,
			failed:     true,
			mentioning: []string{ns + "/" + jobName, "pod p-m", "FailedMount", "hostPath type check failed", "cannot run"},
		},
		{
			name:  "a pod whose volume cannot be mounted is left alone within its grace",
			objs:  []runtime.Object{job("j1"), jobPod("j1", mounting), &mountEvent},
			after: DefaultGrace.Creating - time.Second,
		},
		{
			name:       "a Job whose pods are refused fails after its grace",
			objs:       []runtime.Object{job("j1"), &refusal},
			after:      DefaultGrace.Refused,
			done:       true,
			failed:     true,
			mentioning: []string{ns + "/" + jobName, "no pod can be created", "FailedCreate", `violates PodSecurity "restricted:latest"`},
		},
		{
			name:  "a Job whose pod was created after a refusal is left alone",
			objs:  []runtime.Object{job("j1"), jobPod("j1", creatingPod("p")), &refusal},
			after: time.Hour,
		},
		{
			name:       "a pod stuck past the grace fails the Job",
			objs:       []runtime.Object{job("j1"), jobPod("j1", waitingPod("a", "ImagePullBackOff", backoffNotFound))},
			done:       true,
			failed:     true,
			mentioning: []string{ns + "/" + jobName, "ImagePullBackOff", "no-such-tag", "not found", "cannot run"},
		},
		{
			name: "a registry that answers 503 is left alone past the container grace",
			objs: []runtime.Object{job("j1"), jobPod("j1", waitingPod("a", "ImagePullBackOff", backoffUnavailable))},
		},
		{
			name:       "a registry that stays down fails the Job after its grace",
			objs:       []runtime.Object{job("j1"), jobPod("j1", waitingPod("a", "ImagePullBackOff", backoffUnavailable))},
			after:      DefaultGrace.Registry,
			done:       true,
			failed:     true,
			mentioning: []string{"ImagePullBackOff", "503 Service Unavailable"},
		},
		{
			name:  "a quota that other pods fill is left alone past the refusal grace",
			objs:  []runtime.Object{job("j1"), &quotaInUse},
			after: DefaultGrace.Quota - time.Second,
		},
		{
			name:       "a quota that other pods fill fails the Job after its grace",
			objs:       []runtime.Object{job("j1"), &quotaInUse},
			after:      DefaultGrace.Quota,
			done:       true,
			failed:     true,
			mentioning: []string{"no pod can be created", "exceeded quota"},
		},
		{
			name: "a running pod is left alone",
			objs: []runtime.Object{job("j1"), jobPod("j1", running)},
		},
		{
			name: "another Job's stuck pod is not this Job's",
			objs: []runtime.Object{job("j1"), jobPod("j0", waitingPod("a", "ErrImagePull", ""))},
		},
		{
			name: "no Job yet",
		},
		{
			name: "a Job finished before the watch is the one being replaced",
			objs: []runtime.Object{job("j1", batchv1.JobFailed), jobPod("j1", waitingPod("a", "ErrImagePull", ""))},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fake.NewClientset(tt.objs...)
			var reports []string
			w := Watchdog{Client: c, Namespace: ns, Job: jobName, Grace: DefaultGrace, Report: func(m string) { reports = append(reports, m) }}
			var tr Tracker
			done, stale, _ := w.step(t.Context(), &tr, t0, true, "")
			if done {
				t.Fatal("done at the first look")
			}
			after := tt.after
			if after == 0 {
				after = DefaultGrace.Container
			}
			done, _, _ = w.step(t.Context(), &tr, t0.Add(after), false, stale)
			if done != tt.done {
				t.Errorf("done %v, want %v", done, tt.done)
			}
			if len(tt.objs) > 0 {
				if got := deadline(t, c); (got == 1) != tt.failed {
					t.Errorf("activeDeadlineSeconds %d; want the Job failed: %v", got, tt.failed)
				}
			}
			all := strings.Join(reports, "\n")
			if !tt.failed && all != "" {
				t.Errorf("reported %q for a Job it left alone", all)
			}
			for _, m := range tt.mentioning {
				if !strings.Contains(all, m) {
					t.Errorf("report %q does not mention %q", all, m)
				}
			}
		})
	}

	t.Run("the replacing Job is watched, and ends the watch when it finishes", func(t *testing.T) {
		c := fake.NewClientset(job("old", batchv1.JobFailed))
		w := Watchdog{Client: c, Namespace: ns, Job: jobName, Grace: DefaultGrace, Report: func(m string) { t.Errorf("reported %q", m) }}
		var tr Tracker
		_, stale, _ := w.step(t.Context(), &tr, t0, true, "")
		if stale != "old" {
			t.Fatalf("stale %q, want old", stale)
		}
		if err := c.BatchV1().Jobs(ns).Delete(t.Context(), jobName, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.BatchV1().Jobs(ns).Create(t.Context(), job("new", batchv1.JobComplete), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if done, _, _ := w.step(t.Context(), &tr, t0.Add(time.Second), false, stale); !done {
			t.Error("the new Job completed but the watch goes on")
		}
	})
}

func TestWatchdogEventsForbidden(t *testing.T) {
	c := fake.NewClientset(job("j1"), jobPod("j1", creatingPod("m")))
	c.PrependReactor("list", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("events"), "", errors.New("RBAC: no list on events"))
	})
	var warnings []string
	w := Watchdog{Client: c, Namespace: ns, Job: jobName, Grace: DefaultGrace, warned: new(sync.Once),
		Report: func(m string) { t.Errorf("reported %q", m) }, Warn: func(m string) { warnings = append(warnings, m) }}
	var tr Tracker
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 3 {
		w.step(t.Context(), &tr, t0.Add(time.Duration(i)*time.Hour), i == 0, "")
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "list on events") || !strings.Contains(warnings[0], ns+"/"+jobName) {
		t.Errorf("warnings %q, want one saying the events cannot be read and what to grant", warnings)
	}
	if got := deadline(t, c); got == 1 {
		t.Error("the Job was failed without a cause")
	}
}

func TestWatchdogRunStopsWithContext(t *testing.T) {
	c := fake.NewClientset(job("j1"))
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan struct{})
	go func() {
		Watchdog{Client: c, Namespace: ns, Job: jobName, Grace: DefaultGrace, Interval: time.Millisecond, Report: func(string) {}}.Run(ctx)
		close(stopped)
	}()
	cancel()
	<-stopped
}

func TestResult(t *testing.T) {
	summary := `{"status":"done","run_id":"r1","archive_ref":"/backups/lobby/r1.tar.zst","size_bytes":42,"sha256":"` + strings.Repeat("0f", 32) + `"}` + "\n"
	terminated := func(uid string, code int32, msg string) *corev1.Pod {
		p := waitingPod(uid, "", "")
		p.Status.Phase = corev1.PodSucceeded
		p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: msg}}
		return jobPod("j1", p)
	}
	tests := []struct {
		name    string
		objs    []runtime.Object
		want    Summary
		wantErr string
		noRes   bool
	}{
		{
			name: "the succeeded pod's summary",
			objs: []runtime.Object{job("j1", batchv1.JobComplete), terminated("a", 0, summary)},
			want: Summary{Status: "done", RunID: "r1", ArchiveRef: "/backups/lobby/r1.tar.zst", SizeBytes: 42, SHA256: strings.Repeat("0f", 32)},
		},
		{
			name: "a failed retry is skipped",
			objs: []runtime.Object{job("j1", batchv1.JobComplete), terminated("a", 1, "connecting to database"), terminated("b", 0, summary)},
			want: Summary{Status: "done", RunID: "r1", ArchiveRef: "/backups/lobby/r1.tar.zst", SizeBytes: 42, SHA256: strings.Repeat("0f", 32)},
		},
		{name: "the Job is gone", wantErr: "the Job is gone", noRes: true},
		{name: "no succeeded pod", objs: []runtime.Object{job("j1", batchv1.JobComplete)}, wantErr: "no succeeded pod", noRes: true},
		{name: "no summary", objs: []runtime.Object{job("j1", batchv1.JobComplete), terminated("a", 0, "")}, wantErr: "pod p-a: the termination message is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Result(t.Context(), fake.NewClientset(tt.objs...), ns, jobName)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || errors.Is(err, ErrNoResult) != tt.noRes {
					t.Fatalf("Result error %v, want one mentioning %q (ErrNoResult: %v)", err, tt.wantErr, tt.noRes)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Result = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// TestArchiverDone: ArchiverDone returns once a pod of exactly this Job has
// ended its archiver with exit code 0, whether before it looks or while it
// watches; a failed try, a running pod or an earlier Job's succeeded pod
// (another UID) is not the end, and it waits until its context ends.
func TestArchiverDone(t *testing.T) {
	ended := func(podUID, jobUID string, code int32) *corev1.Pod {
		p := waitingPod(podUID, "", "")
		p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}
		return jobPod(jobUID, p)
	}
	running := func(podUID string) *corev1.Pod {
		p := waitingPod(podUID, "", "")
		p.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
		return jobPod("j1", p)
	}
	tests := []struct {
		name  string
		objs  []runtime.Object
		later *corev1.Pod // created while it watches
		done  bool
	}{
		{name: "ended before it looks", objs: []runtime.Object{job("j1"), ended("a", "j1", 0)}, done: true},
		{name: "ends while it watches", objs: []runtime.Object{job("j1"), running("a")}, later: ended("b", "j1", 0), done: true},
		{name: "a failed try", objs: []runtime.Object{job("j1"), ended("a", "j1", 1)}},
		{name: "still running", objs: []runtime.Object{job("j1"), running("a")}},
		{name: "an earlier Job's pod", objs: []runtime.Object{job("j1"), ended("a", "j0", 0)}, later: ended("b", "j0", 0)},
		{name: "no Job yet", objs: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := watchFor(t, fake.NewClientset(tt.objs...), tt.later, func(ctx context.Context, c *fake.Clientset) error {
				return ArchiverDone(ctx, c, ns, jobName, 20*time.Millisecond)
			})
			if tt.done && err != nil {
				t.Fatalf("ArchiverDone = %v, want nil (the archiver succeeded)", err)
			}
			if !tt.done && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("ArchiverDone = %v, want the context's deadline (the archiver has not succeeded)", err)
			}
		})
	}
}

// TestArchiverStarted: ArchiverStarted returns once a pod of exactly this
// Job has its archiver running or ended, whether before it looks or while
// it watches; a pod still waiting to start, or an earlier Job's running
// pod, is not, and it waits until its context ends.
func TestArchiverStarted(t *testing.T) {
	pod := func(podUID, jobUID string, state corev1.ContainerState) *corev1.Pod {
		p := waitingPod(podUID, "ContainerCreating", "")
		if state != (corev1.ContainerState{}) {
			p.Status.ContainerStatuses[0].State = state
		}
		return jobPod(jobUID, p)
	}
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	ended := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}
	tests := []struct {
		name  string
		objs  []runtime.Object
		later *corev1.Pod // created while it watches
		done  bool
	}{
		{name: "running before it looks", objs: []runtime.Object{job("j1"), pod("a", "j1", running)}, done: true},
		{name: "already ended", objs: []runtime.Object{job("j1"), pod("a", "j1", ended)}, done: true},
		{name: "starts while it watches", objs: []runtime.Object{job("j1"), pod("a", "j1", corev1.ContainerState{})}, later: pod("b", "j1", running), done: true},
		{name: "still creating", objs: []runtime.Object{job("j1"), pod("a", "j1", corev1.ContainerState{})}},
		{name: "an earlier Job's pod", objs: []runtime.Object{job("j1"), pod("a", "j0", running)}, later: pod("b", "j0", running)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := watchFor(t, fake.NewClientset(tt.objs...), tt.later, func(ctx context.Context, c *fake.Clientset) error {
				return ArchiverStarted(ctx, c, ns, jobName, 20*time.Millisecond)
			})
			if tt.done && err != nil {
				t.Fatalf("ArchiverStarted = %v, want nil (the archiver started)", err)
			}
			if !tt.done && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("ArchiverStarted = %v, want the context's deadline", err)
			}
		})
	}
}

// watchFor runs f on c with a context of 300 ms, creating the pod later
// (when set) 50 ms in, as if while f watches, and returns f's error.
func watchFor(t *testing.T, c *fake.Clientset, later *corev1.Pod, f func(context.Context, *fake.Clientset) error) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if later != nil {
		go func() {
			time.Sleep(50 * time.Millisecond)
			if _, err := c.CoreV1().Pods(ns).Create(context.Background(), later, metav1.CreateOptions{}); err != nil {
				t.Error(err)
			}
		}()
	}
	return f(ctx, c)
}

// TestWatchdogTimeoutStartsWithTheJob: in a large `pulumi up` the engine
// creates a Job long after its component (and its watchdog) was built. A
// Job created later than Timeout after Run started is still watched, and
// its stuck pod failed; the watch then ends Timeout after the Job was
// first seen.
func TestWatchdogTimeoutStartsWithTheJob(t *testing.T) {
	c := fake.NewClientset()
	var reports []string
	var mu sync.Mutex
	stopped := make(chan struct{})
	const timeout = 50 * time.Millisecond
	go func() {
		Watchdog{Client: c, Namespace: ns, Job: jobName, Grace: Grace{}, Interval: time.Millisecond, Timeout: timeout,
			Report: func(m string) { mu.Lock(); reports = append(reports, m); mu.Unlock() }}.Run(t.Context())
		close(stopped)
	}()
	time.Sleep(4 * timeout) // the engine is busy with other Jobs
	select {
	case <-stopped:
		t.Fatal("the watchdog stopped before its Job was created")
	default:
	}
	for _, o := range []runtime.Object{job("j1"), jobPod("j1", waitingPod("a", "ImagePullBackOff", "Back-off pulling image"))} {
		var err error
		switch o := o.(type) {
		case *batchv1.Job:
			_, err = c.BatchV1().Jobs(ns).Create(t.Context(), o, metav1.CreateOptions{})
		case *corev1.Pod:
			_, err = c.CoreV1().Pods(ns).Create(t.Context(), o, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the watchdog did not stop after its Job was failed")
	}
	mu.Lock()
	defer mu.Unlock()
	if got := deadline(t, c); got != 1 || len(reports) == 0 || !strings.Contains(reports[0], "ImagePullBackOff") {
		t.Errorf("deadline %d, reports %q; want the Job created late failed for its stuck pod", got, reports)
	}
}

// TestNextWait: while its Job is not there a watchdog looks less and less
// often, down to one look every absentBackoff intervals (a fleet's
// watchdogs would otherwise ask the API server for Jobs the engine has not
// created yet every interval each), and every interval again once the Job
// is there.
func TestNextWait(t *testing.T) {
	const iv = 5 * time.Second
	tests := []struct {
		name string
		wait time.Duration
		live bool
		want time.Duration
	}{
		{"absent after the first look", iv, false, 2 * iv},
		{"absent, doubling", 2 * iv, false, 4 * iv},
		{"absent, at the bound", absentBackoff * iv, false, absentBackoff * iv},
		{"there after backing off", absentBackoff * iv, true, iv},
		{"there", iv, true, iv},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := nextWait(tt.wait, iv, tt.live); got != tt.want {
				t.Errorf("nextWait(%v, %v, %v) = %v, want %v", tt.wait, iv, tt.live, got, tt.want)
			}
		})
	}
	// Looks until a Job is there, as Run makes them: at 0, 10 s, then every
	// 20 s: 16 looks in five minutes rather than 60.
	var looks int
	for at, wait := time.Duration(0), iv; at < 5*time.Minute; at += wait {
		looks++
		wait = nextWait(wait, iv, false)
	}
	if looks > 20 {
		t.Errorf("%d looks in five minutes without a Job, want at most 20", looks)
	}
}
