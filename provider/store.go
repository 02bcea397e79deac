package provider

import (
	"errors"
	"fmt"
	"strings"

	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/worldbackup/worldbackup/jobapi"
	"github.com/worldbackup/worldbackup/provider/jobspec"
)

// Defaults of the store input: the keys of the credentials Secret.
const (
	DefaultAccessKeyKey = "access-key"
	DefaultSecretKeyKey = "secret-key"
)

// fsGroupForS3Secret is why a restricted-mode restore from an S3 store
// needs a non-zero fsGroup.
const fsGroupForS3Secret = "so that the non-root archiver can read the S3 credentials Secret (files owned by root, mode 0400)"

// StoreArgs name an S3-compatible archive store (AWS S3, MinIO, Ceph RGW,
// versitygw, …) in place of the backup claim: the backup streams its
// archive into the bucket, the restore reads it from there. The
// credentials stay in a Secret that the Job mounts read-only; they never
// reach arguments, environment or state.
//
// Each setting is a Pulumi input (nil = unset, the default); whether the
// store is set at all is plain, as it shapes the Job.
type StoreArgs struct {
	URL                   pulumi.StringInput `pulumi:"url,optional"`
	Endpoint              pulumi.StringInput `pulumi:"endpoint,optional"`
	Region                pulumi.StringInput `pulumi:"region,optional"`
	PathStyle             pulumi.BoolInput   `pulumi:"pathStyle,optional"`
	CredentialsSecretName pulumi.StringInput `pulumi:"credentialsSecretName"`
	AccessKeyKey          pulumi.StringInput `pulumi:"accessKeyKey,optional"`
	SecretKeyKey          pulumi.StringInput `pulumi:"secretKeyKey,optional"`
}

// Annotate names the type worldbackup:index:Store and describes its inputs
// in the plugin's schema.
func (s *StoreArgs) Annotate(a infer.Annotator) {
	a.SetToken("index", "Store")
	a.Describe(&s.URL, "The store, s3://bucket or s3://bucket/prefix. A chunked run (the default format) is its manifest "+
		"<prefix>/"+jobapi.ChunkedDir+"/runs/<server>/<runId>.manifest and the packs under <prefix>/"+jobapi.ChunkedDir+"/packs; "+
		"a tar run is the archive <prefix>/<server>/<runId>.tar.zst (.tar.zst.age when encrypted). "+
		"Required for a backup; for a restore, optional (when set, archiveRef must be in it).")
	a.Describe(&s.Endpoint, "The S3 server's URL, http(s)://host[:port], e.g. http://minio.storage:9000. Default: AWS.")
	a.Describe(&s.Region, "The bucket's region. Default: "+jobapi.DefaultS3Region+".")
	a.Describe(&s.PathStyle, "Address the bucket as <endpoint>/<bucket> rather than <bucket>.<endpoint> "+
		"(most self-hosted servers: MinIO, versitygw, Ceph RGW). Default: false.")
	a.Describe(&s.CredentialsSecretName, "The Secret holding the access key ID and the secret access key, in the Job's "+
		"namespace; its two keys are mounted read-only (0400) into the Job and never reach arguments, environment or state.")
	a.Describe(&s.AccessKeyKey, "The key of the access key ID in the Secret. Default: access-key.")
	a.Describe(&s.SecretKeyKey, "The key of the secret access key in the Secret. Default: secret-key.")
}

// storeRole says what a component needs of the store input.
type storeRole int

const (
	storeWhole  storeRole = iota // url required: the Job works on the store (a backup writes there, a prune expires)
	storeObject                  // url optional: the Job reads one object, which another input names (a restore's archiveRef)
)

// resolve applies the defaults and validates the settled inputs of s (see
// settle); nil s gives nil. Problems name the inputs store.<field>.
func (s *StoreArgs) resolve(p *problems, role storeRole) *jobspec.S3Store {
	if s == nil {
		return nil
	}
	storeURL := str(s.URL)
	out := jobspec.S3Store{Endpoint: str(s.Endpoint), Region: str(s.Region),
		SecretName: str(s.CredentialsSecretName), AccessKeyKey: str(s.AccessKeyKey), SecretKeyKey: str(s.SecretKeyKey)}
	if ps := optBool(s.PathStyle); ps != nil {
		out.PathStyle = *ps
	}
	setDefault(&out.AccessKeyKey, DefaultAccessKeyKey)
	setDefault(&out.SecretKeyKey, DefaultSecretKeyKey)
	if storeURL != "" || role == storeWhole {
		if p.required("store.url", storeURL, "set it to the bucket and prefix of the archives, e.g. s3://felis-backups/worlds") {
			out.URL = p.s3StoreURL("store.url", storeURL)
		}
	}
	if out.Endpoint != "" {
		switch err := jobapi.CheckS3Endpoint(out.Endpoint); {
		case errors.Is(err, jobapi.ErrEndpointCredentials):
			p.addf("store.endpoint", "%s: the Secret credentialsSecretName", err)
		case err != nil:
			p.addf("store.endpoint", "%s, or leave it unset for AWS", err)
		}
	}
	if out.Region != "" {
		if err := jobapi.CheckS3Region(out.Region); err != nil {
			p.addf("store.region", "%s", err)
		}
	}
	if p.required("store.credentialsSecretName", out.SecretName,
		"set it to the Secret holding the S3 access key ID and secret access key, e.g. felis-s3") {
		p.dnsSubdomain("store.credentialsSecretName", out.SecretName)
	}
	for _, k := range []struct{ input, v string }{{"store.accessKeyKey", out.AccessKeyKey}, {"store.secretKeyKey", out.SecretKeyKey}} {
		p.secretKey(k.input, k.v, DefaultAccessKeyKey)
	}
	if out.AccessKeyKey == out.SecretKeyKey {
		p.addf("store.secretKeyKey", "is the same key as accessKeyKey (%q): the access key ID and the secret access key are two keys of the Secret", out.AccessKeyKey)
	}
	return &out
}

// s3Credentials reports whether the s3:// URL u (with bucket, its first
// element) holds credentials, user:secret@bucket: an '@' with a bucket no
// store has (a secret may hold '/', which would cut the bucket short).
// Messages about such a URL quote it with jobapi.RedactURL and never quote
// its bucket.
func s3Credentials(u, bucket string) bool {
	return strings.Contains(u, "@") && !jobapi.ValidBucket(bucket)
}

// s3StoreURL checks an s3://bucket[/prefix] URL and returns its canonical
// form (no trailing slash); the archiver accepts the same.
func (p *problems) s3StoreURL(input, u string) string {
	const example = "s3://felis-backups/worlds"
	bucket, prefix, ok := jobapi.SplitS3Ref(u)
	switch {
	case !ok:
		p.addf(input, "%q is not an S3 store: use s3://bucket or s3://bucket/prefix, e.g. %s", jobapi.RedactURL(u), example)
		return ""
	case s3Credentials(u, bucket):
		p.addf(input, "%q has credentials in it: remove them, e.g. %s; the keys belong in the Secret credentialsSecretName", jobapi.RedactURL(u), example)
		return ""
	}
	prefix = strings.TrimSuffix(prefix, "/")
	good := true
	if !jobapi.ValidBucket(bucket) {
		p.addf(input, "%q: bucket %q is not a valid bucket name: use 3 to 63 lowercase letters, digits, '.' and '-', e.g. %s", u, bucket, example)
		good = false
	}
	if prefix != "" && jobapi.CheckKey(prefix) != nil {
		p.addf(input, "%q: prefix %q is invalid: use a slash-separated path without empty, '.' or '..' elements, nothing starting with '.', e.g. %s", u, prefix, example)
		good = false
	}
	if !good {
		return ""
	}
	return jobapi.S3URL(bucket, prefix)
}

// s3ArchiveRef checks the s3:// URL of an archive object: a valid bucket
// and key, in store (when store is not "").
func (p *problems) s3ArchiveRef(input, ref, store string) {
	const example = "s3://felis-backups/worlds/survival/2025-06-01T0300Z.tar.zst"
	bucket, key, ok := jobapi.SplitS3Ref(ref)
	switch {
	case ok && s3Credentials(ref, bucket):
		p.addf(input, "%q has credentials in it: remove them, e.g. %s; the keys belong in the store's Secret credentialsSecretName", jobapi.RedactURL(ref), example)
	case !ok || key == "":
		p.addf(input, "%q is not an archive in an S3 store: use s3://bucket/key, a WorldBackup's archiveRef output or the archive_ref column of `archiver list`, e.g. %s", jobapi.RedactURL(ref), example)
	case !jobapi.ValidBucket(bucket):
		p.addf(input, "%q: bucket %q is not a valid bucket name: use 3 to 63 lowercase letters, digits, '.' and '-'", ref, bucket)
	case jobapi.CheckKey(key) != nil:
		p.addf(input, "%q: key %q is invalid: use a slash-separated path without empty, '.' or '..' elements, nothing starting with '.', e.g. %s", ref, key, example)
	case store != "" && !strings.HasPrefix(ref, store+"/"):
		p.addf(input, "%q is not in store.url %q: give an archive of that store, or set store.url to the store the backup wrote to", ref, store)
	}
}

// s3ArchiveRefOf returns the s3:// URL of the archive (tar) or manifest
// (chunked) a backup of server and runID writes into the store at storeURL
// (canonical, validated); encrypted: the tar archive's .age name.
func s3ArchiveRefOf(storeURL, server, runID, format, compression string, encrypted bool) (string, error) {
	name, err := jobapi.SealedRunKey(server, runID, format, compression, encrypted)
	if err != nil {
		return "", fmt.Errorf("naming the archive in %s: %w", storeURL, err)
	}
	return storeURL + "/" + name, nil
}

// storeMounts returns the mount paths of a Job besides mounts: backupRoot
// for the folder store; with an S3 store the credentials folder (last, so
// that an overlap names the input).
func storeMounts(store *jobspec.S3Store, backupRoot string, mounts ...mount) []mount {
	if store == nil {
		return append(mounts, mount{"backupRoot", backupRoot})
	}
	return append(mounts, mount{"the S3 credentials folder", jobspec.S3MountPath})
}

// s3SecretHint is the command that makes the credentials Secret of s.
func s3SecretHint(namespace string, s *jobspec.S3Store) string {
	return fmt.Sprintf("kubectl -n %s create secret generic %s --from-literal=%s=<access key ID> --from-literal=%s=<secret access key>",
		namespace, s.SecretName, s.AccessKeyKey, s.SecretKeyKey)
}
