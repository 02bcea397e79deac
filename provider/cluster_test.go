package provider

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/worldbackup/worldbackup/provider/jobspec"
)

// emptyCluster is an API server that has nothing: every lookup is 404. It
// counts the requests.
func emptyCluster(t *testing.T) (kubeconfig string, requests *atomic.Int64) {
	kubeconfig, requests, _ = recordingCluster(t)
	return kubeconfig, requests
}

// recordingCluster is emptyCluster that also records each request's method
// and path.
func recordingCluster(t *testing.T) (kubeconfig string, requests *atomic.Int64, seen func() []string) {
	t.Helper()
	requests = &atomic.Int64{}
	var mu sync.Mutex
	var log []string
	seen = func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(log)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		mu.Lock()
		log = append(log, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"%s not found"}`, r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	return kubeconfigFor(srv.URL), requests, seen
}

func kubeconfigFor(server string) string {
	return `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "` + server + `"}
users:
- name: u
  user: {token: t}
contexts:
- name: ctx
  context: {cluster: c, user: u}
current-context: ctx
`
}

// dryRun makes a mocked program run as a preview.
func dryRun(info *pulumi.RunInfo) { info.DryRun = true }

func runMockedPreview(t *testing.T, program pulumi.RunFunc) (*mocks, error) {
	t.Helper()
	m := &mocks{}
	err := pulumi.RunErr(program, pulumi.WithMocks("project", "stack", m), dryRun)
	return m, err
}

func TestPreflightAtPreviewAndUp(t *testing.T) {
	backup := func(kubeconfig string, preflight *bool) pulumi.RunFunc {
		return func(ctx *pulumi.Context) error {
			a := validArgs()
			a.Kubeconfig, a.Preflight = kubeconfig, preflight
			_, err := NewWorldBackup(ctx, "survival", a)
			return err
		}
	}
	restore := func(kubeconfig string) pulumi.RunFunc {
		return func(ctx *pulumi.Context) error {
			a := validRestoreArgs()
			a.Kubeconfig = kubeconfig
			_, err := NewWorldRestore(ctx, "survival-restore", a)
			return err
		}
	}

	t.Run("backup in an empty cluster: one error listing every piece", func(t *testing.T) {
		kc, requests := emptyCluster(t)
		m, err := runMockedPreview(t, backup(kc, nil))
		if err == nil {
			t.Fatal("preview passed against a cluster with nothing in it")
		}
		for _, want := range []string{
			"worldbackup: the cluster lacks what Job survival-backup-20250601-0300 needs",
			"kubectl create namespace minecraft",
			"kubectl -n minecraft create serviceaccount felis-restore",
			"kubectl -n minecraft create secret generic felis-config --from-file=felis.toml",
			`PersistentVolumeClaim "world-survival-0"`, `PersistentVolumeClaim "world-backups"`,
			"set preflight false",
			// A typo in an input is as likely as a missing object.
			"or, if the Secret has another name, set configSecretName to it",
			"or, if the claim has another name, set worldClaimName to it",
			"or, if the claim has another name, set backupClaimName to it",
		} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error lacks %q:\n%v", want, err)
			}
		}
		if requests.Load() == 0 {
			t.Error("no request reached the API server")
		}
		if len(m.resources) != 0 {
			t.Errorf("registered %d resources despite the failed preflight", len(m.resources))
		}
	})
	t.Run("restore needs no Secret", func(t *testing.T) {
		kc, _ := emptyCluster(t)
		_, err := runMockedPreview(t, restore(kc))
		if err == nil || !strings.Contains(err.Error(), "worldrestore: the cluster lacks") {
			t.Fatalf("err = %v, want the restore's preflight error", err)
		}
		if strings.Contains(err.Error(), "Secret") {
			t.Errorf("restore's preflight asks for a Secret: %v", err)
		}
	})
	t.Run("encryption Secret: a backup may make an identity, a restore must not", func(t *testing.T) {
		enc := &EncryptionArgs{SecretName: pulumi.String("survival-encryption")}
		kc, _ := emptyCluster(t)
		b := validArgs()
		b.Kubeconfig, b.Encryption = kc, enc
		_, err := runMockedPreview(t, func(ctx *pulumi.Context) error { _, err := NewWorldBackup(ctx, "survival", b); return err })
		for _, want := range []string{
			"kubectl -n minecraft create secret generic survival-encryption --from-file=age-identity=key.txt",
			"for a server that has none yet, age-keygen -o key.txt makes one",
			"or, if the Secret has another name, set encryption.secretName to it",
		} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("backup's preflight error lacks %q:\n%v", want, err)
			}
		}
		r := validRestoreArgs()
		r.Kubeconfig, r.Encryption = kc, enc
		_, err = runMockedPreview(t, func(ctx *pulumi.Context) error { _, err := NewWorldRestore(ctx, "survival-restore", r); return err })
		if err == nil || !strings.Contains(err.Error(), "a new identity cannot read it") {
			t.Errorf("restore's preflight error does not say a new identity cannot read the archive:\n%v", err)
		}
		if err != nil && strings.Contains(err.Error(), "age-keygen") {
			t.Errorf("restore's preflight error offers a new identity:\n%v", err)
		}
	})
	t.Run("schedules: their Jobs' needs, at preview", func(t *testing.T) {
		kc, requests := emptyCluster(t)
		bs := validSchedule()
		bs.Kubeconfig = kc
		m, err := runMockedPreview(t, func(ctx *pulumi.Context) error { _, err := NewWorldBackupSchedule(ctx, "nightly", bs); return err })
		for _, want := range []string{"worldbackupschedule: the cluster lacks what Job survival-sched needs",
			"kubectl -n minecraft create secret generic felis-config --from-file=felis.toml", `PersistentVolumeClaim "world-backups"`} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("backup schedule: error lacks %q:\n%v", want, err)
			}
		}
		if requests.Load() == 0 || len(m.resources) != 0 {
			t.Errorf("%d requests, %d resources registered: want the preflight asked and nothing registered", requests.Load(), len(m.resources))
		}
		vs := validVerifySchedule()
		vs.Kubeconfig = kc
		_, err = runMockedPreview(t, func(ctx *pulumi.Context) error { _, err := NewWorldVerifySchedule(ctx, "verify", vs); return err })
		if err == nil || !strings.Contains(err.Error(), "worldverifyschedule: the cluster lacks what Job survival-vsched needs") {
			t.Errorf("verify schedule: err = %v, want its preflight's error", err)
		}
		bs.Preflight = new(false)
		if _, err := runMockedPreview(t, func(ctx *pulumi.Context) error { _, err := NewWorldBackupSchedule(ctx, "nightly", bs); return err }); err != nil {
			t.Errorf("backup schedule with preflight false: %v", err)
		}
	})
	t.Run("preflight false asks nothing", func(t *testing.T) {
		kc, requests := emptyCluster(t)
		if _, err := runMockedPreview(t, backup(kc, new(false))); err != nil {
			t.Fatal(err)
		}
		if n := requests.Load(); n != 0 {
			t.Errorf("%d requests with preflight false", n)
		}
	})
	t.Run("at update too, before the Job is registered (an up may skip the preview)", func(t *testing.T) {
		kc, requests := emptyCluster(t)
		m, err := runMocked(t, backup(kc, nil))
		if err == nil || !strings.Contains(err.Error(), "the cluster lacks what Job survival-backup-20250601-0300 needs (found at up") {
			t.Fatalf("err = %v, want the preflight's error at up", err)
		}
		if requests.Load() == 0 {
			t.Error("no request reached the API server")
		}
		if len(m.resources) != 0 {
			t.Errorf("registered %d resources despite the failed preflight", len(m.resources))
		}
	})
	t.Run("at update, a Job built later is checked once its inputs resolve", func(t *testing.T) {
		kc, _ := emptyCluster(t)
		_, err := runMocked(t, func(ctx *pulumi.Context) error {
			a := validArgs()
			a.Kubeconfig = kc
			a.RunID = pulumi.String("20250601-0300").ToStringOutput() // an Output: the Job is built in an apply
			_, err := NewWorldBackup(ctx, "survival", a)
			return err
		})
		if err == nil || !strings.Contains(err.Error(), "found at up") || !strings.Contains(err.Error(), "kubectl create namespace minecraft") {
			t.Fatalf("err = %v, want the preflight's error at up", err)
		}
	})
	t.Run("at update, a ready cluster: the preflight's lookups, then the Job observed", func(t *testing.T) {
		r, err := validArgs().resolve()
		if err != nil {
			t.Fatal(err)
		}
		job := jobspec.BuildBackup(r.Job)
		kc := clusterWith(t, job)
		m, err := runMocked(t, backup(kc, nil))
		if err != nil {
			t.Fatal(err)
		}
		if len(m.ofType(jobType)) != 1 {
			t.Fatal("no Job registered")
		}
	})
	t.Run("unreachable cluster: a warning, not an error", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close() // nothing listens there any more
		m, err := runMockedPreview(t, backup(kubeconfigFor(url), nil))
		if err != nil {
			t.Fatalf("preview failed on an unreachable cluster: %v", err)
		}
		if len(m.ofType("kubernetes:batch/v1:Job")) != 1 {
			t.Fatal("no Job registered")
		}
	})
}
