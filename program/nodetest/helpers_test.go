package nodetest

import (
	"strings"
	"testing"
	"time"

	"context"
	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optrefresh"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/worldbackup/worldbackup/internal/kubenode"
	"github.com/worldbackup/worldbackup/provider"
	"github.com/worldbackup/worldbackup/provider/naming"
)

// failBound is how soon `pulumi up` (or its preview) must report a failure
// whose cause it can see: a behaviour bound (the issue measured 35 minutes
// and "never"), not a speed benchmark.
const failBound = 2 * time.Minute

// failure is what a failed operation printed and how long it took.
type failure struct {
	out     string
	elapsed time.Duration
}

// upFails runs `pulumi up` expecting it to fail within failBound, and
// returns its output. Like every Up of the Automation API it runs no preview
// (`up --yes --skip-preview`): what the preview would catch must be caught
// at up as well.
func upFails(t *testing.T, stack auto.Stack) failure {
	t.Helper()
	return upFailsWithin(t, stack, failBound)
}

// upFailsWithin is upFails with its own bound, for a failure named only
// after a grace period.
func upFailsWithin(t *testing.T, stack auto.Stack, bound time.Duration) failure {
	t.Helper()
	var out strings.Builder
	start := time.Now()
	_, err := stack.Up(t.Context(), optup.ProgressStreams(&out), optup.ErrorProgressStreams(&out))
	f := failure{out.String(), time.Since(start)}
	if err == nil {
		t.Fatalf("pulumi up succeeded, want a failure:\n%s", f.out)
	}
	f.out += "\n" + err.Error()
	t.Logf("pulumi up failed after %s", f.elapsed.Round(time.Millisecond))
	if f.elapsed > bound {
		t.Errorf("pulumi up took %s to report the failure, want at most %s", f.elapsed.Round(time.Second), bound)
	}
	return f
}

// previewFails runs `pulumi preview` (what `pulumi up` runs first) expecting
// it to fail within failBound, and returns its output.
func previewFails(t *testing.T, stack auto.Stack) failure {
	t.Helper()
	var out strings.Builder
	start := time.Now()
	_, err := stack.Preview(t.Context(), optpreview.ProgressStreams(&out), optpreview.ErrorProgressStreams(&out))
	f := failure{out.String(), time.Since(start)}
	if err == nil {
		t.Fatalf("pulumi preview succeeded, want a failure:\n%s", f.out)
	}
	f.out += "\n" + err.Error()
	t.Logf("pulumi preview failed after %s", f.elapsed.Round(time.Millisecond))
	if f.elapsed > failBound {
		t.Errorf("pulumi preview took %s to report the failure, want at most %s", f.elapsed.Round(time.Second), failBound)
	}
	return f
}

// mentions fails t unless f's output contains every one of want.
func (f failure) mentions(t *testing.T, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(f.out, w) {
			t.Errorf("the output does not mention %q:\n%s", w, f.out)
		}
	}
}

// preview runs `pulumi preview`, failing t on error.
func preview(t *testing.T, stack auto.Stack) {
	t.Helper()
	var out strings.Builder
	if _, err := stack.Preview(t.Context(), optpreview.ProgressStreams(&out), optpreview.ErrorProgressStreams(&out)); err != nil {
		t.Fatalf("pulumi preview: %v\n%s", err, out.String())
	}
}

// refresh runs `pulumi refresh`, failing t on error.
func refresh(t *testing.T, stack auto.Stack) {
	t.Helper()
	var out strings.Builder
	if _, err := stack.Refresh(t.Context(), optrefresh.ProgressStreams(&out), optrefresh.ErrorProgressStreams(&out)); err != nil {
		t.Fatalf("pulumi refresh: %v\n%s", err, out.String())
	}
}

// deleteJob deletes a Job and its pods (as its TTL would) and waits until
// it is gone.
func deleteJob(t *testing.T, node *kubenode.Node, ns, name string) {
	t.Helper()
	jobs := node.Client.BatchV1().Jobs(ns)
	if err := jobs.Delete(t.Context(), name, metav1.DeleteOptions{PropagationPolicy: new(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatalf("deleting Job %s/%s: %v", ns, name, err)
	}
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := jobs.Get(ctx, name, metav1.GetOptions{})
		return err != nil, nil
	})
	if err != nil {
		t.Fatalf("Job %s/%s still there a minute after its deletion", ns, name)
	}
}

// namespace gives t a test namespace (node.Namespace) under the names the
// components expect by default (world claim, service account, config
// Secret) with worlds owned by the game's UID and GID: kubenode takes them
// as parameters, the product's defaults are provider's.
func namespace(t *testing.T, node *kubenode.Node, o kubenode.NamespaceOptions) *kubenode.Namespace {
	t.Helper()
	if o.WorldClaim == nil {
		o.WorldClaim = naming.WorldClaim
	}
	if o.OwnerUID == 0 {
		o.OwnerUID = provider.DefaultGameUID
	}
	if o.OwnerGID == 0 {
		o.OwnerGID = provider.DefaultGameGID
	}
	if o.ServiceAccount == "" {
		o.ServiceAccount = provider.DefaultServiceAccountName
	}
	if o.ConfigSecret == "" {
		o.ConfigSecret = provider.DefaultConfigSecretName
	}
	return node.Namespace(t, o)
}
