package preflight_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/worldbackup/worldbackup/provider/internal/jobtest"
	"github.com/worldbackup/worldbackup/provider/jobspec"
	"github.com/worldbackup/worldbackup/provider/preflight"
)

// secretValue is the config's contents: it must never reach a message.
const secretValue = "postgres://felis:hunter2@db:5432/felis"

func backupRequirements(mode jobspec.SecurityMode) preflight.Requirements {
	b := jobtest.DefaultBackup()
	if mode == jobspec.Restricted {
		b.Identity = jobspec.Identity{Mode: jobspec.Restricted, RunAsUser: 1000, RunAsGroup: 1000, FSGroup: 1000}
	}
	req := preflight.FromJob(jobspec.BuildBackup(b), map[string][]string{"felis-config": {"felis.toml"}})
	req.SecurityHint = "set securityMode restricted"
	return req
}

func namespace(enforce string) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "minecraft"}}
	if enforce != "" {
		ns.Labels = map[string]string{"pod-security.kubernetes.io/enforce": enforce}
	}
	return ns
}

func claim(name string, phase corev1.PersistentVolumeClaimPhase, class string) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "minecraft"},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: phase},
	}
	if class != "" {
		c.Spec.StorageClassName = &class
	}
	return c
}

// complete is everything the default backup Job needs, in a namespace that
// enforces baseline.
func complete() []runtime.Object {
	return []runtime.Object{
		namespace("baseline"),
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "felis-restore", Namespace: "minecraft"}},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "felis-config", Namespace: "minecraft"},
			Data:       map[string][]byte{"felis.toml": []byte(secretValue)},
		},
		claim("world-survival-0", corev1.ClaimBound, ""),
		claim("world-backups", corev1.ClaimBound, ""),
	}
}

// without returns objs without the object of kind/name.
func without(objs []runtime.Object, name string, kind any) []runtime.Object {
	return slices.DeleteFunc(slices.Clone(objs), func(o runtime.Object) bool {
		m, _ := o.(metav1.Object)
		return m.GetName() == name && sameType(o, kind)
	})
}

func sameType(a, b any) bool {
	switch a.(type) {
	case *corev1.Namespace:
		_, ok := b.(*corev1.Namespace)
		return ok
	case *corev1.ServiceAccount:
		_, ok := b.(*corev1.ServiceAccount)
		return ok
	case *corev1.Secret:
		_, ok := b.(*corev1.Secret)
		return ok
	case *corev1.PersistentVolumeClaim:
		_, ok := b.(*corev1.PersistentVolumeClaim)
		return ok
	}
	return false
}

func replace(objs []runtime.Object, o runtime.Object) []runtime.Object {
	m := o.(metav1.Object)
	return append(without(objs, m.GetName(), o), o)
}

func TestCheck(t *testing.T) {
	waitClass := storagev1.VolumeBindingWaitForFirstConsumer
	tests := []struct {
		name     string
		objs     []runtime.Object
		mode     jobspec.SecurityMode
		want     []string // one substring per problem, in order
		wantFix  []string // substrings of the fixes
		wantNone bool
	}{
		{name: "everything there", objs: complete(), wantNone: true},
		{name: "nothing there: every piece with its command", objs: nil,
			want: []string{`namespace "minecraft" does not exist`, `service account "felis-restore"`, `Secret "felis-config"`,
				`PersistentVolumeClaim "world-survival-0"`, `PersistentVolumeClaim "world-backups"`},
			wantFix: []string{"kubectl create namespace minecraft", "kubectl -n minecraft create serviceaccount felis-restore",
				"kubectl -n minecraft create secret generic felis-config"}},
		{name: "Secret without felis.toml", objs: replace(complete(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "felis-config", Namespace: "minecraft"},
			Data:       map[string][]byte{"config.toml": []byte(secretValue)},
		}), want: []string{`Secret "felis-config" in namespace minecraft has no key felis.toml`}},
		{name: "claim Pending", objs: replace(complete(), claim("world-backups", corev1.ClaimPending, "")),
			want:    []string{`PersistentVolumeClaim "world-backups" in namespace minecraft is Pending, not Bound`},
			wantFix: []string{"kubectl -n minecraft describe pvc world-backups"}},
		{name: "claim Pending on a WaitForFirstConsumer class is fine",
			objs: append(replace(complete(), claim("world-backups", corev1.ClaimPending, "local")),
				&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local"}, VolumeBindingMode: &waitClass}),
			wantNone: true},
		{name: "claim Lost", objs: replace(complete(), claim("world-survival-0", corev1.ClaimLost, "")),
			want: []string{`"world-survival-0" in namespace minecraft is Lost, not Bound`}},
		{name: "baseline pod in a restricted namespace", objs: replace(complete(), namespace("restricted")),
			want:    []string{`namespace "minecraft" enforces the restricted Pod Security Standard, which refuses the Job's pod`},
			wantFix: []string{"set securityMode restricted", "pod-security.kubernetes.io/enforce=baseline"}},
		{name: "restricted pod in a restricted namespace", objs: replace(complete(), namespace("restricted")),
			mode: jobspec.Restricted, wantNone: true},
		{name: "baseline pod in an unlabelled namespace", objs: replace(complete(), namespace("")), wantNone: true},
		{name: "invalid enforce label", objs: replace(complete(), namespace("strict")),
			want: []string{"invalid Pod Security label"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mode := tt.mode
			if mode == "" {
				mode = jobspec.Baseline
			}
			res, err := preflight.Check(t.Context(), fake.NewClientset(tt.objs...), backupRequirements(mode))
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantNone {
				if len(res.Problems) != 0 {
					t.Fatalf("problems = %+v, want none", res.Problems)
				}
				if res.Err("j", "at preview") != nil {
					t.Fatal("Err() != nil without problems")
				}
				return
			}
			if len(res.Problems) != len(tt.want) {
				t.Fatalf("problems = %+v, want %d", res.Problems, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.Contains(res.Problems[i].What, w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, res.Problems[i].What, w)
				}
			}
			msg := res.Err("survival-backup-x", "at up").Error()
			for _, f := range tt.wantFix {
				if !strings.Contains(msg, f) {
					t.Errorf("message %q lacks the fix %q", msg, f)
				}
			}
			if strings.Contains(msg, "hunter2") {
				t.Fatalf("message leaks the Secret's value: %q", msg)
			}
			if got := strings.Count(msg, "\n  - "); got != len(tt.want) {
				t.Errorf("message lists %d problems, want %d: %q", got, len(tt.want), msg)
			}
		})
	}
}

func TestCheckForbiddenIsUnverified(t *testing.T) {
	c := fake.NewClientset(complete()...)
	c.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "felis-config", nil)
	})
	res, err := preflight.Check(t.Context(), c, backupRequirements(jobspec.Baseline))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Problems) != 0 {
		t.Fatalf("problems = %+v, want none (a forbidden lookup proves nothing missing)", res.Problems)
	}
	if len(res.Unverified) != 1 || !strings.Contains(res.Unverified[0], `Secret "felis-config"`) {
		t.Fatalf("unverified = %q, want the Secret", res.Unverified)
	}
}

func TestCheckUnreachableIsAnError(t *testing.T) {
	c := fake.NewClientset()
	c.PrependReactor("get", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("connection refused")
	})
	if _, err := preflight.Check(t.Context(), c, backupRequirements(jobspec.Baseline)); err == nil || !strings.Contains(err.Error(), "namespace") {
		t.Fatalf("err = %v, want an error naming the lookup", err)
	}
}

// TestCheckOptionalSecretIsAWarning: the notify Secret is mounted
// optionally, so its absence (or its key's) is a warning with the command
// that makes it, never a problem that stops the Job.
func TestCheckOptionalSecretIsAWarning(t *testing.T) {
	b := jobtest.DefaultBackup()
	b.Notify = &jobspec.Notify{SecretName: "felis-notify", Key: "url"}
	req := preflight.FromJob(jobspec.BuildBackup(b), map[string][]string{"felis-config": {"felis.toml"}})
	if _, ok := req.Secrets["felis-notify"]; ok || !slices.Equal(req.OptionalSecrets["felis-notify"], []string{"url"}) {
		t.Fatalf("secrets %v, optional %v: want felis-notify optional with key url", req.Secrets, req.OptionalSecrets)
	}
	hook := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "felis-notify", Namespace: "minecraft"},
		Data: map[string][]byte{"webhook": []byte("https://hooks.example/SECRET")}}
	for _, tt := range []struct {
		name string
		objs []runtime.Object
		want string
	}{
		{"missing", complete(), `Secret "felis-notify" in namespace minecraft does not exist: the Job runs without it`},
		{"without its key", append(complete(), hook), `Secret "felis-notify" in namespace minecraft has no key url`},
		{"there", append(complete(), &corev1.Secret{ObjectMeta: hook.ObjectMeta, Data: map[string][]byte{"url": []byte("https://hooks.example/SECRET")}}), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := preflight.Check(t.Context(), fake.NewClientset(tt.objs...), req)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Problems) != 0 {
				t.Fatalf("problems = %+v, want none", res.Problems)
			}
			switch {
			case tt.want == "" && len(res.Warnings) != 0:
				t.Fatalf("warnings = %q, want none", res.Warnings)
			case tt.want != "" && (len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], tt.want) ||
				!strings.Contains(res.Warnings[0], "kubectl -n minecraft create secret generic felis-notify --from-literal=url=")):
				t.Fatalf("warnings = %q, want one containing %q and the command", res.Warnings, tt.want)
			}
			if strings.Contains(strings.Join(res.Warnings, " "), "SECRET") {
				t.Fatalf("a warning holds the Secret's value: %q", res.Warnings)
			}
		})
	}
}

func TestFromJob(t *testing.T) {
	req := preflight.FromJob(jobspec.BuildRestore(jobtest.DefaultRestore()), nil)
	if req.Namespace != "minecraft" || req.ServiceAccount != "felis-restore" || req.Job == "" {
		t.Fatalf("req = %+v", req)
	}
	if len(req.Secrets) != 0 {
		t.Errorf("restore needs Secrets %v, want none", req.Secrets)
	}
	if !slices.Equal(req.Claims, []string{"world-survival-0", "world-backups"}) {
		t.Errorf("claims = %q", req.Claims)
	}
}

func TestClientNeverEchoesKubeconfigContents(t *testing.T) {
	_, err := preflight.Client(preflight.Cluster{Kubeconfig: "not: [a kubeconfig, token hunter2"})
	if err == nil {
		t.Fatal("Client accepted a broken kubeconfig")
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("error echoes the kubeconfig's contents: %v", err)
	}
}

func TestClientPathOrContents(t *testing.T) {
	const kc = `apiVersion: v1
kind: Config
clusters:
- {name: a, cluster: {server: "https://a.example:6443"}}
- {name: b, cluster: {server: "https://b.example:6443"}}
users:
- {name: u, user: {token: t}}
contexts:
- {name: ca, context: {cluster: a, user: u}}
- {name: cb, context: {cluster: b, user: u}}
current-context: ca
`
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cl   preflight.Cluster
		want string
	}{
		{"contents, current context", preflight.Cluster{Kubeconfig: kc}, "https://a.example:6443"},
		{"contents, other context", preflight.Cluster{Kubeconfig: kc, Context: "cb"}, "https://b.example:6443"},
		{"path, other context", preflight.Cluster{Kubeconfig: path, Context: "cb"}, "https://b.example:6443"},
		{"ambient KUBECONFIG", preflight.Cluster{}, "https://a.example:6443"},
	}
	t.Setenv("KUBECONFIG", path)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := preflight.Client(tt.cl)
			if err != nil {
				t.Fatal(err)
			}
			cs, ok := c.(*kubernetes.Clientset)
			if !ok {
				t.Fatalf("client is %T", c)
			}
			if got := cs.CoreV1().RESTClient().Get().URL().Host; "https://"+got != tt.want {
				t.Fatalf("server = %s, want %s", got, tt.want)
			}
		})
	}
}

// TestCheckNamesTheInputs: a missing Secret, key or claim is as likely a
// typo in the input that names it as a missing object, so each message
// names that input; a Secret without the key lists the keys it has (never a
// value), and a note says what the hint's file must hold.
func TestCheckNamesTheInputs(t *testing.T) {
	req := func() preflight.Requirements {
		r := backupRequirements(jobspec.Baseline)
		r.SecretInputs = map[string]string{"felis-config": "configSecretName"}
		r.KeyInputs = map[string]string{"felis-config/felis.toml": "configKey"}
		r.ClaimInputs = map[string]string{"world-backups": "backupClaimName"}
		r.SecretNotes = map[string]string{"felis-config": "felis.toml: the catalog's settings"}
		r.SecretHints = map[string]string{"felis-config": "kubectl -n minecraft create secret generic felis-config --from-file=felis.toml"}
		return r
	}
	manyKeys := map[string][]byte{}
	for i := range 12 {
		manyKeys[fmt.Sprintf("k%02d", i)] = []byte(secretValue)
	}
	for _, tc := range []struct {
		name string
		objs []runtime.Object
		want []string
	}{
		{"missing Secret", without(complete(), "felis-config", &corev1.Secret{}), []string{
			"kubectl -n minecraft create secret generic felis-config --from-file=felis.toml (felis.toml: the catalog's settings)",
			"or, if the Secret has another name, set configSecretName to it"}},
		{"Secret without the key", replace(complete(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "felis-config", Namespace: "minecraft"},
			Data:       map[string][]byte{"config.toml": []byte(secretValue), "other": []byte(secretValue)},
		}), []string{"has no key felis.toml (or it is empty); its keys: config.toml, other",
			"add the key: kubectl -n minecraft create secret generic felis-config --from-file=felis.toml --dry-run=client -o yaml | kubectl apply -f - (felis.toml: the catalog's settings)",
			"or, if another key holds it, set configKey to that key"}},
		{"Secret with many keys", replace(complete(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "felis-config", Namespace: "minecraft"}, Data: manyKeys,
		}), []string{"its keys: k00, k01, k02, k03, k04, k05, k06, k07, k08, k09 and 2 more"}},
		{"empty Secret", replace(complete(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "felis-config", Namespace: "minecraft"},
		}), []string{"its keys: none"}},
		{"missing claim", without(complete(), "world-backups", &corev1.PersistentVolumeClaim{}), []string{
			"or, if the claim has another name, set backupClaimName to it"}},
		{"missing claim without its input", without(complete(), "world-survival-0", &corev1.PersistentVolumeClaim{}), []string{
			"or, if the claim has another name, set the claim name input to it"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := preflight.Check(t.Context(), fake.NewClientset(tc.objs...), req())
			if err != nil {
				t.Fatal(err)
			}
			e := res.Err("survival-backup-x", "at preview")
			if e == nil {
				t.Fatal("no problem found")
			}
			for _, w := range tc.want {
				if !strings.Contains(e.Error(), w) {
					t.Errorf("message lacks %q:\n%s", w, e)
				}
			}
			if strings.Contains(e.Error(), "hunter2") {
				t.Fatalf("message leaks a Secret's value: %s", e)
			}
		})
	}
}
