// Package preflight looks up, read-only, what a worldbackup Job needs in its
// cluster before the Job is created: the namespace (and whether its Pod
// Security enforce level admits the Job's pod), the service account, the
// config Secret and its key, and the claims and their phase. The components
// run it at `pulumi preview` and again at `pulumi up` before the Job is
// created (an `up` may skip the preview: `--skip-preview`, the Automation
// API), so that a missing piece is reported at once, in one message listing
// every piece with the command that makes it, instead of a Job that waits for
// its deadline.
//
// It never reads or logs a Secret's value: it only checks that the key is
// present and not empty.
package preflight

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// Requirements are the cluster objects one Job needs.
type Requirements struct {
	// Job names the Job in messages, e.g. survival-backup-abc.
	Job       string
	Namespace string
	// Pod is the Job's pod template, evaluated against the namespace's Pod
	// Security enforce level.
	Pod            corev1.PodTemplateSpec
	ServiceAccount string
	// Secrets maps each Secret the pod mounts to the keys it needs (none:
	// only that it exists).
	Secrets map[string][]string
	// OptionalSecrets maps each Secret the pod mounts optionally (the
	// notify webhook's) to the keys its volume reads: the pod starts
	// without them, so a missing one is a warning, never a problem.
	OptionalSecrets map[string][]string
	// Claims are the PersistentVolumeClaims the pod mounts.
	Claims []string
	// SecretHints are the commands that make a missing Secret, by name,
	// e.g. `kubectl -n minecraft create secret generic felis-config
	// --from-file=felis.toml`; a generic one where missing.
	SecretHints map[string]string
	// SecretNotes say, by Secret name, what a hint's file must hold when
	// that is not obvious (an existing age identity, not a new one).
	SecretNotes map[string]string
	// SecretInputs, KeyInputs (by "<secret>/<key>") and ClaimInputs name
	// the input that set each name, for a missing one's message: a typo in
	// the input is as likely as a missing object.
	SecretInputs, KeyInputs, ClaimInputs map[string]string
	// SecurityHint says how to make the pod pass a stricter namespace, e.g.
	// "set securityMode restricted".
	SecurityHint string
}

// FromJob returns the Requirements of job: its namespace, pod template,
// service account, the Secrets and claims of its volumes. secretKeys gives
// the keys a Secret must hold.
func FromJob(job *batchv1.Job, secretKeys map[string][]string) Requirements {
	spec := job.Spec.Template.Spec
	r := Requirements{
		Job:             job.Name,
		Namespace:       job.Namespace,
		Pod:             job.Spec.Template,
		ServiceAccount:  spec.ServiceAccountName,
		Secrets:         map[string][]string{},
		OptionalSecrets: map[string][]string{},
	}
	if r.ServiceAccount == "" {
		r.ServiceAccount = "default"
	}
	for _, v := range spec.Volumes {
		switch {
		case v.Secret != nil && v.Secret.Optional != nil && *v.Secret.Optional:
			for _, it := range v.Secret.Items {
				r.OptionalSecrets[v.Secret.SecretName] = append(r.OptionalSecrets[v.Secret.SecretName], it.Key)
			}
			if r.OptionalSecrets[v.Secret.SecretName] == nil {
				r.OptionalSecrets[v.Secret.SecretName] = []string{}
			}
		case v.Secret != nil:
			r.Secrets[v.Secret.SecretName] = secretKeys[v.Secret.SecretName]
		case v.PersistentVolumeClaim != nil:
			r.Claims = append(r.Claims, v.PersistentVolumeClaim.ClaimName)
		}
	}
	return r
}

// Problem is one missing or unfit piece and the command (or step) that
// fixes it.
type Problem struct {
	What string
	Fix  string
}

// Result is what Check found.
type Result struct {
	// Problems are the missing or unfit pieces; none: the Job can start.
	Problems []Problem
	// Unverified lists what could not be looked up (e.g. RBAC forbids
	// reading Secrets): not an error, since the Job may still work.
	Unverified []string
	// Warnings are the optional pieces missing (OptionalSecrets), each
	// with its fix: the Job runs without them.
	Warnings []string
}

// Err returns one error listing every problem, or nil. when says when they
// were found, e.g. "at preview".
func (r Result) Err(job, when string) error {
	if len(r.Problems) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "the cluster lacks what Job %s needs (found %s, before creating it):", job, when)
	for _, p := range r.Problems {
		fmt.Fprintf(&b, "\n  - %s: %s", p.What, p.Fix)
	}
	return errors.New(b.String())
}

// Check looks up, read-only, every piece of req through c. It returns an
// error only when the cluster cannot be asked at all (not reachable, or the
// first lookup fails otherwise); a forbidden lookup is Unverified.
func Check(ctx context.Context, c kubernetes.Interface, req Requirements) (Result, error) {
	var res Result
	ns := req.Namespace
	problem := func(what, fix string) { res.Problems = append(res.Problems, Problem{what, fix}) }
	// lookup classifies err: true when the object exists; a missing object
	// adds the problem, a forbidden lookup an Unverified entry.
	lookup := func(err error, what, missingFix string) (bool, error) {
		switch {
		case err == nil:
			return true, nil
		case apierrors.IsNotFound(err):
			problem(what+" does not exist", missingFix)
			return false, nil
		case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
			res.Unverified = append(res.Unverified, what+" (lookup refused: "+string(apierrors.ReasonForError(err))+")")
			return false, nil
		default:
			return false, fmt.Errorf("looking up %s: %w", what, err)
		}
	}

	namespace, err := c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	ok, err := lookup(err, fmt.Sprintf("namespace %q", ns), fmt.Sprintf("kubectl create namespace %s", ns))
	if err != nil {
		return res, err
	}
	if ok {
		checkPodSecurity(namespace, req, problem)
	}

	_, err = c.CoreV1().ServiceAccounts(ns).Get(ctx, req.ServiceAccount, metav1.GetOptions{})
	if _, err := lookup(err, fmt.Sprintf("service account %q in namespace %s", req.ServiceAccount, ns),
		fmt.Sprintf("kubectl -n %s create serviceaccount %s (it needs no permissions)", ns, req.ServiceAccount)); err != nil {
		return res, err
	}

	for _, name := range slices.Sorted(maps.Keys(req.Secrets)) {
		hint := req.SecretHints[name]
		if hint == "" {
			hint = fmt.Sprintf("kubectl -n %s create secret generic %s --from-file=<file>", ns, name)
		}
		note := ""
		if n := req.SecretNotes[name]; n != "" {
			note = " (" + n + ")"
		}
		missingFix := hint + note
		if in := req.SecretInputs[name]; in != "" {
			missingFix += fmt.Sprintf("; or, if the Secret has another name, set %s to it", in)
		}
		s, err := c.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		ok, err := lookup(err, fmt.Sprintf("Secret %q in namespace %s", name, ns), missingFix)
		if err != nil {
			return res, err
		}
		if !ok {
			continue
		}
		for _, key := range req.Secrets[name] {
			// Only the key's presence and length, and the names of the
			// keys it has: a value is never read into a message.
			if len(s.Data[key]) == 0 {
				fix := "add the key: " + hint + " --dry-run=client -o yaml | kubectl apply -f -" + note
				if in := req.KeyInputs[name+"/"+key]; in != "" {
					fix += fmt.Sprintf("; or, if another key holds it, set %s to that key", in)
				}
				problem(fmt.Sprintf("Secret %q in namespace %s has no key %s (or it is empty); its keys: %s", name, ns, key, keyNames(s.Data)), fix)
			}
		}
	}

	for _, name := range slices.Sorted(maps.Keys(req.OptionalSecrets)) {
		if _, required := req.Secrets[name]; required {
			continue // checked above
		}
		hint := req.SecretHints[name]
		if hint == "" {
			hint = fmt.Sprintf("kubectl -n %s create secret generic %s", ns, name)
			for _, key := range req.OptionalSecrets[name] {
				hint += fmt.Sprintf(" --from-literal=%s=<value>", key)
			}
		}
		what := fmt.Sprintf("Secret %q in namespace %s", name, ns)
		s, err := c.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			res.Warnings = append(res.Warnings, what+" does not exist: the Job runs without it (an optional volume); "+hint)
			continue
		case err != nil:
			res.Unverified = append(res.Unverified, what+" (lookup failed: "+string(apierrors.ReasonForError(err))+")")
			continue
		}
		for _, key := range req.OptionalSecrets[name] {
			if len(s.Data[key]) == 0 { // the value is never read into a message
				res.Warnings = append(res.Warnings, fmt.Sprintf("%s has no key %s (or it is empty): the Job runs without it (an optional volume); %s", what, key, hint))
			}
		}
	}

	for _, name := range req.Claims {
		pvc, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		what := fmt.Sprintf("PersistentVolumeClaim %q in namespace %s", name, ns)
		in := req.ClaimInputs[name]
		if in == "" {
			in = "the claim name input"
		}
		ok, err := lookup(err, what,
			fmt.Sprintf("create it (a StatefulSet's volumeClaimTemplate makes world-<server>-0; or `kubectl -n %s apply -f` a PersistentVolumeClaim named %s), or, if the claim has another name, set %s to it", ns, name, in))
		if err != nil {
			return res, err
		}
		if !ok || pvc.Status.Phase == corev1.ClaimBound {
			continue
		}
		if waitsForConsumer(ctx, c, pvc) {
			continue // it binds when the Job's pod is scheduled
		}
		problem(fmt.Sprintf("%s is %s, not Bound", what, phase(pvc)),
			fmt.Sprintf("`kubectl -n %s describe pvc %s` says why (no matching PersistentVolume, no provisioner for its StorageClass)", ns, name))
	}
	return res, nil
}

// maxKeyNames is how many of a Secret's key names a message lists.
const maxKeyNames = 10

// keyNames lists the names of a Secret's keys, sorted, for a message: never
// a value.
func keyNames(data map[string][]byte) string {
	names := slices.Sorted(maps.Keys(data))
	switch {
	case len(names) == 0:
		return "none"
	case len(names) > maxKeyNames:
		return strings.Join(names[:maxKeyNames], ", ") + fmt.Sprintf(" and %d more", len(names)-maxKeyNames)
	}
	return strings.Join(names, ", ")
}

// checkPodSecurity adds a problem when the namespace's Pod Security enforce
// level refuses req.Pod.
func checkPodSecurity(ns *corev1.Namespace, req Requirements, problem func(what, fix string)) {
	pol, errs := psaapi.PolicyToEvaluate(ns.Labels, psaapi.Policy{
		Enforce: psaapi.LevelVersion{Level: psaapi.LevelPrivileged, Version: psaapi.LatestVersion()},
	})
	if len(errs) > 0 {
		problem(fmt.Sprintf("namespace %q has an invalid Pod Security label", ns.Name),
			fmt.Sprintf("fix its %s label (%s)", psaapi.EnforceLevelLabel, errs.ToAggregate()))
		return
	}
	if pol.Enforce.Level == psaapi.LevelPrivileged {
		return
	}
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks())
	if err != nil { // unreachable: the default checks are valid
		problem("the Pod Security evaluator", err.Error())
		return
	}
	agg := policy.AggregateCheckResults(evaluator.EvaluatePod(pol.Enforce, &req.Pod.ObjectMeta, &req.Pod.Spec))
	if agg.Allowed {
		return
	}
	fix := fmt.Sprintf("kubectl label namespace %s %s=baseline --overwrite", ns.Name, psaapi.EnforceLevelLabel)
	if req.SecurityHint != "" {
		fix = req.SecurityHint + ", or " + fix
	}
	problem(fmt.Sprintf("namespace %q enforces the %s Pod Security Standard, which refuses the Job's pod (%s)",
		ns.Name, pol.Enforce.Level, agg.ForbiddenDetail()), fix)
}

// waitsForConsumer reports whether pvc is Pending only because its
// StorageClass binds on first use (volumeBindingMode WaitForFirstConsumer).
func waitsForConsumer(ctx context.Context, c kubernetes.Interface, pvc *corev1.PersistentVolumeClaim) bool {
	if pvc.Status.Phase != corev1.ClaimPending || pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName == "" {
		return false
	}
	sc, err := c.StorageV1().StorageClasses().Get(ctx, *pvc.Spec.StorageClassName, metav1.GetOptions{})
	if err != nil {
		return false
	}
	return sc.VolumeBindingMode != nil && *sc.VolumeBindingMode == "WaitForFirstConsumer"
}

func phase(pvc *corev1.PersistentVolumeClaim) string {
	if pvc.Status.Phase == "" {
		return string(corev1.ClaimPending)
	}
	return string(pvc.Status.Phase)
}
