package nodetest

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/worldbackup/worldbackup/internal/gameserver"
	"github.com/worldbackup/worldbackup/internal/kubenode"
	"github.com/worldbackup/worldbackup/internal/stacktest"
	"github.com/worldbackup/worldbackup/program/deploy"
	"github.com/worldbackup/worldbackup/provider"
	"github.com/worldbackup/worldbackup/provider/naming"
)

// TestRconOnNode: with a game server pod (the gameserver stand-in, serving
// RCON and rewriting its region file while autosave is on) running on the
// world claim, the backup Job that `pulumi up` runs reaches it over RCON and
// quiesces it: the server receives exactly save-off, save-all flush,
// save-on, and the archive holds, untorn, the generation that the flush
// wrote.
// The password, given only in the Secret, appears neither in the stack
// state, nor in the Job, nor in the backup pod's logs or status.
//
// The Job reaches the server at its pod IP: the test node has no cluster
// DNS and no kube-proxy (no iptables on the VM), so a Service name would not
// resolve there.
func TestRconOnNode(t *testing.T) {
	node := kubenode.Require(t)
	tools := stacktest.Require(t)
	ns := namespace(t, node, kubenode.NamespaceOptions{})
	const server = "lobby"
	password := "rcon-" + randomHex(t, 16)

	secret := server + "-rcon" // the component's default Secret
	_, err := node.Client.CoreV1().Secrets(ns.Name).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secret},
		Data:       map[string][]byte{provider.DefaultRconSecretKey: []byte(password)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the RCON Secret: %v", err)
	}
	game := startRconGamePod(t, node, ns, server, secret)

	cfg := stackConfig(node, ns, "r1")
	cfg["worldbackup:format"] = "tar" // archivedFile reads the region file from the tar archive
	cfg["worldbackup:servers[0].rcon.address"] = net.JoinHostPort(game.Status.PodIP, strconv.Itoa(provider.DefaultRconPort))
	stack := tools.InlineStack(t, "node", deploy.Program, cfg)
	_, out := up(t, node, ns, stack)
	jobComplete(t, node, ns.Name, out.jobName)
	checkArchive(t, ns, out)

	t.Run("the server received save-off, save-all flush, save-on", func(t *testing.T) {
		logs := podLog(t, node, ns.Name, game.Name)
		var cmds []string
		for line := range strings.Lines(logs) {
			if cmd, ok := strings.CutPrefix(strings.TrimSpace(line), "rcon: "); ok {
				cmds = append(cmds, cmd)
			}
		}
		if want := []string{"save-off", "save-all flush", "save-on"}; !slices.Equal(cmds, want) {
			t.Errorf("the game server received %q, want %q; its log:\n%s", cmds, want, logs)
		}
	})

	t.Run("the archive holds one generation of the region file", func(t *testing.T) {
		region := archivedFile(t, hostPath(t, ns, out.archiveRef), "world/"+gameserver.RegionPath)
		gen, err := gameserver.Generation(region)
		if err != nil {
			t.Fatalf("the archived %s: %v", gameserver.RegionPath, err)
		}
		logs := podLog(t, node, ns.Name, game.Name)
		var flushed []string
		for line := range strings.Lines(logs) {
			if g, ok := strings.CutPrefix(strings.TrimSpace(line), "gameserver: flushed generation "); ok {
				flushed = append(flushed, g)
			}
		}
		if len(flushed) != 1 || flushed[0] != strconv.FormatUint(gen, 10) {
			t.Errorf("the archived region file holds generation %d; the server's flushes wrote %q; its log:\n%s", gen, flushed, logs)
		}
		t.Logf("the archive holds generation %d, the one save-all flush wrote", gen)
	})

	t.Run("the password is nowhere", func(t *testing.T) {
		ws := stack.Workspace()
		state := tools.CLI(t, ws.WorkDir(), ws.GetEnvVars(), "stack", "export", "--stack", stack.Name())
		if !json.Valid([]byte(state)) || !strings.Contains(state, out.jobName) || !strings.Contains(state, secret) {
			t.Fatalf("the export does not look like this stack's state (its Job and RCON Secret):\n%.2000s", state)
		}
		job, err := node.Client.BatchV1().Jobs(ns.Name).Get(t.Context(), out.jobName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pods, err := node.Client.CoreV1().Pods(ns.Name).List(t.Context(), metav1.ListOptions{LabelSelector: "job-name=" + out.jobName})
		if err != nil || len(pods.Items) == 0 {
			t.Fatalf("the Job's pods: %v, %v", pods, err)
		}
		var terminated []string
		for _, p := range pods.Items {
			for _, s := range p.Status.ContainerStatuses {
				if s.State.Terminated != nil {
					terminated = append(terminated, s.State.Terminated.Message)
				}
			}
		}
		if len(terminated) == 0 {
			t.Fatalf("no terminated container in the Job's pods: %+v", pods.Items)
		}
		places := map[string]string{
			"the stack state (pulumi stack export)":   state,
			"the Job (its args, env, volumes)":        mustJSON(t, job),
			"the backup pods (spec and status)":       mustJSON(t, pods),
			"the backup pods' termination messages":   strings.Join(terminated, "\n"),
			"the backup pods' logs":                   node.PodLogs(t, ns.Name, "job-name="+out.jobName),
			"the stack config's file (Pulumi.*.yaml)": stackConfigFiles(t, ws.WorkDir()),
		}
		for where, text := range places {
			if strings.Contains(text, password) {
				t.Errorf("the RCON password is in %s", where)
			}
		}
	})
}

// startRconGamePod runs the gameserver stand-in for server as <server>-0
// (labelled as a StatefulSet's first pod): the world claim mounted
// read-write at /data (the world at /data/world), the password read from
// secret mounted at /etc/rcon, RCON on 25575. It returns the pod once RCON
// accepts connections.
func startRconGamePod(t *testing.T, node *kubenode.Node, ns *kubenode.Namespace, server, secret string) *corev1.Pod {
	t.Helper()
	name := server + "-0"
	pods := node.Client.CoreV1().Pods(ns.Name)
	_, err := pods.Create(t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{gamePodLabel: name}},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: new(false),
			Containers: []corev1.Container{{
				Name:            "game",
				Image:           node.GameServerImage(t),
				ImagePullPolicy: corev1.PullNever,
				Args:            []string{"--world", "/data/world", "--listen", ":25575", "--password-file", "/etc/rcon/" + provider.DefaultRconSecretKey},
				Ports:           []corev1.ContainerPort{{Name: "rcon", ContainerPort: provider.DefaultRconPort}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("rcon")}},
					PeriodSeconds: 1,
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "world", MountPath: "/data"},
					{Name: "rcon", MountPath: "/etc/rcon", ReadOnly: true},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "world", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: naming.WorldClaim(server)},
				}},
				{Name: "rcon", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the game pod: %v", err)
	}
	// The server writes into the world folder until it stops: stop it
	// before the folder is removed (cleanups run last first).
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// A graceful deletion: the pod object goes only once the kubelet has
		// stopped its container (a forced one goes at once, while the server
		// may still write).
		if err := pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(1))}); err != nil {
			t.Errorf("deleting the game pod: %v", err)
			return
		}
		err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			_, err := pods.Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Errorf("the game pod is still there a minute after its deletion")
		}
	})
	var pod *corev1.Pod
	err = wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pod, err = pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil || pod.Status.PodIP == "" {
			return false, nil
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the game pod is not ready after two minutes: %+v\n%s", pod.Status, node.PodLogs(t, ns.Name, gamePodLabel+"="+name))
	}
	return pod
}

// podLog is the log of a pod's one container.
func podLog(t *testing.T, node *kubenode.Node, ns, pod string) string {
	t.Helper()
	raw, err := node.Client.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{}).DoRaw(t.Context())
	if err != nil {
		t.Fatalf("the logs of %s/%s: %v", ns, pod, err)
	}
	return string(raw)
}

// archivedFile is the content of the file at rel in a .tar.zst archive.
func archivedFile(t *testing.T, archive, rel string) []byte {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := zstd.NewReader(f)
	if err != nil {
		t.Fatalf("reading %s as zstd: %v", archive, err)
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("%s holds no %s; it holds %d entries, e.g. %q", archive, rel, len(names), names[:min(len(names), 10)])
		}
		if err != nil {
			t.Fatalf("reading %s: %v", archive, err)
		}
		if strings.TrimPrefix(h.Name, "./") != rel {
			names = append(names, h.Name)
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("reading %s from %s: %v", rel, archive, err)
		}
		return b
	}
}

// stackConfigFiles is the text of the workspace's Pulumi.<stack>.yaml files.
func stackConfigFiles(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "Pulumi.") && strings.HasSuffix(e.Name(), ".yaml") {
			data, err := os.ReadFile(dir + "/" + e.Name())
			if err != nil {
				t.Fatal(err)
			}
			b.Write(data)
		}
	}
	return b.String()
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
