package kubenode

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/worldbackup/worldbackup/internal/pgtest"
	"github.com/worldbackup/worldbackup/internal/worldgen"
)

// NamespaceOptions say what a test namespace holds. The names the product
// expects (WorldClaim, ServiceAccount, ConfigSecret) and the game's UID and
// GID are parameters, given by the caller: kubenode knows no product. With
// them and nothing else, a namespace enforces Pod Security baseline with
// everything a backup of server "lobby" needs.
type NamespaceOptions struct {
	// Enforce is the Pod Security level enforced (pod-security.kubernetes.io/enforce); default baseline.
	Enforce string
	// Servers get a world claim each (WorldClaim), pre-filled with a
	// generated world; default ["lobby"].
	Servers []string
	// WorldClaim names the world claim of a server (required).
	WorldClaim func(server string) string
	// World is the generated world; default 1 MiB, seed 1.
	World worldgen.Options
	// Owner is the UID and GID owning the world and backup folders (the
	// game's; required, not root).
	OwnerUID, OwnerGID int
	// BackupClaim names the claim receiving archives; default "backups".
	BackupClaim string
	// ServiceAccount and ConfigSecret are the names the Jobs expect
	// (required).
	ServiceAccount string
	ConfigSecret   string
	// FelisTOML, when set, is the Secret's felis.toml instead of the default
	// (given the database URL as the pods reach it).
	FelisTOML func(podDatabaseURL string) string
	// Without leaves out prerequisites, to test what a user sees when one is
	// missing.
	WithoutServiceAccount, WithoutSecret, WithoutWorldClaims, WithoutBackupClaim bool
}

func (o NamespaceOptions) withDefaults() NamespaceOptions {
	if o.Enforce == "" {
		o.Enforce = "baseline"
	}
	if len(o.Servers) == 0 {
		o.Servers = []string{"lobby"}
	}
	if o.World.Size == 0 {
		o.World.Size = 1 << 20
	}
	if o.World.Seed == 0 {
		o.World.Seed = 1
	}
	if o.BackupClaim == "" {
		o.BackupClaim = "backups"
	}
	return o
}

// Validate reports options that cannot make a namespace.
func (o NamespaceOptions) Validate() error {
	switch o.Enforce {
	case "privileged", "baseline", "restricted":
	default:
		return fmt.Errorf("Enforce %q is not a Pod Security level (privileged, baseline, restricted)", o.Enforce)
	}
	switch {
	case o.WorldClaim == nil:
		return errors.New("WorldClaim is required: the world claim name of a server")
	case o.ServiceAccount == "" || o.ConfigSecret == "":
		return errors.New("ServiceAccount and ConfigSecret are required: the names the Jobs expect")
	case o.OwnerUID == 0 || o.OwnerGID == 0:
		return errors.New("OwnerUID and OwnerGID are required: the game's UID and GID")
	}
	return nil
}

// Namespace is a test's namespace and the host side of what it holds.
type Namespace struct {
	Name string
	// DatabaseURL is the catalog database as the test reaches it;
	// PodDatabaseURL the same database as the pods reach it (the Secret's),
	// through DatabaseProxy on the gateway IP (Blackhole it to make the
	// database unreachable from the pods).
	DatabaseURL, PodDatabaseURL string
	DatabaseProxy               *pgtest.Proxy
	// BackupClaim is the claim receiving archives, BackupDir its host folder.
	BackupClaim, BackupDir string
	// WorldDirs maps each server to its world claim's host folder.
	WorldDirs map[string]string
	// Options are the options after defaults.
	Options NamespaceOptions
}

// Namespace creates a namespace for t, deleted (with its volumes) when t
// ends. It waits for the claims to be Bound.
func (nd *Node) Namespace(t testing.TB, o NamespaceOptions) *Namespace {
	t.Helper()
	o = o.withDefaults()
	if err := o.Validate(); err != nil {
		t.Fatalf("kubenode: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := nd.Client.CoreV1()
	name := "wb-" + randomHex(4)
	ns := &Namespace{Name: name, BackupClaim: o.BackupClaim, WorldDirs: map[string]string{}, Options: o}

	_, err := c.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce":         o.Enforce,
		"pod-security.kubernetes.io/enforce-version": "latest",
	}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("kubenode: creating namespace %s: %v", name, err)
	}
	var pvs []string
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("kubenode: deleting namespace %s: %v", name, err)
		}
		for _, pv := range pvs {
			if err := c.PersistentVolumes().Delete(ctx, pv, metav1.DeleteOptions{}); err != nil {
				t.Errorf("kubenode: deleting volume %s: %v", pv, err)
			}
		}
	})

	if !o.WithoutServiceAccount {
		_, err := c.ServiceAccounts(name).Create(ctx, &corev1.ServiceAccount{
			ObjectMeta:                   metav1.ObjectMeta{Name: o.ServiceAccount},
			AutomountServiceAccountToken: new(false),
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("kubenode: creating service account %s/%s: %v", name, o.ServiceAccount, err)
		}
	}

	ns.DatabaseURL = pgtest.URL(t)
	ns.DatabaseProxy = pgtest.NewProxyOn(t, nd.GatewayIP, pgtest.Target(t, ns.DatabaseURL))
	ns.PodDatabaseURL = ns.DatabaseProxy.URL(t, ns.DatabaseURL)
	if !o.WithoutSecret {
		felis := fmt.Sprintf("[database]\nurl = %q\n", ns.PodDatabaseURL)
		if o.FelisTOML != nil {
			felis = o.FelisTOML(ns.PodDatabaseURL)
		}
		_, err := c.Secrets(name).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: o.ConfigSecret},
			Data:       map[string][]byte{"felis.toml": []byte(felis)},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("kubenode: creating Secret %s/%s: %v", name, o.ConfigSecret, err)
		}
	}

	claim := func(claimName, dir string) {
		pv := name + "-" + claimName
		pvs = append(pvs, pv)
		if err := nd.hostPathClaim(ctx, name, claimName, pv, dir); err != nil {
			t.Fatalf("kubenode: %v", err)
		}
	}
	for _, s := range o.Servers {
		dir := filepath.Join(t.TempDir(), "world")
		if _, err := worldgen.Generate(dir, o.World); err != nil {
			t.Fatalf("kubenode: generating the world of %s: %v", s, err)
		}
		if err := chownTree(dir, o.OwnerUID, o.OwnerGID); err != nil {
			t.Fatalf("kubenode: %v", err)
		}
		ns.WorldDirs[s] = dir
		if !o.WithoutWorldClaims {
			claim(o.WorldClaim(s), dir)
		}
	}
	ns.BackupDir = filepath.Join(t.TempDir(), "backups")
	if err := os.Mkdir(ns.BackupDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(ns.BackupDir, o.OwnerUID, o.OwnerGID); err != nil {
		t.Fatal(err)
	}
	if !o.WithoutBackupClaim {
		claim(o.BackupClaim, ns.BackupDir)
	}
	if err := nd.waitBound(ctx, name); err != nil {
		t.Fatalf("kubenode: %v", err)
	}
	return ns
}

// hostPathClaim creates a PersistentVolume on dir bound in advance to a
// claim, and the claim.
func (nd *Node) hostPathClaim(ctx context.Context, ns, claim, pv, dir string) error {
	c := nd.Client.CoreV1()
	size := resource.MustParse("1Gi")
	dirType := corev1.HostPathDirectory
	_, err := c.PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pv},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              "",
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: claim},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &dirType}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating volume %s: %w", pv, err)
	}
	_, err = c.PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: claim},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: new(""),
			VolumeName:       pv,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating claim %s/%s: %w", ns, claim, err)
	}
	return nil
}

// waitBound waits for every claim in ns to be Bound.
func (nd *Node) waitBound(ctx context.Context, ns string) error {
	var pending []string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		list, err := nd.Client.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		pending = pending[:0]
		for _, c := range list.Items {
			if c.Status.Phase != corev1.ClaimBound {
				pending = append(pending, c.Name+" "+string(c.Status.Phase))
			}
		}
		return len(pending) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("claims in %s not Bound: %v: %w", ns, pending, err)
	}
	return nil
}

// PodLogs returns the logs of every container of the pods in ns that match
// selector (a label selector; empty for all), each headed by its pod and
// container.
func (nd *Node) PodLogs(t testing.TB, ns, selector string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pods, err := nd.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatalf("kubenode: listing pods in %s: %v", ns, err)
	}
	var b bytes.Buffer
	for _, p := range pods.Items {
		for _, c := range p.Spec.Containers {
			fmt.Fprintf(&b, "=== %s/%s (%s)\n", p.Name, c.Name, p.Status.Phase)
			raw, err := nd.Client.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name}).DoRaw(ctx)
			if err != nil {
				fmt.Fprintf(&b, "(no logs: %v)\n", err)
				continue
			}
			b.Write(raw)
			if len(raw) > 0 && !bytes.HasSuffix(raw, []byte("\n")) {
				b.WriteByte('\n')
			}
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

func chownTree(dir string, uid, gid int) error {
	return filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(p, uid, gid); err != nil {
			return fmt.Errorf("handing %s to %d:%d: %w", p, uid, gid, err)
		}
		return nil
	})
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
