package nodetest

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/worldbackup/worldbackup/internal/kubenode"
	"github.com/worldbackup/worldbackup/internal/stacktest"
	"github.com/worldbackup/worldbackup/jobapi"
	"github.com/worldbackup/worldbackup/program/deploy"
	"github.com/worldbackup/worldbackup/provider/jobspec"
)

// TestVerifyOnNode: servers[].verify verifies the run's backup by its run
// ID in a Job of its own that mounts no world, whose verify container
// mounts no Secret (its init container alone reads the catalog). A good
// world's archive is
// verified, every chunk counted; after a chunk of the world is damaged, the
// next run's backup still succeeds but its verify Job fails (exit 3),
// `pulumi up` fails with it, and the Job's termination message names the
// file and chunk.
func TestVerifyOnNode(t *testing.T) {
	node := kubenode.Require(t)
	tools := stacktest.Require(t)
	ns := namespace(t, node, kubenode.NamespaceOptions{})
	world := ns.WorldDirs["lobby"] // a generated world (kubenode), the game's files
	cfg := stackConfig(node, ns, "r1")
	cfg["worldbackup:servers[0].verify.scratchSize"] = "1Gi"
	stack := tools.InlineStack(t, "node", deploy.Program, cfg)

	res, backup := up(t, node, ns, stack)
	vs := outputList(t, res.Outputs, "verifies")
	if len(vs) != 1 || vs[0].status != string(jobapi.StatusVerified) || vs[0].archiveRef != backup.archiveRef {
		t.Fatalf("verifies = %+v, want one verified of %s", vs, backup.archiveRef)
	}
	jobComplete(t, node, ns.Name, vs[0].jobName)
	good, code := verifyResult(t, node, ns.Name, vs[0].jobName)
	if code != 0 || good.ChunksChecked == 0 || good.ChunksChecked != good.Chunks || good.SHA256 != backup.sha256 {
		t.Fatalf("the verify reported %+v (exit %d), want every chunk of %s checked", good, code, backup.archiveRef)
	}
	job, err := node.Client.BatchV1().Jobs(ns.Name).Get(t.Context(), vs[0].jobName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkVerifyPod(t, job.Spec.Template.Spec)

	regions, _ := filepath.Glob(filepath.Join(world, "world", "region", "r.*.*.mca"))
	if len(regions) == 0 {
		t.Fatalf("the generated world has no region files under %s", world)
	}
	region := regions[0]
	chunk := damageChunk(t, region)
	cfg["worldbackup:runId"] = "r2"
	stacktest.SetConfig(t, stack, cfg)
	f := upFailsWithin(t, stack, 10*time.Minute)
	name := jobspec.VerifyJobName("lobby", deploy.RunID("node", "lobby", "r2.verify"))
	f.mentions(t, "node-lobby-verify")
	bad, code := verifyResult(t, node, ns.Name, name)
	want := fmt.Sprintf("world/region/%s: chunk (%d, %d):", filepath.Base(region), chunk[0], chunk[1])
	if code != 3 || bad.Status != jobapi.StatusFailed || bad.ProblemsTotal == 0 || !strings.HasPrefix(bad.Problem, want) {
		t.Fatalf("the damaged world's verify reported %+v (exit %d), want failed, exit 3, naming %q", bad, code, want)
	}
}

// verifyResult is the termination message and exit code of the verify Job
// name's pod.
func verifyResult(t *testing.T, node *kubenode.Node, ns, name string) (jobapi.VerifyResult, int32) {
	t.Helper()
	pods, err := node.Client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "job-name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		for _, c := range p.Status.ContainerStatuses {
			if term := c.State.Terminated; c.Name == jobspec.ContainerName && term != nil {
				var r jobapi.VerifyResult
				if err := json.Unmarshal([]byte(term.Message), &r); err != nil {
					t.Fatalf("pod %s's termination message %q: %v", p.Name, term.Message, err)
				}
				return r, term.ExitCode
			}
		}
	}
	var conds string
	if job, err := node.Client.BatchV1().Jobs(ns).Get(t.Context(), name, metav1.GetOptions{}); err == nil {
		conds = jobConditions(job)
	} else {
		conds = err.Error()
	}
	t.Fatalf("Job %s has no finished pod (Job: %s):\n%s", name, conds, node.PodLogs(t, ns, "job-name="+name))
	return jobapi.VerifyResult{}, 0
}

// jobFailed says whether the Job has the condition Failed.
func jobFailed(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// jobConditions is the Job's true conditions with their reasons and
// messages (DeadlineExceeded, BackoffLimitExceeded, ...), for a failure
// message: they stay on the Job after its pods are gone.
func jobConditions(j *batchv1.Job) string {
	var out []string
	for _, c := range j.Status.Conditions {
		if c.Status == corev1.ConditionTrue {
			out = append(out, fmt.Sprintf("%s (%s: %s)", c.Type, c.Reason, c.Message))
		}
	}
	if len(out) == 0 {
		return "no condition"
	}
	return strings.Join(out, "; ")
}

// damageChunk flips a byte inside the compressed payload of the region
// file r.X.Z.mca's first chunk and returns that chunk's absolute
// coordinates.
func damageChunk(t *testing.T, path string) [2]int {
	t.Helper()
	var rx, rz int
	if _, err := fmt.Sscanf(filepath.Base(path), "r.%d.%d.mca", &rx, &rz); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var head [4096]byte
	if _, err := f.ReadAt(head[:], 0); err != nil {
		t.Fatal(err)
	}
	for slot := range 1024 {
		loc := binary.BigEndian.Uint32(head[4*slot:])
		if loc == 0 {
			continue
		}
		off := int64(loc>>8)*4096 + 40
		var b [1]byte
		if _, err := f.ReadAt(b[:], off); err != nil {
			t.Fatal(err)
		}
		b[0] ^= 0x5a
		if _, err := f.WriteAt(b[:], off); err != nil {
			t.Fatal(err)
		}
		return [2]int{32*rx + slot%32, 32*rz + slot/32}
	}
	t.Fatalf("%s has no chunks", path)
	return [2]int{}
}

// scheduledVerifyPassed waits for the first Job of the verify schedule
// (servers[0].verify.schedule "* * * * *") to finish and checks it: its
// init container resolved the server's newest run (one of runs, the run
// IDs recorded when it started) and the verify container, with no Secret
// and no world, verified that archive, every chunk.
func scheduledVerifyPassed(t *testing.T, node *kubenode.Node, ns *kubenode.Namespace, runs func() map[string]string) {
	t.Helper()
	selector := jobspec.LabelComponent + "=" + jobspec.ComponentVerifySchedule
	var done *batchv1.Job
	err := wait.PollUntilContextTimeout(t.Context(), 5*time.Second, scheduleBound, true, func(ctx context.Context) (bool, error) {
		jobs, err := node.Client.BatchV1().Jobs(ns.Name).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		for i, j := range jobs.Items {
			for _, c := range j.Status.Conditions {
				if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
					done = &jobs.Items[i]
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no scheduled verify finished %s after pulumi up (%v)\npods:\n%s", scheduleBound, err, node.PodLogs(t, ns.Name, selector))
	}
	if jobFailed(done) {
		// Said before anything else is read: the CronJob's history limit
		// deletes a finished Job and its pod once the next one finishes.
		t.Fatalf("the scheduled verify %s failed: %s\n%s", done.Name, jobConditions(done), node.PodLogs(t, ns.Name, selector))
	}
	got, code := verifyResult(t, node, ns.Name, done.Name)
	recorded := runs()
	if code != 0 || got.Status != jobapi.StatusVerified || recorded[got.RunID] == "" || got.ArchiveRef != recorded[got.RunID] ||
		got.ChunksChecked == 0 || got.ChunksChecked != got.Chunks {
		t.Fatalf("the scheduled verify %s reported %+v (exit %d), want every chunk of a recorded run (%v) verified\n%s",
			done.Name, got, code, recorded, node.PodLogs(t, ns.Name, selector))
	}
	checkVerifyPod(t, done.Spec.Template.Spec)
}

// checkVerifyPod: a verify by run's pod mounts no world, resolves the run
// in its init container, and its verify container mounts no Secret (it
// stays DB-blind).
func checkVerifyPod(t *testing.T, pod corev1.PodSpec) {
	t.Helper()
	if len(pod.InitContainers) != 1 || pod.InitContainers[0].Name != jobspec.ContainerResolve {
		t.Fatalf("init containers %+v, want the resolve", pod.InitContainers)
	}
	secrets := map[string]bool{}
	for _, v := range pod.Volumes {
		if v.Name == jobspec.WorldVolumeName {
			t.Errorf("the verify mounts the world")
		}
		secrets[v.Name] = v.Secret != nil
	}
	for _, m := range pod.Containers[0].VolumeMounts {
		if secrets[m.Name] {
			t.Errorf("the verify container mounts the Secret volume %q: it must stay DB-blind", m.Name)
		}
	}
}
