package nodetest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/worldbackup/worldbackup/internal/kubenode"
	"github.com/worldbackup/worldbackup/internal/stacktest"
	"github.com/worldbackup/worldbackup/program/deploy"
	"github.com/worldbackup/worldbackup/provider"
	"github.com/worldbackup/worldbackup/provider/observe"
)

// TestFailuresNamedQuickly: a run that cannot succeed makes `pulumi up` (or
// the preview it runs first) fail within failBound, naming the cause; once
// the cause is fixed, `up` with the same run ID replaces the failed Job and
// the backup completes.
func TestFailuresNamedQuickly(t *testing.T) {
	t.Parallel() // waits on graces or the cron minute: see TestMain
	node := kubenode.Require(t)
	tools := stacktest.Require(t)

	t.Run("unknown key in felis.toml", func(t *testing.T) {
		ns := namespace(t, node, kubenode.NamespaceOptions{FelisTOML: func(url string) string {
			return fmt.Sprintf("[database]\nurl = %q\nbogus_key = 1\n", url)
		}})
		stack := tools.InlineStack(t, "node", deploy.Program, stackConfig(node, ns, "r1"))
		f := upFails(t, stack)
		f.mentions(t, "unknown key", "database.bogus_key", "BackoffLimitExceeded")
		if code := exitCode(t, node, ns.Name); code != 2 {
			t.Errorf("the archiver exited %d on an unknown felis.toml key, want 2 (config error)", code)
		}

		setFelis(t, node, ns, fmt.Sprintf("[database]\nurl = %q\n", ns.PodDatabaseURL))
		_, out := up(t, node, ns, stack)
		jobComplete(t, node, ns.Name, out.jobName)
		checkArchive(t, ns, out)
	})

	t.Run("database unreachable", func(t *testing.T) {
		ns := namespace(t, node, kubenode.NamespaceOptions{})
		stack := tools.InlineStack(t, "node", deploy.Program, stackConfig(node, ns, "r1"))
		ns.DatabaseProxy.Blackhole()
		f := upFails(t, stack)
		f.mentions(t, "BackoffLimitExceeded", "connecting to database")
		if code := exitCode(t, node, ns.Name); code != 1 {
			t.Errorf("the archiver exited %d with the database unreachable, want 1 (transient)", code)
		}

		ns.DatabaseProxy.Resume()
		_, out := up(t, node, ns, stack)
		jobComplete(t, node, ns.Name, out.jobName)
		checkArchive(t, ns, out)
		if got := archives(t, ns); len(got) != 1 {
			t.Errorf("%d archives after the failed and the fixed run, want 1: %v", len(got), got)
		}
	})

	preflights := []struct {
		name string
		opts kubenode.NamespaceOptions
		want []string
		fix  func(t *testing.T, ns *kubenode.Namespace)
	}{
		{
			name: "missing Secret",
			opts: kubenode.NamespaceOptions{WithoutSecret: true},
			want: []string{"Secret", provider.DefaultConfigSecretName, "does not exist"},
			fix: func(t *testing.T, ns *kubenode.Namespace) {
				_, err := node.Client.CoreV1().Secrets(ns.Name).Create(t.Context(), &corev1.Secret{
					ObjectMeta: metav1.ObjectMeta{Name: provider.DefaultConfigSecretName},
					Data:       map[string][]byte{"felis.toml": fmt.Appendf(nil, "[database]\nurl = %q\n", ns.PodDatabaseURL)},
				}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "missing service account",
			opts: kubenode.NamespaceOptions{WithoutServiceAccount: true},
			want: []string{"service account", provider.DefaultServiceAccountName, "does not exist", "create serviceaccount"},
			fix: func(t *testing.T, ns *kubenode.Namespace) {
				_, err := node.Client.CoreV1().ServiceAccounts(ns.Name).Create(t.Context(), &corev1.ServiceAccount{
					ObjectMeta:                   metav1.ObjectMeta{Name: provider.DefaultServiceAccountName},
					AutomountServiceAccountToken: new(false),
				}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "missing backup claim",
			opts: kubenode.NamespaceOptions{WithoutBackupClaim: true},
			want: []string{"PersistentVolumeClaim", `"backups"`, "does not exist"},
		},
		{
			name: "missing world claim",
			opts: kubenode.NamespaceOptions{WithoutWorldClaims: true},
			want: []string{"PersistentVolumeClaim", "lobby", "does not exist"},
		},
		{
			name: "restricted namespace, baseline mode",
			opts: kubenode.NamespaceOptions{Enforce: "restricted"},
			want: []string{"enforces the restricted Pod Security Standard", "securityMode"},
			fix: func(t *testing.T, ns *kubenode.Namespace) {
				n, err := node.Client.CoreV1().Namespaces().Get(t.Context(), ns.Name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				n.Labels["pod-security.kubernetes.io/enforce"] = "baseline"
				if _, err := node.Client.CoreV1().Namespaces().Update(t.Context(), n, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			},
		},
	}
	for _, tc := range preflights {
		t.Run("preflight: "+tc.name, func(t *testing.T) {
			ns := namespace(t, node, tc.opts)
			stack := tools.InlineStack(t, "node", deploy.Program, stackConfig(node, ns, "r1"))
			f := previewFails(t, stack)
			f.mentions(t, append([]string{"found at preview", ns.Name}, tc.want...)...)
			noJobs(t, node, ns.Name, "the failed preview")
			// The same through an up that runs no preview (the Automation
			// API's Up, pulumi up --skip-preview): the preflight runs there too,
			// before the Job is created.
			f = upFails(t, stack)
			f.mentions(t, append([]string{"found at up", ns.Name}, tc.want...)...)
			noJobs(t, node, ns.Name, "the failed up")
			if tc.fix == nil {
				return
			}
			tc.fix(t, ns)
			preview(t, stack)
			_, out := up(t, node, ns, stack)
			jobComplete(t, node, ns.Name, out.jobName)
			checkArchive(t, ns, out)
		})
	}
}

// noJobs fails t when ns holds a Job after what (a failed preflight).
func noJobs(t *testing.T, node *kubenode.Node, ns, what string) {
	t.Helper()
	if jobs, err := node.Client.BatchV1().Jobs(ns).List(t.Context(), metav1.ListOptions{}); err != nil || len(jobs.Items) != 0 {
		t.Errorf("%s left Jobs (%v): %v", what, err, jobs)
	}
}

// setFelis replaces the felis.toml of the namespace's config Secret.
func setFelis(t *testing.T, node *kubenode.Node, ns *kubenode.Namespace, felis string) {
	t.Helper()
	secrets := node.Client.CoreV1().Secrets(ns.Name)
	s, err := secrets.Get(t.Context(), ns.Options.ConfigSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Data["felis.toml"] = []byte(felis)
	if _, err := secrets.Update(t.Context(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// exitCode is the archiver's exit code in the one finished pod of ns.
func exitCode(t *testing.T, node *kubenode.Node, ns string) int32 {
	t.Helper()
	pods, err := node.Client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 {
		t.Fatalf("%d pods in %s, want the failed run's one", len(pods.Items), ns)
	}
	for _, c := range pods.Items[0].Status.ContainerStatuses {
		if c.Name == "archiver" && c.State.Terminated != nil {
			return c.State.Terminated.ExitCode
		}
	}
	t.Fatalf("pod %s has no terminated archiver container: %+v", pods.Items[0].Name, pods.Items[0].Status.ContainerStatuses)
	return 0
}

// TestUnpullableImageNamedQuickly: an image the registry does not have is
// reported within failBound, though the Job's deadline is the default 30
// minutes: the component's watchdog sees the pod wait in
// ErrImagePull/ImagePullBackOff with the registry's "not found", names the
// cause and fails the Job (DeadlineExceeded) after the Container grace,
// which ends the provider's await. The right image with the same run ID
// then succeeds.
func TestUnpullableImageNamedQuickly(t *testing.T) {
	t.Parallel() // waits on graces or the cron minute: see TestMain
	node := kubenode.Require(t)
	tools := stacktest.Require(t)
	reg := startRegistry(t)
	ns := namespace(t, node, kubenode.NamespaceOptions{})
	cfg := stackConfig(node, ns, "r1")
	cfg["worldbackup:image"] = reg.ref("worldbackup-archiver", "no-such-tag")
	stack := tools.InlineStack(t, "node", deploy.Program, cfg)
	f := upFails(t, stack)
	f.mentions(t, "cannot run", "ImagePull", "no-such-tag", "not found", "DeadlineExceeded")

	cfg["worldbackup:image"] = node.ArchiverImage
	stacktest.SetConfig(t, stack, cfg)
	_, out := up(t, node, ns, stack)
	jobComplete(t, node, ns.Name, out.jobName)
	checkArchive(t, ns, out)
}

// TestRegistryOutageWaitedFor: a registry that answers 503 for longer than
// the Container grace (a registry restarting, failing over) does not fail
// the backup: the watchdog gives a pull error that a retry may heal the
// Registry grace, the kubelet pulls again once the registry is back, and
// `pulumi up` succeeds. With one grace for every pull error, the Job failed
// a minute into the outage.
func TestRegistryOutageWaitedFor(t *testing.T) {
	t.Parallel() // waits on graces or the cron minute: see TestMain
	node := kubenode.Require(t)
	tools := stacktest.Require(t)
	reg := startRegistry(t)
	image := reg.push(t, node.ArchiverTarball, "worldbackup-archiver", "outage")
	// The kubelet pulls at about 0, 10, 30, 70 and 150 s (its back-off
	// doubles from 10 s): the outage outlasts the fourth pull, so the pod
	// waits at least twice the Container grace (the watchdog may first
	// look at it up to 20 s late) and the fifth pull finds the registry
	// back, well within the Registry grace.
	reg.down(2 * observe.DefaultGrace.Container)
	ns := namespace(t, node, kubenode.NamespaceOptions{})
	cfg := stackConfig(node, ns, "r1")
	cfg["worldbackup:image"] = image
	stack := tools.InlineStack(t, "node", deploy.Program, cfg)
	_, out := up(t, node, ns, stack)
	jobComplete(t, node, ns.Name, out.jobName)
	checkArchive(t, ns, out)
	refused, until := reg.outage()
	t.Logf("the registry refused %d requests; a manifest was served %s after the first", refused, until.Round(time.Second))
	if refused == 0 || until <= 2*observe.DefaultGrace.Container {
		t.Errorf("the registry refused %d requests and served a manifest %s after the first: the pod did not wait out "+
			"an outage of twice the Container grace (%s)", refused, until, observe.DefaultGrace.Container)
	}
}

// TestQuotaInUseWaitedFor: a ResourceQuota that another pod of the
// namespace fills refuses the backup's pod for longer than the Refused
// grace; as the pod alone fits the quota, the watchdog gives it the Quota
// grace, and once the other pod is gone the Job controller creates the
// backup's pod and `pulumi up` succeeds. (A quota the pod alone exceeds,
// TestRefusedPodNamed, still fails within failBound.)
func TestQuotaInUseWaitedFor(t *testing.T) {
	t.Parallel() // waits on graces or the cron minute: see TestMain
	node := kubenode.Require(t)
	tools := stacktest.Require(t)
	ns := namespace(t, node, kubenode.NamespaceOptions{})
	podQuota(t, node, ns.Name, "one-pod", 1)
	pods := node.Client.CoreV1().Pods(ns.Name)
	filler, err := pods.Create(t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "filler"},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: new(false),
			Containers:                   []corev1.Container{{Name: "pause", Image: node.PauseImage, ImagePullPolicy: corev1.PullNever}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the pod that fills the quota: %v", err)
	}
	// Held from the first refusal past the Refused grace and the
	// watchdog's next looks, then deleted: the backup's pod fits.
	held := observe.DefaultGrace.Refused + 2*observe.DefaultInterval + 5*time.Second
	released := make(chan error, 1)
	go func() {
		err := wait.PollUntilContextTimeout(t.Context(), time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
			events, err := node.Client.CoreV1().Events(ns.Name).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedCreate"})
			return err == nil && slices.ContainsFunc(events.Items, func(e corev1.Event) bool {
				return strings.Contains(e.Message, "exceeded quota: one-pod")
			}), nil
		})
		if err != nil {
			released <- fmt.Errorf("no FailedCreate event named the quota: %w", err)
			return
		}
		select {
		case <-time.After(held):
		case <-t.Context().Done():
		}
		released <- pods.Delete(context.WithoutCancel(t.Context()), filler.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))})
	}()
	stack := tools.InlineStack(t, "node", deploy.Program, stackConfig(node, ns, "r1"))
	_, out := up(t, node, ns, stack)
	if err := <-released; err != nil {
		t.Fatalf("the pod that fills the quota: %v", err)
	}
	jobComplete(t, node, ns.Name, out.jobName)
	checkArchive(t, ns, out)
}

// TestVolumeThatCannotMountNamed: a world claim whose volume cannot be
// mounted (its hostPath folder, type Directory, is gone) keeps the backup's
// pod in ContainerCreating, which its status does not explain; the watchdog
// reads the pod's FailedMount events, names the cause after its grace and
// fails the Job, so `pulumi up` ends then rather than at the 30-minute
// deadline. With the folder back, the same run ID succeeds.
func TestVolumeThatCannotMountNamed(t *testing.T) {
	t.Parallel() // waits on graces or the cron minute: see TestMain
	node := kubenode.Require(t)
	tools := stacktest.Require(t)
	ns := namespace(t, node, kubenode.NamespaceOptions{})
	world := ns.WorldDirs["lobby"]
	if err := os.Rename(world, world+".away"); err != nil {
		t.Fatal(err)
	}
	stack := tools.InlineStack(t, "node", deploy.Program, stackConfig(node, ns, "r1"))
	f := upFailsWithin(t, stack, observe.DefaultGrace.Creating+failBound)
	f.mentions(t, "cannot run", "FailedMount", "hostPath type check failed", world, "DeadlineExceeded")

	if err := os.Rename(world+".away", world); err != nil {
		t.Fatal(err)
	}
	_, out := up(t, node, ns, stack)
	jobComplete(t, node, ns.Name, out.jobName)
	checkArchive(t, ns, out)
}

// TestRefusedPodNamed: a Job whose pod the API server refuses has no pod to
// look at; the watchdog reads the Job controller's FailedCreate events, names
// the refusal and fails the Job within failBound. A quota of no pods is a
// refusal the preflight cannot foresee. Without the quota the same run ID
// succeeds.
func TestRefusedPodNamed(t *testing.T) {
	t.Parallel() // waits on graces or the cron minute: see TestMain
	node := kubenode.Require(t)
	tools := stacktest.Require(t)
	ns := namespace(t, node, kubenode.NamespaceOptions{})
	podQuota(t, node, ns.Name, "no-pods", 0)
	quotas := node.Client.CoreV1().ResourceQuotas(ns.Name)
	stack := tools.InlineStack(t, "node", deploy.Program, stackConfig(node, ns, "r1"))
	f := upFails(t, stack)
	f.mentions(t, "cannot run", "no pod can be created", "FailedCreate", "exceeded quota: no-pods", "DeadlineExceeded")

	if err := quotas.Delete(t.Context(), "no-pods", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	_, out := up(t, node, ns, stack)
	jobComplete(t, node, ns.Name, out.jobName)
	checkArchive(t, ns, out)
}

// podQuota creates a ResourceQuota of at most pods pods in the namespace
// and waits until the quota controller has counted it: until then,
// admission refuses pods with "status unknown", not with the quota.
func podQuota(t *testing.T, node *kubenode.Node, ns, name string, pods int64) {
	t.Helper()
	quotas := node.Client.CoreV1().ResourceQuotas(ns)
	_, err := quotas.Create(t.Context(), &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(pods, resource.DecimalSI)}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		q, err := quotas.Get(ctx, name, metav1.GetOptions{})
		return err == nil && q.Status.Hard != nil, nil
	})
	if err != nil {
		t.Fatalf("the quota %s was not counted within a minute: %v", name, err)
	}
}
