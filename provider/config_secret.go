package provider

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/worldbackup/worldbackup/jobapi"
	"github.com/worldbackup/worldbackup/provider/jobspec"
	"github.com/worldbackup/worldbackup/provider/preflight"
)

// The config Secret (felis.toml: the catalog's database URL) of the Jobs
// that reach the catalog (backup, prune, and the schedule's backups): the
// defaults of its inputs, and what the preflight looks up for it.
const (
	DefaultConfigSecretName = "felis-config"
	DefaultConfigMountPath  = jobapi.DefaultConfigDir
)

// fsGroupForSecret is why restricted mode needs a non-zero fsGroup in a
// Job that reads the config Secret.
const fsGroupForSecret = "so that the non-root archiver can read the config Secret (files owned by root, mode 0400)"

// secretNeed is a Secret a Job mounts: its name, the keys it reads and the
// command that makes it.
type secretNeed struct {
	name string
	keys []string
	hint string
}

// configRequirements are what the preflight looks up for a Job job that
// reads the config Secret configSecret, the credentials Secret of store
// (when not nil) and extra (when not nil): its claims, service account and
// those Secrets with their keys.
func configRequirements(job *batchv1.Job, configSecret string, store *jobspec.S3Store, extra ...*secretNeed) preflight.Requirements {
	needs := []secretNeed{{configSecret, []string{jobspec.ConfigFileName},
		fmt.Sprintf("kubectl -n %s create secret generic %s --from-file=%s", job.Namespace, configSecret, jobspec.ConfigFileName)}}
	for _, e := range extra {
		if e != nil {
			needs = append(needs, *e)
		}
	}
	if store != nil {
		needs = append(needs, secretNeed{store.SecretName, []string{store.AccessKeyKey, store.SecretKeyKey}, s3SecretHint(job.Namespace, store)})
	}
	secrets := map[string][]string{}
	hints := map[string]string{}
	for _, n := range needs {
		secrets[n.name] = append(secrets[n.name], n.keys...)
		if _, ok := hints[n.name]; !ok {
			hints[n.name] = n.hint
		}
	}
	req := preflight.FromJob(job, secrets)
	req.SecretHints = hints
	req.SecurityHint = "set securityMode restricted"
	return req
}
