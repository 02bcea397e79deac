package nodetest

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/worldbackup/worldbackup/internal/kubenode"
	"github.com/worldbackup/worldbackup/internal/stacktest"
	"github.com/worldbackup/worldbackup/program/deploy"
	"github.com/worldbackup/worldbackup/provider/naming"
)

// TestRestrictedOnNode: with securityMode restricted, a backup runs in a
// namespace enforcing the restricted Pod Security Standard.
func TestRestrictedOnNode(t *testing.T) {
	node := kubenode.Require(t)
	tools := stacktest.Require(t)
	ns := namespace(t, node, kubenode.NamespaceOptions{Enforce: "restricted"})
	cfg := stackConfig(node, ns, "r1")
	cfg["worldbackup:securityMode"] = "restricted"
	stack := tools.InlineStack(t, "node", deploy.Program, cfg)
	preview(t, stack)
	_, out := up(t, node, ns, stack)
	jobComplete(t, node, ns.Name, out.jobName)
	checkArchive(t, ns, out)
}

// gamePodLabel is the label the StatefulSet controller gives its pods.
const gamePodLabel = "statefulset.kubernetes.io/pod-name"

// TestGamePodOnNode: with a game server pod (<server>-0, holding the world
// claim) running, the backup's Job prefers its node and completes next to
// it, the world claim mounted by both.
func TestGamePodOnNode(t *testing.T) {
	node := kubenode.Require(t)
	tools := stacktest.Require(t)
	ns := namespace(t, node, kubenode.NamespaceOptions{})
	game := startGamePod(t, node, ns, "lobby")

	stack := tools.InlineStack(t, "node", deploy.Program, stackConfig(node, ns, "r1"))
	_, out := up(t, node, ns, stack)
	jobComplete(t, node, ns.Name, out.jobName)
	checkArchive(t, ns, out)

	job, err := node.Client.BatchV1().Jobs(ns.Name).Get(t.Context(), out.jobName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	aff := job.Spec.Template.Spec.Affinity
	if aff == nil || aff.PodAffinity == nil || len(aff.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Fatalf("the live Job has no preferred pod affinity: %+v", aff)
	}
	term := aff.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm
	if got := term.LabelSelector.MatchLabels[gamePodLabel]; got != "lobby-0" || term.TopologyKey != corev1.LabelHostname {
		t.Errorf("pod affinity term %+v, want %s=lobby-0 on %s", term, gamePodLabel, corev1.LabelHostname)
	}
	pods, err := node.Client.CoreV1().Pods(ns.Name).List(t.Context(), metav1.ListOptions{LabelSelector: "job-name=" + out.jobName})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("the Job's pods: %v, %v", pods, err)
	}
	if pods.Items[0].Spec.NodeName != game.Spec.NodeName {
		t.Errorf("the backup pod ran on %q, the game pod on %q", pods.Items[0].Spec.NodeName, game.Spec.NodeName)
	}
	if g, err := node.Client.CoreV1().Pods(ns.Name).Get(t.Context(), game.Name, metav1.GetOptions{}); err != nil || g.Status.Phase != corev1.PodRunning {
		t.Errorf("the game pod is no longer running after the backup (%v)", err)
	}
}

// startGamePod runs a stand-in game server for server: the pause image,
// named and labelled as a StatefulSet's first pod, mounting the world claim.
func startGamePod(t *testing.T, node *kubenode.Node, ns *kubenode.Namespace, server string) *corev1.Pod {
	t.Helper()
	name := server + "-0"
	pods := node.Client.CoreV1().Pods(ns.Name)
	_, err := pods.Create(t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{gamePodLabel: name}},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: new(false),
			Containers: []corev1.Container{{
				Name:            "game",
				Image:           node.PauseImage,
				ImagePullPolicy: corev1.PullNever,
				VolumeMounts:    []corev1.VolumeMount{{Name: "world", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{{Name: "world", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: naming.WorldClaim(server)},
			}}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the game pod: %v", err)
	}
	var pod *corev1.Pod
	err = wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pod, err = pods.Get(ctx, name, metav1.GetOptions{})
		return err == nil && pod.Status.Phase == corev1.PodRunning, nil
	})
	if err != nil {
		t.Fatalf("the game pod is not running after a minute: %+v", pod.Status)
	}
	return pod
}

// TestStateHoldsNoSecrets: the stack state (`pulumi stack export`) holds
// neither felis.toml (the database URL and password stay in the Secret)
// nor the kubeconfig's credentials, given as the file's contents.
func TestStateHoldsNoSecrets(t *testing.T) {
	node := kubenode.Require(t)
	tools := stacktest.Require(t)
	ns := namespace(t, node, kubenode.NamespaceOptions{})
	kubeconfig, err := os.ReadFile(node.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg := stackConfig(node, ns, "r1")
	delete(cfg, "worldbackup:clusters[0].kubeconfig")
	stack := tools.InlineStack(t, "node", deploy.Program, cfg)
	err = stack.SetConfigWithOptions(t.Context(), "worldbackup:clusters[0].kubeconfig",
		auto.ConfigValue{Value: string(kubeconfig), Secret: true}, &auto.ConfigOptions{Path: true})
	if err != nil {
		t.Fatal(err)
	}
	preview(t, stack)
	_, out := up(t, node, ns, stack)
	jobComplete(t, node, ns.Name, out.jobName)

	// `pulumi stack export` as a user runs it (the Automation API's Export
	// adds --show-secrets).
	ws := stack.Workspace()
	state := tools.CLI(t, ws.WorkDir(), ws.GetEnvVars(), "stack", "export", "--stack", stack.Name())
	if !json.Valid([]byte(state)) || !strings.Contains(state, out.jobName) {
		t.Fatalf("the export does not look like this stack's state:\n%.2000s", state)
	}
	secrets := map[string]string{
		"the database URL as the pods reach it": ns.PodDatabaseURL,
		"the database URL":                      ns.DatabaseURL,
		"a postgres:// URL":                     "postgres://",
		"felis.toml's [database] table":         "[database]",
	}
	for _, field := range []string{"client-key-data", "client-certificate-data", "certificate-authority-data", "token"} {
		if v := yamlField(string(kubeconfig), field); v != "" {
			secrets["the kubeconfig's "+field] = v
		}
	}
	if len(secrets) < 5 {
		t.Fatalf("found no credentials in the kubeconfig to look for: %v", secrets)
	}
	for what, s := range secrets {
		if strings.Contains(state, s) {
			t.Errorf("the stack state holds %s in plaintext", what)
		}
	}
}

// yamlField is the value of the first `field: value` line of a YAML text.
func yamlField(doc, field string) string {
	for line := range strings.Lines(doc) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
