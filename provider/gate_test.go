package provider

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/worldbackup/worldbackup/jobapi"
	"github.com/worldbackup/worldbackup/provider/jobspec"
	"github.com/worldbackup/worldbackup/provider/observe"
	"github.com/worldbackup/worldbackup/provider/preflight"
)

// gateCluster is a cluster (client-go's fake) in which a Job the mocks
// register gets a pod whose archiver is running (at the door of the
// catalog's slots, which are the archiver's to keep: catalog.Slots). Its
// controller (run) finishes the Jobs under way one at a time, each only
// once the gate is full (as many Jobs under way as it allows, twice its
// limit, or every Job left), and a little later, so a gate that let more
// through would show it in peak, and one that let fewer through would
// stall the test.
type gateCluster struct {
	mocks
	t       *testing.T
	client  *fake.Clientset
	limit   int
	total   int
	fail    map[string]bool // Job names that fail
	mu      sync.Mutex
	running []string // oldest first
	created int
	peak    int
	skipped []string // Jobs registered without pulumi.com/skipAwait
}

func (c *gateCluster) NewResource(args pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	id, props, err := c.mocks.NewResource(args)
	if err != nil || args.TypeToken != jobType {
		return id, props, err
	}
	meta := args.Inputs["metadata"].ObjectValue()
	name, ns := meta["name"].StringValue(), meta["namespace"].StringValue()
	uid := types.UID("uid-" + name)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: uid},
		Spec: batchv1.JobSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"controller-uid": string(uid)}}}}
	if _, err := c.client.BatchV1().Jobs(ns).Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
		return "", nil, err
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name + "-pod", Namespace: ns, Labels: job.Spec.Selector.MatchLabels},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: observe.ArchiverContainer,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}
	if _, err := c.client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		return "", nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if ann := meta["annotations"]; !ann.IsObject() || ann.ObjectValue()[jobspec.AnnotationSkipAwait].StringValue() != "true" {
		c.skipped = append(c.skipped, name)
	}
	c.running = append(c.running, name)
	c.created++
	c.peak = max(c.peak, len(c.running))
	return id, props, nil
}

// run finishes every Job, as described on gateCluster, until all total
// have finished or ctx ends.
func (c *gateCluster) run(ctx context.Context, ns string) {
	for done := 0; done < c.total; done++ {
		for {
			c.mu.Lock()
			full := len(c.running) >= min(2*c.limit, c.total-done)
			c.mu.Unlock()
			if full {
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
		time.Sleep(20 * time.Millisecond) // room for a gate that lets too many through
		c.mu.Lock()
		c.peak = max(c.peak, len(c.running))
		name := c.running[0]
		c.running = c.running[1:]
		c.mu.Unlock()
		c.finish(ns, name, c.fail[name])
	}
}

// finish completes (or fails) the Job name, with the archiver's report in
// its pod's termination message: the pod ends before its Job is marked
// finished, as in a cluster.
func (c *gateCluster) finish(ns, name string, failed bool) {
	c.end(ns, name, failed)
	c.mark(ns, name, failed)
}

// end ends the archiver of Job name's pod, with exit code 1 when failed,
// else 0 and the archiver's report.
func (c *gateCluster) end(ns, name string, failed bool) {
	ctx := context.Background()
	job, err := c.client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		c.t.Error(err)
		return
	}
	exit := int32(0)
	if failed {
		exit = 1
	}
	msg := fmt.Sprintf(`{"status":"done","server":"s","run_id":"r","sha256":"%s","size_bytes":%d,"duration_seconds":1}`, strings.Repeat("ab", 32), len(name))
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name + "-pod", Namespace: ns, Labels: job.Spec.Selector.MatchLabels},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: observe.ArchiverContainer,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Message: msg}}}}}}
	if _, err := c.client.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); apierrors.IsNotFound(err) {
		_, err = c.client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}) // a retry's pod
		if err != nil {
			c.t.Error(err)
		}
	} else if err != nil {
		c.t.Error(err)
	}
}

// mark marks the Job name complete (or failed), as the Job controller does.
func (c *gateCluster) mark(ns, name string, failed bool) {
	ctx := context.Background()
	job, err := c.client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		c.t.Error(err)
		return
	}
	cond := batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}
	if failed {
		cond = batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}
	}
	job.Status.Conditions = []batchv1.JobCondition{cond}
	if _, err := c.client.BatchV1().Jobs(ns).UpdateStatus(ctx, job, metav1.UpdateOptions{}); err != nil {
		c.t.Error(err)
	}
}

// gatedBackups is a program of n backups (s0, s1, ...) through gate, the
// way registerJobComponent makes them. onJob, when set, is told each
// backup's Job name as it is declared, in order; onSize, when set, the size
// each one's run reported, once its Job has finished.
func gatedBackups(gate *Gate, n int, newClient clientMaker, onJob func(server, job string), onSize func(job string, size int)) pulumi.RunFunc {
	return func(ctx *pulumi.Context) error {
		for i := range n {
			server := fmt.Sprintf("s%d", i)
			args := validArgs()
			args.Server = server
			r, err := args.resolve()
			if err != nil {
				return err
			}
			job := jobspec.BuildBackup(r.Job)
			if onJob != nil {
				onJob(server, job.Name)
			}
			comp := &WorldBackup{}
			if err := ctx.RegisterComponentResource(WorldBackupType, server, comp); err != nil {
				return err
			}
			pl := gate.through(jobPlan{Job: job, Timeout: time.Minute, Preflight: preflightSettings{Enabled: true}})
			if pl.gate == nil {
				return fmt.Errorf("the Job of %s is not gated", server)
			}
			res, run, err := registerGated(ctx, comp, server+"-job", pl, newClient)
			if err != nil {
				return err
			}
			o := summaryOutputsE(res.URN(), func(any) (observe.Summary, error) { return run.wait() })
			size := o.SizeBytes.ApplyT(func(n int) int {
				if onSize != nil {
					onSize(job.Name, n)
				}
				return n
			})
			// As registerJobComponent does: a failed run fails here.
			if err := ctx.RegisterResourceOutputs(comp, pulumi.Map{"sizeBytes": size}); err != nil {
				return err
			}
		}
		return nil
	}
}

// TestGateFreesSlotWhenArchiverEnds: under a gate of one, two Jobs are
// under way (one at the door); the third backup's Job is created as soon as
// the first one's archiver has exited with 0, before the Job controller
// marks that Job complete; a failed archiver, which the Job may retry,
// keeps its place.
func TestGateFreesSlotWhenArchiverEnds(t *testing.T) {
	tests := []struct {
		name      string
		failed    bool
		wantEarly bool
	}{
		{"the archiver succeeded: its place is free", false, true},
		{"the archiver failed: the Job may retry, its place is held", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &gateCluster{t: t, client: fake.NewClientset(), limit: 1, total: 3}
			newClient := func(preflight.Cluster) (kubernetes.Interface, error) { return c.client, nil }
			gate, err := newGate(1, "g")
			if err != nil {
				t.Fatal(err)
			}
			gate.poll = 10 * time.Millisecond
			created := func() int {
				c.mu.Lock()
				defer c.mu.Unlock()
				return c.created
			}
			early := make(chan bool, 1)
			go func() {
				for created() < 2 {
					time.Sleep(5 * time.Millisecond)
				}
				c.mu.Lock()
				first, second := c.running[0], c.running[1]
				c.mu.Unlock()
				c.end(DefaultNamespace, first, tt.failed)
				deadline := time.Now().Add(time.Second)
				for created() < 3 && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond)
				}
				early <- created() == 3
				if tt.failed { // the Job's retry succeeds
					if err := c.client.CoreV1().Pods(DefaultNamespace).Delete(context.Background(), first+"-pod", metav1.DeleteOptions{}); err != nil {
						t.Error(err)
					}
					c.end(DefaultNamespace, first, false)
				}
				c.mark(DefaultNamespace, first, false)
				for created() < 3 {
					time.Sleep(5 * time.Millisecond)
				}
				c.mu.Lock()
				third := c.running[2]
				c.mu.Unlock()
				c.finish(DefaultNamespace, second, false)
				c.finish(DefaultNamespace, third, false)
			}()
			program := gatedBackups(gate, 3, newClient, nil, nil)
			if err := pulumi.RunErr(program, pulumi.WithMocks("project", "stack", c)); err != nil {
				t.Fatal(err)
			}
			if got := <-early; got != tt.wantEarly {
				t.Errorf("the third Job was created before the first one completed: %v, want %v", got, tt.wantEarly)
			}
		})
	}
}

// TestGate: backups made through a gate are created no more than its limit
// at a time, with pulumi.com/skipAwait (the engine does not wait for them:
// the component does); each component's outputs are what its run reported
// once its Job finished; a Job that fails fails the program with its
// reason, and the others still run.
func TestGate(t *testing.T) {
	tests := []struct {
		name         string
		limit, jobs  int
		fail         string // a server whose Job fails
		wantErr      string
		wantFinished int
	}{
		{name: "six backups through a gate of two", limit: 2, jobs: 6, wantFinished: 6},
		{name: "one at a time", limit: 1, jobs: 3, wantFinished: 3},
		{name: "a gate wider than the run", limit: 10, jobs: 4, wantFinished: 4},
		{name: "a failed Job fails the program, the others run", limit: 2, jobs: 5, fail: "s2",
			wantErr: "failed: BackoffLimitExceeded: Job has reached the specified backoff limit", wantFinished: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &gateCluster{t: t, client: fake.NewClientset(), limit: tt.limit, total: tt.jobs, fail: map[string]bool{}}
			newClient := func(preflight.Cluster) (kubernetes.Interface, error) { return c.client, nil }
			gate, err := newGate(tt.limit, "g")
			if err != nil {
				t.Fatal(err)
			}
			gate.poll = 10 * time.Millisecond
			var mu sync.Mutex
			sizes := map[string]int{}
			program := gatedBackups(gate, tt.jobs, newClient, func(server, job string) {
				if server == tt.fail {
					c.fail[job] = true
				}
			}, func(job string, n int) {
				mu.Lock()
				defer mu.Unlock()
				sizes[job] = n
			})
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			go c.run(ctx, DefaultNamespace)
			err = pulumi.RunErr(program, pulumi.WithMocks("project", "stack", c))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatal(err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error %v, want one that says %q", err, tt.wantErr)
			}
			if want := min(2*tt.limit, tt.jobs); c.peak != want {
				t.Errorf("%d Jobs were under way at once, want %d (the limit at the door and as many started early)", c.peak, want)
			}
			if c.created != tt.jobs {
				t.Errorf("%d Jobs created, want %d", c.created, tt.jobs)
			}
			if len(c.skipped) > 0 {
				t.Errorf("Jobs registered without %s: %v", jobspec.AnnotationSkipAwait, c.skipped)
			}
			if len(sizes) != tt.wantFinished {
				t.Errorf("%d components reported their run, want %d: %v", len(sizes), tt.wantFinished, sizes)
			}
			for name, n := range sizes {
				if n != len(name) {
					t.Errorf("%s reported size %d, want %d (its own run's report)", name, n, len(name))
				}
			}
		})
	}
}

// TestGateThrough: a gate gates only a Job the component would watch (a
// known Job, the preflight on, no skipAwait), and never changes the plan's
// own Job.
func TestGateThrough(t *testing.T) {
	gate, err := newGate(3, "g")
	if err != nil {
		t.Fatal(err)
	}
	r, err := validArgs().resolve()
	if err != nil {
		t.Fatal(err)
	}
	job := func(skip bool) *batchv1.Job {
		j := jobspec.BuildBackup(r.Job)
		if skip {
			j.Annotations[jobspec.AnnotationSkipAwait] = "true"
		}
		return j
	}
	on := preflightSettings{Enabled: true}
	tests := []struct {
		name  string
		gate  *Gate
		plan  jobPlan
		gated bool
	}{
		{"a watched Job", gate, jobPlan{Job: job(false), Preflight: on}, true},
		{"no gate", nil, jobPlan{Job: job(false), Preflight: on}, false},
		{"skipAwait", gate, jobPlan{Job: job(true), Preflight: on}, false},
		{"preflight off (render mode)", gate, jobPlan{Job: job(false)}, false},
		{"a Job built later", gate, jobPlan{Later: pulumi.Any(1), Preflight: on}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := ""
			if tt.plan.Job != nil {
				before = tt.plan.Job.Annotations[jobspec.AnnotationSkipAwait]
			}
			got := tt.gate.through(tt.plan)
			if (got.gate != nil) != tt.gated {
				t.Fatalf("gated %v, want %v", got.gate != nil, tt.gated)
			}
			if tt.plan.Job != nil && tt.plan.Job.Annotations[jobspec.AnnotationSkipAwait] != before {
				t.Error("through changed the plan's own Job")
			}
			if tt.gated && got.Job.Annotations[jobspec.AnnotationSkipAwait] != "true" {
				t.Errorf("the gated Job has no %s", jobspec.AnnotationSkipAwait)
			}
			if got.Job == nil {
				return
			}
			args := strings.Join(got.Job.Spec.Template.Spec.Containers[0].Args, " ")
			if tt.gated != strings.Contains(args, "--concurrency 3 --concurrency-group g") {
				t.Errorf("the Job waits for one of the gate's 3 slots of its group: %v, want %v (args %s)", !tt.gated, tt.gated, args)
			}
		})
	}
	if _, err := newGate(0, "g"); err == nil {
		t.Error("newGate(0) is accepted")
	}
}

// TestGatesPerCluster: the backups on one cluster that set concurrency share
// one gate (whatever program run asks, given the same Gates); another
// cluster or context has its own; a cluster given two limits is an error
// that names both and the cluster, without a kubeconfig's contents.
func TestGatesPerCluster(t *testing.T) {
	var gs Gates
	eu := preflight.Cluster{Context: "eu"}
	g, err := gs.of(eu, 3)
	if err != nil || g.Limit() != 3 {
		t.Fatalf("of(eu, 3) = %v, %v; want a gate of 3", g, err)
	}
	if g.group != "context eu" {
		t.Errorf("the gate of context eu has group %q", g.group)
	}
	long := preflight.Cluster{Context: strings.Repeat("arn:aws:eks:eu-west-1:123456789012:cluster/", 8)}
	if lg, err := gs.of(long, 3); err != nil || len(lg.group) > jobapi.MaxConcurrencyGroup || !strings.HasPrefix(lg.group, "context sha256:") {
		t.Errorf("a context of %d bytes: gate %v, %v; want one whose group is the name's hash", len(long.Context), lg, err)
	}
	if cur, _ := gs.of(preflight.Cluster{}, 3); cur == nil || cur.group != "current-context" {
		t.Errorf("the ambient kubeconfig's current context has gate %v", cur)
	}
	if again, err := gs.of(eu, 3); again != g || err != nil {
		t.Errorf("a second backup on eu got %p, %v; want the same gate %p", again, err, g)
	}
	if us, _ := gs.of(preflight.Cluster{Context: "us"}, 3); us == g {
		t.Error("two contexts share a gate")
	}
	secret := "apiVersion: v1\nusers:\n- name: u\n  user:\n    token: s3cr3t\n"
	if _, err := gs.of(preflight.Cluster{Kubeconfig: secret}, 2); err != nil {
		t.Fatal(err)
	}
	_, err = gs.of(preflight.Cluster{Kubeconfig: secret}, 5)
	switch {
	case err == nil:
		t.Fatal("a cluster given concurrency 2 and 5 is accepted")
	case !strings.Contains(err.Error(), "concurrency is 5") || !strings.Contains(err.Error(), "set 2") ||
		!strings.Contains(err.Error(), "the Kubernetes provider's kubeconfig, its current context"):
		t.Errorf("error %q does not say both limits and the cluster", err)
	case strings.Contains(err.Error(), "s3cr3t"):
		t.Errorf("error %q shows the kubeconfig's contents", err)
	}
}

// TestGateOf: a backup goes through its cluster's gate only when it sets
// concurrency and the component watches its Job; without Gates it is an
// error that says what to set.
func TestGateOf(t *testing.T) {
	r, err := validArgs().resolve()
	if err != nil {
		t.Fatal(err)
	}
	watched := jobPlan{Job: jobspec.BuildBackup(r.Job), Preflight: preflightSettings{Enabled: true, Cluster: preflight.Cluster{Context: "eu"}}}
	rendered := watched
	rendered.Preflight.Enabled = false
	tests := []struct {
		name    string
		gates   *Gates
		limit   *int
		plan    jobPlan
		gated   bool
		wantErr string
	}{
		{"a watched backup with concurrency", &Gates{}, new(4), watched, true, ""},
		{"no concurrency", &Gates{}, nil, watched, false, ""},
		{"render mode: nothing awaited, nothing capped", &Gates{}, new(4), rendered, false, ""},
		{"concurrency without Gates", nil, new(4), watched, false, "must share one *provider.Gates"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := gateOf(tt.gates, tt.limit, tt.plan)
			switch {
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one that says %q", err, tt.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case (g != nil) != tt.gated:
				t.Fatalf("gate %v, want gated %v", g, tt.gated)
			case g != nil && g.Limit() != *tt.limit:
				t.Errorf("gate of %d, want %d", g.Limit(), *tt.limit)
			}
		})
	}
}

// TestGateJobOfAnEarlierUp: a `pulumi up` without change registers a gated
// backup's Job of an earlier run without creating it. Deleted since it
// finished (ttlSecondsAfterFinished), it is not waited for until its
// timeout; finished with its pod garbage-collected, it fails nothing: either
// way the outputs stay empty, with a warning, as an ungated Job's.
func TestGateJobOfAnEarlierUp(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, c *fake.Clientset, job string)
	}{
		{"the Job is gone", func(*testing.T, *fake.Clientset, string) {}},
		{"the Job finished, its pod is gone", func(t *testing.T, c *fake.Clientset, name string) {
			job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: DefaultNamespace, UID: "uid-" + types.UID(name)},
				Spec:   batchv1.JobSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"controller-uid": "uid-" + name}}},
				Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}}
			if _, err := c.BatchV1().Jobs(DefaultNamespace).Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
				t.Error(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset()
			newClient := func(preflight.Cluster) (kubernetes.Interface, error) { return client, nil }
			gate, err := newGate(1, "g")
			if err != nil {
				t.Fatal(err)
			}
			gate.poll = 10 * time.Millisecond
			var size = -1
			program := gatedBackups(gate, 1, newClient,
				func(_, job string) { tt.setup(t, client, job) },
				func(_ string, n int) { size = n })
			m := &mocks{} // registers without creating, as a registration without change
			if err := pulumi.RunErr(program, pulumi.WithMocks("project", "stack", m)); err != nil {
				t.Fatalf("pulumi up: %v", err)
			}
			if size != 0 {
				t.Errorf("sizeBytes = %d, want 0 (empty)", size)
			}
		})
	}
}
