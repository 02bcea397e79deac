package provider

import (
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/worldbackup/worldbackup/provider/internal/jobtest"
	"github.com/worldbackup/worldbackup/provider/jobspec"
)

// validStore is an S3 store on a self-hosted server, keys by default.
func validStore() *StoreArgs {
	return &StoreArgs{URL: pulumi.String("s3://felis-backups/worlds"), Endpoint: pulumi.String("http://minio.storage:9000"),
		PathStyle: pulumi.Bool(true), CredentialsSecretName: pulumi.String("felis-s3")}
}

// s3Backup is validArgs archiving into validStore, without a backup claim.
func s3Backup() WorldBackupArgs {
	a := validArgs()
	a.BackupClaimName, a.Store = nil, validStore()
	return a
}

// s3Restore is validRestoreArgs restoring from validStore.
func s3Restore() WorldRestoreArgs {
	a := validRestoreArgs()
	a.BackupClaimName, a.Store = nil, validStore()
	a.ArchiveRef = pulumi.String("s3://felis-backups/worlds/survival/20250601-0300.tar.zst")
	return a
}

// s3Prune is validPrune pruning validStore, without a backup claim.
func s3Prune() WorldPruneArgs {
	a := validPrune()
	a.BackupClaimName, a.Store = nil, validStore()
	return a
}

// wantS3Store is validStore resolved.
func wantS3Store() *jobspec.S3Store {
	return &jobspec.S3Store{URL: "s3://felis-backups/worlds", Endpoint: "http://minio.storage:9000", PathStyle: true,
		SecretName: "felis-s3", AccessKeyKey: "access-key", SecretKeyKey: "secret-key"}
}

// TestWorldBackupS3Store checks the backup into an S3 store: the Job the
// builder makes of the resolved store, and archiveRef the object's URL.
func TestWorldBackupS3Store(t *testing.T) {
	tests := []struct {
		name    string
		store   *StoreArgs
		want    *jobspec.S3Store
		wantRef string
		tar     bool // format tar: the archive, not the manifest
	}{
		{"prefix", validStore(), wantS3Store(), "s3://felis-backups/worlds/survival/20250601-0300.tar.zst", true},
		{"chunked: the manifest's URL", validStore(), wantS3Store(), "s3://felis-backups/worlds/_chunked/runs/survival/20250601-0300.manifest", false},
		{"trailing slash, keys and region given", &StoreArgs{URL: pulumi.String("s3://felis-backups/a/b/"), Region: pulumi.String("eu-central-1"),
			CredentialsSecretName: pulumi.String("aws"), AccessKeyKey: pulumi.String("AWS_ACCESS_KEY_ID"), SecretKeyKey: pulumi.String("AWS_SECRET_ACCESS_KEY")},
			&jobspec.S3Store{URL: "s3://felis-backups/a/b", Region: "eu-central-1", SecretName: "aws",
				AccessKeyKey: "AWS_ACCESS_KEY_ID", SecretKeyKey: "AWS_SECRET_ACCESS_KEY"},
			"s3://felis-backups/a/b/survival/20250601-0300.tar.zst", true},
		{"bucket only", &StoreArgs{URL: pulumi.String("s3://felis-backups"), CredentialsSecretName: pulumi.String("felis-s3")},
			&jobspec.S3Store{URL: "s3://felis-backups", SecretName: "felis-s3", AccessKeyKey: "access-key", SecretKeyKey: "secret-key"},
			"s3://felis-backups/survival/20250601-0300.tar.zst", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := s3Backup()
			a.Store = tt.store
			if tt.tar {
				a.Format = new(FormatTar)
			}
			var got outputs
			var wg sync.WaitGroup
			m, err := runMocked(t, func(ctx *pulumi.Context) error {
				wb, err := NewWorldBackup(ctx, "backup", a)
				if err != nil {
					return err
				}
				captureOutputs(&wg, &got, wb.JobName, wb.Namespace, wb.RunID, wb.ArchiveRef)
				return nil
			})
			if err != nil {
				t.Fatalf("NewWorldBackup: %v", err)
			}
			wg.Wait()
			want := jobtest.DefaultBackup()
			want.BackupClaimName, want.Store = "", tt.want
			if tt.tar {
				want.Format, want.Compression = "tar", "zstd"
			}
			checkOneJob(t, m, WorldBackupType, "backup", "35m0s", jobspec.BuildBackup(want))
			if got.archiveRef != tt.wantRef {
				t.Fatalf("archiveRef = %q, want %q", got.archiveRef, tt.wantRef)
			}
		})
	}
}

// TestWorldRestoreS3Store checks the restore of an s3:// archive: the
// store's settings and credentials, no backup claim.
func TestWorldRestoreS3Store(t *testing.T) {
	m, err := runMocked(t, func(ctx *pulumi.Context) error {
		_, err := NewWorldRestore(ctx, "restore", s3Restore())
		return err
	})
	if err != nil {
		t.Fatalf("NewWorldRestore: %v", err)
	}
	want := jobtest.DefaultRestore()
	want.BackupClaimName, want.Store = "", wantS3Store()
	want.ArchiveRef = "s3://felis-backups/worlds/survival/20250601-0300.tar.zst"
	checkOneJob(t, m, WorldRestoreType, "restore", "35m0s", jobspec.BuildRestore(want))

	// Without store.url any s3:// archive is accepted.
	a := s3Restore()
	a.Store.URL = nil
	a.ArchiveRef = pulumi.String("s3://other-bucket/survival/x.tar.zst")
	if err := a.Validate(); err != nil {
		t.Fatalf("Validate() without store.url = %v", err)
	}
}

// TestWorldPruneS3Store checks the prune of an S3 store: the store's
// settings and credentials, the config Secret, no backup claim.
func TestWorldPruneS3Store(t *testing.T) {
	m, err := runMocked(t, func(ctx *pulumi.Context) error {
		_, err := NewWorldPrune(ctx, "weekly", s3Prune())
		return err
	})
	if err != nil {
		t.Fatalf("NewWorldPrune: %v", err)
	}
	want := jobtest.DefaultPrune()
	want.BackupClaimName, want.Store = "", wantS3Store()
	job := jobspec.BuildPrune(want)
	checkOneJob(t, m, WorldPruneType, "weekly", "35m0s", job)
	if slices.Contains(job.Spec.Template.Spec.Containers[0].Args, "--archive-root") {
		t.Fatal("an S3 prune passes --archive-root")
	}
}

// TestWorldBackupScheduleS3Store checks that the schedule takes the store
// of its backup.
func TestWorldBackupScheduleS3Store(t *testing.T) {
	s := validSchedule()
	s.BackupClaimName, s.Store = nil, validStore()
	b, _, _, err := s.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if b.Store == nil || *b.Store != *wantS3Store() || b.BackupClaimName != "" {
		t.Fatalf("scheduled backup store = %+v, claim %q; want %+v and no claim", b.Store, b.BackupClaimName, wantS3Store())
	}
	s.Store.URL = pulumi.String("s3://Felis")
	if _, _, _, err := s.resolve(); err == nil || !strings.Contains(err.Error(), "store.url") {
		t.Fatalf("err = %v, want the store.url problem", err)
	}
}

// TestStoreErrorsNeverQuoteCredentials: a store URL or S3 archiveRef with
// user:secret@ in it is refused naming the input, and the message quotes
// it redacted, however the secret is spelt.
func TestStoreErrorsNeverQuoteCredentials(t *testing.T) {
	for _, tt := range []struct {
		name, url string
		restore   bool // the URL is the restore's archiveRef, not store.url
		wantInput string
		wantText  string
	}{
		{"store url", "s3://AKIA:hunter2@felis-backups/worlds", false, "store.url", `store.url "s3://<redacted>@felis-backups/worlds" has credentials in it`},
		{"store url, a secret with a slash", "s3://AKIA:hunt/er2@felis-backups/worlds", false, "store.url", "has credentials in it"},
		{"store url, only a user", "s3://hunter2@felis-backups", false, "store.url", "has credentials in it"},
		{"store url not s3", "https://AKIA:hunter2@felis-backups/worlds", false, "store.url", "is not an S3 store"},
		{"archiveRef", "s3://AKIA:hunter2@felis-backups/worlds/survival/x.tar.zst", true, "archiveRef", `archiveRef "s3://<redacted>@felis-backups/worlds/survival/x.tar.zst" has credentials in it`},
		{"archiveRef, a secret with a slash", "s3://AKIA:hunt/er2@felis-backups/worlds/survival/x.tar.zst", true, "archiveRef", "has credentials in it"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.restore {
				a := s3Restore()
				a.ArchiveRef = pulumi.String(tt.url)
				checkRestoreInputError(t, a, []string{tt.wantInput}, []string{tt.wantText})
				err = a.Validate()
			} else {
				a := s3Backup()
				a.Store.URL = pulumi.String(tt.url)
				checkInputError(t, a, []string{tt.wantInput}, []string{tt.wantText})
				err = a.Validate()
			}
			for _, secret := range []string{"hunter2", "hunt", "er2"} {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("the message quotes the secret: %v", err)
				}
			}
		})
	}
}

func TestStoreInvalidInputs(t *testing.T) {
	backup := []struct {
		name       string
		modify     func(a *WorldBackupArgs)
		wantInputs []string
		wantText   string
	}{
		{"no url", func(a *WorldBackupArgs) { a.Store.URL = nil }, []string{"store.url"}, "store.url is required: set it to the bucket and prefix"},
		{"not s3", func(a *WorldBackupArgs) { a.Store.URL = pulumi.String("https://felis-backups/worlds") }, []string{"store.url"}, "use s3://bucket or s3://bucket/prefix"},
		{"bad bucket", func(a *WorldBackupArgs) { a.Store.URL = pulumi.String("s3://Felis_Backups/worlds") }, []string{"store.url"}, `bucket "Felis_Backups" is not a valid bucket name`},
		{"dot-dot prefix", func(a *WorldBackupArgs) { a.Store.URL = pulumi.String("s3://felis-backups/../x") }, []string{"store.url"}, `prefix "../x" is invalid`},
		{"hidden prefix", func(a *WorldBackupArgs) { a.Store.URL = pulumi.String("s3://felis-backups/.x") }, []string{"store.url"}, `prefix ".x" is invalid`},
		{"no secret name", func(a *WorldBackupArgs) { a.Store.CredentialsSecretName = nil }, []string{"store.credentialsSecretName"},
			"store.credentialsSecretName is required: set it to the Secret holding the S3 access key ID and secret access key"},
		{"bad secret name", func(a *WorldBackupArgs) { a.Store.CredentialsSecretName = pulumi.String("S3!") }, []string{"store.credentialsSecretName"}, "is invalid"},
		{"bad key", func(a *WorldBackupArgs) { a.Store.AccessKeyKey = pulumi.String("access key") }, []string{"store.accessKeyKey"}, "not a valid Secret key"},
		{"key starting with dot-dot", func(a *WorldBackupArgs) { a.Store.SecretKeyKey = pulumi.String("..secret") }, []string{"store.secretKeyKey"}, "must not start with '..'"},
		{"same keys", func(a *WorldBackupArgs) { a.Store.SecretKeyKey = pulumi.String("access-key") }, []string{"store.secretKeyKey"}, "is the same key as accessKeyKey"},
		{"endpoint without scheme", func(a *WorldBackupArgs) { a.Store.Endpoint = pulumi.String("minio:9000") }, []string{"store.endpoint"}, "want http(s)://host[:port]"},
		{"endpoint with path", func(a *WorldBackupArgs) { a.Store.Endpoint = pulumi.String("http://minio:9000/s3") }, []string{"store.endpoint"}, "want http(s)://host[:port]"},
		{"endpoint with credentials", func(a *WorldBackupArgs) { a.Store.Endpoint = pulumi.String("http://AKIA:secret@minio:9000") }, []string{"store.endpoint"}, "has credentials in it"},
		{"bad region", func(a *WorldBackupArgs) { a.Store.Region = pulumi.String("eu central") }, []string{"store.region"}, "not a region name"},
		{"endpoint with a query", func(a *WorldBackupArgs) { a.Store.Endpoint = pulumi.String("http://minio:9000?x=1") }, []string{"store.endpoint"}, "no path, query or fragment"},
		{"endpoint with a bad port", func(a *WorldBackupArgs) { a.Store.Endpoint = pulumi.String("http://minio:99999") }, []string{"store.endpoint"}, "port must be"},
		{"backup claim too", func(a *WorldBackupArgs) { a.BackupClaimName = pulumi.String("world-backups") }, []string{"backupClaimName"}, "is set together with store"},
		{"backup root too", func(a *WorldBackupArgs) { a.BackupRoot = pulumi.String("/archives") }, []string{"backupRoot"},
			`"/archives" is set together with store: with an S3 store the Job mounts no backup claim, so there is no archive root; remove backupRoot`},
		{"config over the credentials", func(a *WorldBackupArgs) { a.ConfigMountPath = pulumi.String("/etc/felis-s3") }, []string{"configMountPath"},
			`"/etc/felis-s3" overlaps the S3 credentials folder`},
	}
	for _, tt := range backup {
		t.Run("backup "+tt.name, func(t *testing.T) {
			a := s3Backup()
			tt.modify(&a)
			checkInputError(t, a, tt.wantInputs, []string{tt.wantText})
		})
	}
	// No secret leaks into a message: the endpoint's password is not echoed.
	a := s3Backup()
	a.Store.Endpoint = pulumi.String("http://AKIA:hunter2@minio:9000")
	if err := a.Validate(); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("err = %v: want an error that does not echo the password", err)
	}

	restore := []struct {
		name       string
		modify     func(a *WorldRestoreArgs)
		wantInputs []string
		wantText   string
	}{
		{"s3 ref without store", func(a *WorldRestoreArgs) { a.Store, a.BackupClaimName = nil, pulumi.String("world-backups") }, []string{"archiveRef"},
			"is in an S3 store, but store is not set"},
		{"path ref with store", func(a *WorldRestoreArgs) { a.ArchiveRef = pulumi.String("/backups/survival/x.tar.zst") }, []string{"archiveRef"},
			"is not an archive in an S3 store: use s3://bucket/key"},
		{"no key", func(a *WorldRestoreArgs) { a.ArchiveRef = pulumi.String("s3://felis-backups") }, []string{"archiveRef"}, "use s3://bucket/key"},
		{"bad key", func(a *WorldRestoreArgs) { a.ArchiveRef = pulumi.String("s3://felis-backups/worlds/../x.tar.zst") }, []string{"archiveRef"}, `key "worlds/../x.tar.zst" is invalid`},
		{"not in store", func(a *WorldRestoreArgs) { a.ArchiveRef = pulumi.String("s3://felis-backups/other/survival/x.tar.zst") }, []string{"archiveRef"},
			`is not in store.url "s3://felis-backups/worlds"`},
		{"no secret name", func(a *WorldRestoreArgs) { a.Store.CredentialsSecretName = nil }, []string{"store.credentialsSecretName"}, "is required"},
		{"backup claim too", func(a *WorldRestoreArgs) { a.BackupClaimName = pulumi.String("world-backups") }, []string{"backupClaimName"}, "is set together with store"},
		{"backup root too", func(a *WorldRestoreArgs) { a.BackupRoot = pulumi.String("/backups") }, []string{"backupRoot"},
			`"/backups" is set together with store`},
		{"world over the credentials", func(a *WorldRestoreArgs) { a.WorldRoot = pulumi.String("/etc/felis-s3/world") }, []string{"worldRoot"}, `"/etc/felis-s3/world" overlaps the S3 credentials folder`},
		{"restricted without fsGroup", func(a *WorldRestoreArgs) { a.SecurityMode = new(SecurityModeRestricted); a.FSGroup = pulumi.Int(0) }, []string{"fsGroup"},
			"read the S3 credentials Secret"},
	}
	for _, tt := range restore {
		t.Run("restore "+tt.name, func(t *testing.T) {
			a := s3Restore()
			tt.modify(&a)
			checkRestoreInputError(t, a, tt.wantInputs, []string{tt.wantText})
		})
	}

	prune := []struct {
		name       string
		modify     func(a *WorldPruneArgs)
		wantInputs []string
		wantText   string
	}{
		{"no url", func(a *WorldPruneArgs) { a.Store.URL = nil }, []string{"store.url"}, "store.url is required: set it to the bucket and prefix"},
		{"bad bucket", func(a *WorldPruneArgs) { a.Store.URL = pulumi.String("s3://Felis_Backups/worlds") }, []string{"store.url"}, `bucket "Felis_Backups" is not a valid bucket name`},
		{"no secret name", func(a *WorldPruneArgs) { a.Store.CredentialsSecretName = nil }, []string{"store.credentialsSecretName"}, "is required"},
		{"backup claim too", func(a *WorldPruneArgs) { a.BackupClaimName = pulumi.String("world-backups") }, []string{"backupClaimName"}, "is set together with store"},
		{"backup root too", func(a *WorldPruneArgs) { a.BackupRoot = pulumi.String("/backups") }, []string{"backupRoot"}, `"/backups" is set together with store`},
		{"config over the credentials", func(a *WorldPruneArgs) { a.ConfigMountPath = pulumi.String("/etc/felis-s3") }, []string{"configMountPath"},
			`"/etc/felis-s3" overlaps the S3 credentials folder`},
	}
	for _, tt := range prune {
		t.Run("prune "+tt.name, func(t *testing.T) {
			a := s3Prune()
			tt.modify(&a)
			checkComponentInputError(t, a.Validate, func(ctx *pulumi.Context) error {
				_, err := NewWorldPrune(ctx, "weekly", a)
				return err
			}, tt.wantInputs, []string{tt.wantText})
		})
	}
}

// TestStorePreflight checks that the preflight asks for the credentials
// Secret and both its keys, and says how to make it.
func TestStorePreflight(t *testing.T) {
	for _, tt := range []struct {
		name string
		run  func(kubeconfig string) pulumi.RunFunc
	}{
		{"backup", func(kc string) pulumi.RunFunc {
			return func(ctx *pulumi.Context) error {
				a := s3Backup()
				a.Kubeconfig = kc
				_, err := NewWorldBackup(ctx, "survival", a)
				return err
			}
		}},
		{"restore", func(kc string) pulumi.RunFunc {
			return func(ctx *pulumi.Context) error {
				a := s3Restore()
				a.Kubeconfig = kc
				_, err := NewWorldRestore(ctx, "survival-restore", a)
				return err
			}
		}},
		{"prune", func(kc string) pulumi.RunFunc {
			return func(ctx *pulumi.Context) error {
				a := s3Prune()
				a.Kubeconfig = kc
				_, err := NewWorldPrune(ctx, "weekly", a)
				return err
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			kc, _ := emptyCluster(t)
			_, err := runMockedPreview(t, tt.run(kc))
			if err == nil {
				t.Fatal("preview passed against a cluster with nothing in it")
			}
			msg := err.Error()
			want := "kubectl -n minecraft create secret generic felis-s3 --from-literal=access-key=<access key ID> --from-literal=secret-key=<secret access key>"
			if !strings.Contains(msg, want) {
				t.Errorf("error lacks %q:\n%s", want, msg)
			}
			if strings.Contains(msg, "world-backups") {
				t.Errorf("the preflight asks for the backup claim of an S3 store:\n%s", msg)
			}
		})
	}
}

// TestStoreSchema checks the store input in the components' schemas: the
// backup claim is no longer required.
func TestStoreSchema(t *testing.T) {
	for _, res := range []componentSchema{
		schemaOf(t, infer.ComponentF(NewWorldBackup), WorldBackupType),
		schemaOf(t, infer.ComponentF(NewWorldRestore), WorldRestoreType),
		schemaOf(t, infer.ComponentF(NewWorldPrune), WorldPruneType),
	} {
		if res.InputProperties["store"].Description == "" {
			t.Error("input store is missing or undocumented")
		}
		if slices.Contains(res.RequiredInputs, "backupClaimName") {
			t.Error("backupClaimName is required in the schema: an S3 store needs none")
		}
	}
	// The schedule's backup takes it too.
	if res := schemaOf(t, infer.ComponentF(NewWorldBackupSchedule), WorldBackupScheduleType); res.InputProperties["store"].Description == "" {
		t.Error("WorldBackupSchedule: input store is missing or undocumented")
	}
}

// TestS3ArchiveRefOutput: a restore from an S3 store takes a backup's
// archiveRef Output (the backup into the same store), and an s3:// archive
// that resolves later is checked then: an archive outside store.url fails
// NewWorldRestore at preview, where its value is known, and the Job's
// registration at up, with the same message.
func TestS3ArchiveRefOutput(t *testing.T) {
	for _, tt := range []struct {
		name string
		run  func(*testing.T, pulumi.RunFunc) (*mocks, error)
	}{{"preview", runMockedPreview}, {"up", runMocked}} {
		t.Run(tt.name+" from the backup", func(t *testing.T) {
			m, err := tt.run(t, func(ctx *pulumi.Context) error {
				ba := s3Backup()
				ba.Preflight = new(false)
				b, err := NewWorldBackup(ctx, "survival", ba)
				if err != nil {
					return err
				}
				ra := s3Restore()
				ra.ArchiveRef = b.ArchiveRef
				ra.Preflight = new(false)
				_, err = NewWorldRestore(ctx, "survival-restore", ra)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range m.ofType("kubernetes:batch/v1:Job") {
				if j.Name != "survival-restore-job" {
					continue
				}
				want := "s3://felis-backups/worlds/_chunked/runs/survival/20250601-0300.manifest"
				if args := decodeJob(t, j, true).Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, want) {
					t.Fatalf("restore args = %q, want the backup's archive %s", args, want)
				}
				return
			}
			t.Fatal("no restore Job registered")
		})

		t.Run(tt.name+" outside the store", func(t *testing.T) {
			var compErr error
			_, err := tt.run(t, func(ctx *pulumi.Context) error {
				ref, err := registerClaim(ctx, "s3://felis-backups/other/survival/x.tar.zst")
				if err != nil {
					return err
				}
				a := s3Restore()
				a.ArchiveRef = ref
				a.Preflight = new(false)
				_, compErr = NewWorldRestore(ctx, "survival-restore", a)
				return compErr
			})
			const want = `archiveRef "s3://felis-backups/other/survival/x.tar.zst" is not in store.url "s3://felis-backups/worlds"`
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("program error = %v, want one containing %q", err, want)
			}
			if tt.name == "preview" && compErr == nil {
				t.Fatal("preview: NewWorldRestore accepted an archive it could check")
			}
			if tt.name == "up" && compErr != nil {
				t.Fatalf("up: NewWorldRestore returned %v before the input resolved", compErr)
			}
		})
	}
}
