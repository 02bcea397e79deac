package provider

import (
	"fmt"
	"strings"

	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/worldbackup/worldbackup/jobapi"
	"github.com/worldbackup/worldbackup/provider/jobspec"
)

// DefaultEncryptionSecretKey is the default key of the age identity in the
// encryption Secret.
const DefaultEncryptionSecretKey = "age-identity"

// fsGroupForEncryptionSecret is why a restricted-mode restore of an
// encrypted archive needs a non-zero fsGroup.
const fsGroupForEncryptionSecret = "so that the non-root archiver can read the encryption Secret (files owned by root, mode 0400)"

// EncryptionArgs name the Secret key holding the age identity (as
// age-keygen writes it) a backup encrypts its archive to, or a restore
// reads an encrypted archive with. The Job mounts that one key read-only
// (0400) as a file; the identity never reaches arguments, environment or
// state.
type EncryptionArgs struct {
	SecretName pulumi.StringInput `pulumi:"secretName"`
	SecretKey  pulumi.StringInput `pulumi:"secretKey,optional"`
}

// Annotate names the type worldbackup:index:Encryption and describes its
// inputs in the plugin's schema.
func (e *EncryptionArgs) Annotate(a infer.Annotator) {
	a.SetToken("index", "Encryption")
	a.Describe(&e.SecretName, "The Secret holding the age identity (the output of age-keygen, AGE-SECRET-KEY-1...), in the Job's "+
		"namespace; its key is mounted read-only (0400) at "+jobapi.EncryptionMountPath+"/"+jobapi.EncryptionKeyFile+
		" and passed as "+descFlag(jobapi.FlagEncryptionKeyFile)+"; it never reaches arguments, environment or state.")
	a.Describe(&e.SecretKey, "The key of the identity in the Secret. Default: "+DefaultEncryptionSecretKey+".")
}

// resolve validates the settled inputs of e; nil e gives nil. Problems name
// the inputs encryption.<field>.
func (e *EncryptionArgs) resolve(p *problems) *jobspec.Encryption {
	if e == nil {
		return nil
	}
	out := jobspec.Encryption{SecretName: str(e.SecretName), SecretKey: str(e.SecretKey)}
	setDefault(&out.SecretKey, DefaultEncryptionSecretKey)
	if p.required("encryption.secretName", out.SecretName,
		"set it to the Secret holding the age identity, e.g. survival-encryption (kubectl create secret generic survival-encryption --from-file="+DefaultEncryptionSecretKey+"=key.txt)") {
		p.dnsSubdomain("encryption.secretName", out.SecretName)
	}
	p.secretKey("encryption.secretKey", out.SecretKey, DefaultEncryptionSecretKey)
	return &out
}

// encryptionMounts returns mounts with the encryption folder when e is set.
func encryptionMounts(e *jobspec.Encryption, mounts []mount) []mount {
	if e == nil {
		return mounts
	}
	return append(mounts, mount{"the encryption key folder", jobspec.EncryptionMountPath})
}

// encryptedNeedsKey refuses an archive ref of the tar format's encrypted
// form (jobapi.EncryptedExt) without enc: the archiver could not open it.
func (p *problems) encryptedNeedsKey(input, ref string, enc *jobspec.Encryption) {
	if enc == nil && strings.HasSuffix(ref, jobapi.EncryptedExt) {
		p.addf(input, "%q is an encrypted archive (%s): set encryption to the Secret key that holds its age identity", ref, jobapi.EncryptedExt)
	}
}

// What a Job does with the encryption Secret's identity, which decides what
// a missing Secret's message asks for.
const (
	encryptionWrites = false // a backup encrypts to it
	encryptionReads  = true  // a restore or verify reads an archive with it
)

// encryptionNeed is what the preflight looks up of e (nil: nothing) for a
// Job that reads (encryptionReads) or writes archives with it. Its message
// never offers a new identity to a Job that reads: a new one opens nothing.
func encryptionNeed(namespace string, e *jobspec.Encryption, reads bool) *secretNeed {
	if e == nil {
		return nil
	}
	note := "key.txt: the age identity this server's encrypted archives were made with; " +
		"for a server that has none yet, age-keygen -o key.txt makes one"
	if reads {
		note = "key.txt: the age identity the archive was encrypted to, or a later one of its rotation; " +
			"a new identity cannot read it"
	}
	return &secretNeed{name: e.SecretName, input: "encryption.secretName", keys: []string{e.SecretKey}, keyInputs: []string{"encryption.secretKey"},
		hint: fmt.Sprintf("kubectl -n %s create secret generic %s --from-file=%s=key.txt", namespace, e.SecretName, e.SecretKey), note: note}
}
