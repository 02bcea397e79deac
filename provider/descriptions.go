package provider

import (
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/worldbackup/worldbackup/jobapi"
	"github.com/worldbackup/worldbackup/provider/jobspec"
	"github.com/worldbackup/worldbackup/provider/observe"
)

// Descriptions of the inputs WorldBackup and WorldRestore share, written
// once for both schemas.
const (
	descLabels = "Extra labels on the Job and its pod. The app.kubernetes.io/* and " +
		"worldbackup.dev/server labels are set by the component."
	descAnnotations = "Extra annotations on the Job and its pod. worldbackup.dev/run-id, pulumi.com/skipAwait and " +
		"pulumi.com/replaceUnready are set by the component; pulumi.com/waitFor and pulumi.com/deletionPropagationPolicy " +
		"are refused (the component decides how the Job is awaited and replaced)."
	descTimeout = "How long `pulumi up` waits for the Job, a duration like 30m or 2h, at least deadline. " +
		"Default: deadline + 5m."
	descGamePodSelector = "Labels of the game server's pod, which mounts the world claim: the Job's " +
		"pod is scheduled next to it (same node, topology key kubernetes.io/hostname), so a ReadWriteOnce " +
		"world volume attached there can be mounted. Default: {statefulset.kubernetes.io/pod-name: <server>-0}."
	descReplaceUnready = "Annotate the Job pulumi.com/replaceUnready, so the next `pulumi up` replaces " +
		"a Job that did not complete (failed): a failed run is retried with the same runId. Default: true; " +
		"false with skipAwait (the next up would replace a Job still running) and when the Kubernetes provider renders " +
		"(renderYamlToDirectory: there is no live Job to check)."
	descPreflight = "At `pulumi preview` (and the preview of `pulumi up`), and again at `pulumi up` before the " +
		"Job is created (an up may skip the preview: --skip-preview, the Automation API), look up read-only what the " +
		"Job needs: the namespace and whether its Pod Security enforce level admits the pod, the service " +
		"account, the Secret and its key, the claims and whether they are Bound; fail with one message listing " +
		"every missing piece and the command that makes it. A cluster it cannot reach, or a lookup RBAC " +
		"forbids, is a warning. At `pulumi up` (unless skipAwait) it also watches the Job: when its pod cannot " +
		"start (an image that cannot be pulled, a missing Secret key) for 1 minute, its sandbox or volumes cannot " +
		"be set up (FailedCreatePodSandBox, FailedAttachVolume such as a Multi-Attach error, FailedMount) for 2, no " +
		"node takes it for 5, or no pod can be created (the Job's FailedCreate events: Pod Security, a quota) for " +
		"30 seconds, it names the cause and fails the Job (activeDeadlineSeconds set to 1, reason DeadlineExceeded), " +
		"so `pulumi up` ends then rather than at the deadline; it needs get and patch on Jobs and list on pods and " +
		"events. Then it reads what the run reported (the status, sha256 and sizeBytes outputs). It talks to the " +
		"cluster of the Kubernetes provider the component is given (its kubeconfig and context; the default provider's " +
		"kubernetes:kubeconfig and kubernetes:context config), else the ambient kubeconfig. Default: true; false when " +
		"the Kubernetes provider renders (renderYamlToDirectory: no cluster). Set false when the same program " +
		"creates these objects."
	descKubeContext = "The kubeconfig context the preflight and the pod watchdog use, in place of the " +
		"Kubernetes provider's. They talk to the cluster of the provider this component is given: its kubeconfig " +
		"(a path or the contents) and context inputs (for the default provider, the stack config " +
		"kubernetes:kubeconfig and kubernetes:context), else the ambient kubeconfig ($KUBECONFIG, ~/.kube/config, " +
		"or the in-cluster service account); the kubeconfig is read in the plugin's process and never lands in " +
		"the state. Default: the provider's context, else the kubeconfig's current context."
)

// descObserved says when an output read from the run's termination message
// is known.
const descObserved = "Read from the Job's pod (its termination message) after `pulumi up` waited for the Job. " +
	"Unknown at preview for a Job that has not run yet; empty where it cannot be known: with skipAwait, with " +
	"preflight false (render mode: no cluster to ask), when the Job's pod is gone (ttlAfterFinished) or the " +
	"cluster cannot be reached (a warning says why)."

// Values of the shared rules and the archiver's defaults that descriptions
// quote, built from their one owner, jobapi.
var (
	descMaxServerLen = strconv.Itoa(jobapi.MaxJobServerLen)
	descMaxRunIDLen  = strconv.Itoa(jobapi.MaxRunIDLen)
	descMaxBytes     = resource.NewQuantity(jobapi.DefaultMaxBytes, resource.BinarySI).String()
	// descMaxScheduleLen is the longest server of a WorldVerifySchedule.
	descMaxScheduleLen = strconv.Itoa(jobspec.MaxScheduleNameLen - len(jobspec.VerifyScheduleName("")))
	// descMountPath says which mount paths are refused (overNeeded).
	descMountPath = "A mount path is a folder of its own: not at, above or below another mount, /tmp, or a path the " +
		"container needs (" + strings.Join(append(jobspec.ImagePaths(), jobspec.RuntimePaths()...), ", ") + ")."
	// descGamePodAffinity quotes the pod watchdog's grace for a pod no node
	// takes (observe.DefaultGrace), what a required affinity meets while
	// the server is stopped.
	descGamePodAffinity = "preferred, required or none: how the pod is drawn to the game pod. " +
		"preferred (default): on its node when it runs; a stopped server does not block the Job. required: " +
		"only on its node (not with nodeName): while the server is stopped no node takes the pod, so during `pulumi up` " +
		"the pod watchdog fails the Job once it has been unschedulable for " + jobapi.ShortDuration(observe.DefaultGrace.Unschedulable) +
		" (a Job nothing watches, with skipAwait, in render mode or a schedule's, waits until its deadline); start the " +
		"server first, or use preferred. none: no pod affinity."
)

// descFlag is the archiver flag name as a description quotes it.
func descFlag(name string) string { return jobapi.Flag(name) }
