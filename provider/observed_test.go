package provider

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/worldbackup/worldbackup/jobapi"
	"github.com/worldbackup/worldbackup/provider/jobspec"
	"github.com/worldbackup/worldbackup/provider/observe"
	"github.com/worldbackup/worldbackup/provider/preflight"
)

// finishedBackup is a completed backup Job of job with its succeeded pod,
// whose termination message is msg.
func finishedBackup(job *batchv1.Job, msg string) []runtime.Object {
	j := job.DeepCopy()
	j.UID = "uid-1"
	j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"controller-uid": "uid-1"}}
	j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: j.Name + "-x", Namespace: j.Namespace, Labels: map[string]string{"controller-uid": "uid-1"}},
		Status: corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{
			Name:  observe.ArchiverContainer,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Message: msg}},
		}}},
	}
	return []runtime.Object{j, pod}
}

func TestObserveJob(t *testing.T) {
	sum := strings.Repeat("5e", 32)
	msg := `{"status":"done","server":"survival","run_id":"20250601-0300","sha256":"` + sum + `","size_bytes":4096,"duration_seconds":1}`
	type got struct {
		status, sha256 string
		size           int
		known          bool
	}
	tests := []struct {
		name      string
		dryRun    bool
		later     bool // inputs that are Outputs: the Job is built in an apply
		skipAwait bool
		preflight bool
		cluster   bool // the Job has run: it and its pod exist
		clientErr error
		want      got
		asked     bool // the client was made
	}{
		{name: "up: the run's report", preflight: true, cluster: true, asked: true,
			want: got{"done", sum, 4096, true}},
		{name: "up: a Job built later, the run's report", later: true, preflight: true, cluster: true, asked: true,
			want: got{"done", sum, 4096, true}},
		{name: "up: a Job built later, skipAwait", later: true, preflight: true, skipAwait: true, cluster: true, want: got{known: true}},
		{name: "up: the Job's pod is gone", preflight: true, asked: true, want: got{known: true}},
		{name: "up: no cluster config", preflight: true, clientErr: errors.New("no kubeconfig"), asked: true, want: got{known: true}},
		{name: "preview: the same run already reported", dryRun: true, preflight: true, cluster: true, asked: true,
			want: got{"done", sum, 4096, true}},
		{name: "preview: a new run is unknown", dryRun: true, preflight: true, asked: true, want: got{known: false}},
		{name: "skipAwait: empty, no client", preflight: true, skipAwait: true, cluster: true, want: got{known: true}},
		{name: "preflight false (render mode): empty, no client", cluster: true, want: got{known: true}},
		{name: "preview, preflight false: empty", dryRun: true, cluster: true, want: got{known: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := validArgs().resolve()
			if err != nil {
				t.Fatal(err)
			}
			job := jobspec.BuildBackup(r.Job)
			if tt.skipAwait {
				job.Annotations[jobspec.AnnotationSkipAwait] = "true"
			}
			var objs []runtime.Object
			if tt.cluster {
				objs = finishedBackup(job, msg)
			}
			asked := false
			newClient := func(preflight.Cluster) (kubernetes.Interface, error) {
				asked = true
				if tt.clientErr != nil {
					return nil, tt.clientErr
				}
				return fake.NewClientset(objs...), nil
			}
			var mu sync.Mutex
			var g got
			program := func(ctx *pulumi.Context) error {
				comp := &WorldBackup{}
				if err := ctx.RegisterComponentResource(WorldBackupType, "survival", comp); err != nil {
					return err
				}
				pl := jobPlan{Job: job, Timeout: time.Minute, Preflight: preflightSettings{Enabled: tt.preflight}}
				if tt.later {
					pl = jobPlan{Timeout: time.Minute, Later: pulumi.Any(jobResult{Job: job, Preflight: pl.Preflight})}
				}
				res, err := registerChildJob(ctx, comp, "survival-job", pl)
				if err != nil {
					return err
				}
				o := observeJob(ctx, comp, res, pl, newClient)
				pulumi.All(o.Status, o.SHA256, o.SizeBytes).ApplyT(func(v []any) error {
					mu.Lock()
					defer mu.Unlock()
					g = got{v[0].(string), v[1].(string), v[2].(int), true}
					return nil
				})
				return nil
			}
			opts := []pulumi.RunOption{pulumi.WithMocks("project", "stack", &mocks{})}
			if tt.dryRun {
				opts = append(opts, dryRun)
			}
			if err := pulumi.RunErr(program, opts...); err != nil {
				t.Fatal(err)
			}
			if g != tt.want {
				t.Errorf("outputs %+v, want %+v", g, tt.want)
			}
			if asked != tt.asked {
				t.Errorf("client made: %v, want %v", asked, tt.asked)
			}
		})
	}
}

// clusterWith is an API server that serves a Job and its pods at their
// paths, and what the preflight looks up in any namespace (readyObject);
// everything else is 404.
func clusterWith(t *testing.T, job *batchv1.Job, pods ...corev1.Pod) string {
	t.Helper()
	jobPath := "/apis/batch/v1/namespaces/" + job.Namespace + "/jobs/" + job.Name
	podsPath := "/api/v1/namespaces/" + job.Namespace + "/pods"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		var v any
		switch {
		case r.Method == http.MethodGet && r.URL.Path == jobPath:
			j := job.DeepCopy()
			j.APIVersion, j.Kind = "batch/v1", "Job"
			v = j
		case r.Method == http.MethodGet && r.URL.Path == podsPath:
			v = &corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}, Items: pods}
		case r.Method == http.MethodGet && readyObject(r.URL.Path) != nil:
			v = readyObject(r.URL.Path)
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
			return
		}
		_ = json.NewEncoder(w).Encode(v)
	}))
	t.Cleanup(srv.Close)
	return kubeconfigFor(srv.URL)
}

// TestRestoreFromBackupOutputs: a WorldRestore declared from a WorldBackup's
// outputs alone (archiveRef, sha256) restores the archive the backup run
// reported: a tar archive, or a chunked run's manifest, in the folder or
// the S3 store.
func TestRestoreFromBackupOutputs(t *testing.T) {
	tests := []struct {
		name    string
		format  Format
		s3      bool
		wantRef string
	}{
		{"tar", FormatTar, false, "/backups/survival/20250601-0300.tar.zst"},
		{"chunked", FormatChunked, false, "/backups/_chunked/runs/survival/20250601-0300.manifest"},
		{"chunked in S3", FormatChunked, true, "s3://felis-backups/worlds/_chunked/runs/survival/20250601-0300.manifest"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			backupArgs, restoreArgs := validArgs, validRestoreArgs
			if tt.s3 {
				backupArgs, restoreArgs = s3Backup, s3Restore
			}
			withFormat := func() WorldBackupArgs {
				a := backupArgs()
				a.Format = new(tt.format)
				return a
			}
			r, err := withFormat().resolve()
			if err != nil {
				t.Fatal(err)
			}
			if r.ArchiveRef != tt.wantRef {
				t.Fatalf("predicted archiveRef = %q, want %q", r.ArchiveRef, tt.wantRef)
			}
			sum := strings.Repeat("c0", 32)
			objs := finishedBackup(jobspec.BuildBackup(r.Job),
				`{"status":"done","run_id":"20250601-0300","archive_ref":"`+tt.wantRef+`","sha256":"`+sum+`","size_bytes":9,"duration_seconds":1}`)
			kc := clusterWith(t, objs[0].(*batchv1.Job), *objs[1].(*corev1.Pod))

			m, err := runMocked(t, func(ctx *pulumi.Context) error {
				ba := withFormat()
				ba.Kubeconfig = kc
				b, err := NewWorldBackup(ctx, "survival", ba)
				if err != nil {
					return err
				}
				ra := restoreArgs()
				ra.Kubeconfig = kc
				ra.ArchiveRef, ra.SHA256 = b.ArchiveRef, b.SHA256
				_, err = NewWorldRestore(ctx, "survival-restore", ra)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			jobs := m.ofType(jobType)
			if len(jobs) != 2 {
				t.Fatalf("%d Jobs registered, want the backup's and the restore's", len(jobs))
			}
			var restore pulumi.MockResourceArgs
			for _, j := range jobs {
				if j.Name == "survival-restore-job" {
					restore = j
				}
			}
			args := decodeJob(t, restore, false).Spec.Template.Spec.Containers[0].Args
			for flag, want := range map[string]string{"--archive": tt.wantRef, "--sha256": sum} {
				if i := slices.Index(args, flag); i < 0 || i+1 >= len(args) || args[i+1] != want {
					t.Errorf("restore args = %q, want %s %s", args, flag, want)
				}
			}
		})
	}
}

// readyObject is what the preflight finds at path in a cluster ready for
// any Job: a namespace without Pod Security labels, any service account, any
// Secret holding felis.toml and the S3 credentials' default keys, any claim
// Bound; nil for other paths.
func readyObject(path string) any {
	parts := strings.Split(strings.TrimPrefix(path, "/api/v1/namespaces/"), "/")
	if !strings.HasPrefix(path, "/api/v1/namespaces/") {
		return nil
	}
	meta := func(kind string) (metav1.TypeMeta, metav1.ObjectMeta) {
		return metav1.TypeMeta{APIVersion: "v1", Kind: kind}, metav1.ObjectMeta{Namespace: parts[0], Name: parts[len(parts)-1]}
	}
	switch {
	case len(parts) == 1:
		tm, om := meta("Namespace")
		om.Namespace = ""
		return &corev1.Namespace{TypeMeta: tm, ObjectMeta: om}
	case len(parts) != 3:
		return nil
	case parts[1] == "serviceaccounts":
		tm, om := meta("ServiceAccount")
		return &corev1.ServiceAccount{TypeMeta: tm, ObjectMeta: om}
	case parts[1] == "secrets":
		tm, om := meta("Secret")
		return &corev1.Secret{TypeMeta: tm, ObjectMeta: om, Data: map[string][]byte{
			"felis.toml": []byte("[database]\n"), "access-key": []byte("AKIA"), "secret-key": []byte("s3cr3t")}}
	case parts[1] == "persistentvolumeclaims":
		tm, om := meta("PersistentVolumeClaim")
		return &corev1.PersistentVolumeClaim{TypeMeta: tm, ObjectMeta: om, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
	default:
		return nil
	}
}

// TestByRunArchiveRefOutput: a restore or a verify by run has no archive
// among its inputs; its archiveRef output is the archive its run resolved
// and reported in the termination message.
func TestByRunArchiveRefOutput(t *testing.T) {
	const ref = "/backups/survival/20250601-0300.tar.zst"
	sum := strings.Repeat("c0", 32)
	msg := `{"status":"verified","run_id":"20250601-0300","archive_ref":"` + ref + `","sha256":"` + sum + `","chunks_checked":3}`
	for _, tt := range []struct {
		name     string
		job      func(t *testing.T) *batchv1.Job
		register func(ctx *pulumi.Context, kc string) (pulumi.StringOutput, error)
	}{
		{"verify", func(t *testing.T) *batchv1.Job {
			a := validVerify()
			a.ArchiveRef, a.SHA256, a.FromRun = nil, nil, pulumi.String("latest")
			v, err := a.Job()
			if err != nil {
				t.Fatal(err)
			}
			return jobspec.BuildVerify(v)
		}, func(ctx *pulumi.Context, kc string) (pulumi.StringOutput, error) {
			a := validVerify()
			a.ArchiveRef, a.SHA256, a.FromRun, a.Kubeconfig = nil, nil, pulumi.String("latest"), kc
			v, err := NewWorldVerify(ctx, "check", a)
			if err != nil {
				return pulumi.StringOutput{}, err
			}
			return v.ArchiveRef, nil
		}},
		{"restore", func(t *testing.T) *batchv1.Job {
			a := validRestoreArgs()
			a.ArchiveRef, a.SHA256, a.FromRun = nil, nil, pulumi.String("latest")
			r, err := a.Job()
			if err != nil {
				t.Fatal(err)
			}
			return jobspec.BuildRestore(r)
		}, func(ctx *pulumi.Context, kc string) (pulumi.StringOutput, error) {
			a := validRestoreArgs()
			a.ArchiveRef, a.SHA256, a.FromRun, a.Kubeconfig = nil, nil, pulumi.String("latest"), kc
			r, err := NewWorldRestore(ctx, "survival-restore", a)
			if err != nil {
				return pulumi.StringOutput{}, err
			}
			return r.ArchiveRef, nil
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			objs := finishedBackup(tt.job(t), msg)
			kc := clusterWith(t, objs[0].(*batchv1.Job), *objs[1].(*corev1.Pod))
			var mu sync.Mutex
			var got string
			if _, err := runMocked(t, func(ctx *pulumi.Context) error {
				out, err := tt.register(ctx, kc)
				out.ApplyT(func(s string) string { mu.Lock(); defer mu.Unlock(); got = s; return s })
				return err
			}); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if got != ref {
				t.Fatalf("archiveRef output = %q, want the reported %q", got, ref)
			}
		})
	}
}

// TestGamePodAffinityRequiredIsFailedWhileStopped: a required game pod
// affinity while the server is stopped leaves the pod unschedulable
// ("didn't match pod affinity rules"); the watchdog fails the Job after its
// grace for that, as gamePodAffinity's description says, rather than let it
// wait for the server.
func TestGamePodAffinityRequiredIsFailedWhileStopped(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "survival-backup-r1-x", UID: "p1"},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: "0/3 nodes are available: 3 node(s) didn't match pod affinity rules."}}}}
	c := observe.Stuck(pod, nil)
	grace := observe.DefaultGrace.Unschedulable
	var tr observe.Tracker
	t0 := time.Now()
	for _, tt := range []struct {
		name   string
		after  time.Duration
		failed bool
	}{
		{"at once", 0, false},
		{"within the grace", grace - time.Second, false},
		{"after the grace", grace + time.Second, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, failed := tr.Observe([]observe.Cause{c}, t0.Add(tt.after), observe.DefaultGrace); failed != tt.failed {
				t.Fatalf("after %s: failed %v, want %v", tt.after, failed, tt.failed)
			}
		})
	}
	if want := "fails the Job once it has been unschedulable for " + jobapi.ShortDuration(grace); !strings.Contains(descGamePodAffinity, want) ||
		strings.Contains(descGamePodAffinity, "waits while the server is stopped") {
		t.Errorf("gamePodAffinity's description %q does not say %q", descGamePodAffinity, want)
	}
}
