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

// secretNeed is a Secret a Job mounts: its name and the input that set it,
// the keys it reads and the inputs that set each (keyInputs[i] is keys[i]'s,
// "" for a fixed key), the command that makes it and what that command's
// file must hold when it is not obvious.
type secretNeed struct {
	name      string
	input     string
	keys      []string
	keyInputs []string
	hint      string
	note      string
}

// configNeed is the config Secret configSecret (felis.toml) of a Job.
func configNeed(namespace, configSecret string) secretNeed {
	return secretNeed{name: configSecret, input: "configSecretName", keys: []string{jobspec.ConfigFileName}, keyInputs: []string{""},
		hint: fmt.Sprintf("kubectl -n %s create secret generic %s --from-file=%s", namespace, configSecret, jobspec.ConfigFileName)}
}

// storeNeed is the credentials Secret of store, nil when there is none.
func storeNeed(namespace string, store *jobspec.S3Store) *secretNeed {
	if store == nil {
		return nil
	}
	return &secretNeed{name: store.SecretName, input: "store.credentialsSecretName",
		keys: []string{store.AccessKeyKey, store.SecretKeyKey}, keyInputs: []string{"store.accessKeyKey", "store.secretKeyKey"},
		hint: s3SecretHint(namespace, store)}
}

// configRequirements are what the preflight looks up for a Job job that
// reads the config Secret configSecret, the credentials Secret of store
// (when not nil) and extra (when not nil): its claims, service account and
// those Secrets with their keys.
func configRequirements(job *batchv1.Job, configSecret string, store *jobspec.S3Store, extra ...*secretNeed) preflight.Requirements {
	c := configNeed(job.Namespace, configSecret)
	req := requirements(job, append(append([]*secretNeed{&c}, extra...), storeNeed(job.Namespace, store))...)
	req.SecurityHint = "set securityMode restricted"
	return req
}

// requirements are what the preflight looks up for job, which mounts the
// Secrets of needs (nil ones skipped): its claims (named by the inputs
// worldClaimName and backupClaimName), service account and those Secrets
// with their keys.
func requirements(job *batchv1.Job, needs ...*secretNeed) preflight.Requirements {
	secrets := map[string][]string{}
	for _, n := range needs {
		if n != nil {
			secrets[n.name] = append(secrets[n.name], n.keys...)
		}
	}
	r := preflight.FromJob(job, secrets)
	r.SecretHints, r.SecretNotes, r.SecretInputs = map[string]string{}, map[string]string{}, map[string]string{}
	r.KeyInputs, r.ClaimInputs = map[string]string{}, map[string]string{}
	// The first need of a Secret that says how to make it, or names its
	// input, is the one the messages give.
	first := func(m map[string]string, k, v string) {
		if _, ok := m[k]; !ok && v != "" {
			m[k] = v
		}
	}
	for _, n := range needs {
		if n == nil {
			continue
		}
		first(r.SecretHints, n.name, n.hint)
		first(r.SecretNotes, n.name, n.note)
		first(r.SecretInputs, n.name, n.input)
		for i, k := range n.keys {
			if i < len(n.keyInputs) {
				first(r.KeyInputs, n.name+"/"+k, n.keyInputs[i])
			}
		}
	}
	for _, v := range job.Spec.Template.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		switch v.Name {
		case jobspec.WorldVolumeName:
			r.ClaimInputs[v.PersistentVolumeClaim.ClaimName] = "worldClaimName"
		case jobspec.BackupVolumeName:
			r.ClaimInputs[v.PersistentVolumeClaim.ClaimName] = "backupClaimName"
		}
	}
	return r
}
