// Package observe looks at a component's Job while `pulumi up` waits for it.
// A Watchdog fails a Job whose pod cannot start (an image that cannot be
// pulled, a missing Secret key, a pod no node takes, a sandbox or a volume
// that cannot be set up, a pod the API server refuses to create) once it has
// been stuck for a grace period, so the Kubernetes provider's await ends at
// once with DeadlineExceeded instead of at the Job's deadline; Result reads
// what the finished run reported in its pod's termination message. The pure
// parts (Stuck, JobRefused, Tracker, ParseSummary) hold the decisions and are
// tested without a cluster.
package observe

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/worldbackup/worldbackup/jobapi"
)

// stuckReasons are, beside pullReasons, the waiting reasons of a
// container that will not start without a change by someone: the kubelet
// retries them, but a retry does not fix a wrong image name or a missing
// Secret key.
var stuckReasons = map[string]bool{
	"ErrImageNeverPull":          true,
	"InvalidImageName":           true,
	"CreateContainerConfigError": true,
	"CreateContainerError":       true,
}

// finalPull are what an image pull's error says, in any case, when a retry
// cannot heal it: the registry does not have the name or tag, refuses the
// pull, or has no image for the node; or the registry's host name does not
// exist. Any other pull error (a connection refused or timing out, a TLS
// handshake that times out, a 5xx or 429 answer) may be a registry's blip
// and gets the Registry grace. The kubelet's ImagePullBackOff message
// carries the last pull's error (Kubernetes 1.32 and later); an older
// kubelet's says only "Back-off pulling image", which is judged a blip.
var finalPull = []string{
	"not found",                   // containerd: "…: not found", a tag or repository the registry does not have
	"manifest unknown",            // the registry's error code (CRI-O quotes it)
	"name unknown",                // the registry's error code for a repository
	"pull access denied",          // Docker Hub: "pull access denied, repository does not exist or may require authorization"
	"repository does not exist",   //
	"unauthorized",                // 401
	"forbidden",                   // 403
	"insufficient_scope",          // a token without pull rights
	"authentication required",     //
	"no match for platform",       // no image for the node's OS and architecture
	"no such host",                // the host name does not exist (an NXDOMAIN; a DNS server down times out instead)
	"invalid reference format",    //
	"signature validation failed", // the kubelet's SignatureValidationFailed, in its back-off message
	"x509: ",                      // a certificate the node does not trust, or expired
	"http response to https",      // "server gave HTTP response to HTTPS client": a registry without TLS
	"is no longer supported",      // containerd: a schema 1 image
}

// pullReasons are the waiting reasons of a container's image pull
// (RegistryUnavailable: the kubelet's reason for a runtime's
// ErrRegistryUnavailable).
var pullReasons = map[string]bool{"ErrImagePull": true, "ImagePullBackOff": true, "RegistryUnavailable": true,
	"SignatureValidationFailed": true}

// stuck says whether a container waiting with reason waits for its image's
// pull or for something else that may never come (stuckReasons).
func stuck(reason string) bool { return pullReasons[reason] || stuckReasons[reason] }

// namesInMessage are what retryablePull leaves out of a pull's message
// before it looks for finalPull's words: quoted strings and any word with a
// '/' or a '.' in it (image references, URLs, host names, addresses), so
// that an image, repository or host named …/forbidden-app, unauthorized.example
// does not read as the registry's refusal.
var namesInMessage = regexp.MustCompile(`"[^"]*"|[^\s"]*[/.][^\s"]*`)

// creatingReasons are the reasons of the Warning events that say why a
// scheduled pod stays in ContainerCreating: its sandbox (network) or its
// volumes cannot be set up. The pod's status shows none of them (only
// ContainerCreating), so they are read from its events. Ranked: the first
// names the cause best (a Multi-Attach error, where the kubelet's FailedMount
// says only that it timed out waiting).
var creatingReasons = []string{
	"FailedAttachVolume",     // attach/detach controller, e.g. Multi-Attach error
	"FailedMapVolume",        // a block volume
	"FailedMount",            // the kubelet, e.g. a hostPath type check, a CSI mount error
	"FailedCreatePodSandBox", // the runtime, e.g. no CNI plugin
	"NetworkNotReady",        // the kubelet: the runtime's network is not ready
}

// refusedReason is the reason of the Job controller's Warning event when the
// API server refuses the Job's pod (Pod Security admission, a quota, a
// webhook): no pod exists to look at, only the Job's events.
const refusedReason = "FailedCreate"

// maxMessage bounds a message taken from the cluster (a status or an event)
// in a report.
const maxMessage = 1024

// Kind says how a pod is stuck; each kind has its own grace period.
type Kind int

// The kinds of stuck pods.
const (
	// NotStuck: the pod runs, starts or finished.
	NotStuck Kind = iota
	// Container: a container waits for something that a retry does not fix
	// (an image the registry does not have or refuses, a missing Secret
	// key).
	Container
	// Registry: the image's pull fails in a way a retry may heal (finalPull
	// says which do not): a registry that is down, slow or answers 5xx gets
	// a few minutes to come back, as the kubelet keeps retrying.
	Registry
	// Unschedulable: no node takes the pod. A cluster autoscaler may still
	// add one, so it gets a longer grace.
	Unschedulable
	// Creating: the pod is on a node but its sandbox or volumes cannot be
	// set up (creatingReasons): no CNI plugin, a volume attached to another
	// node, a volume that cannot be mounted.
	Creating
	// Refused: the Job has no pod because the API server refuses to create
	// it (its FailedCreate events): Pod Security, a webhook, a quota the pod
	// alone exceeds.
	Refused
	// Quota: the API server refuses the pod because a ResourceQuota is full
	// with what other pods use, though the pod alone fits its limits
	// (quotaFull): the Job controller keeps trying, and the pod is admitted
	// once others finish.
	Quota
)

// Cause is why one pod (or the Job, for Refused and Quota) is stuck, in
// words for the `pulumi up` output.
type Cause struct {
	Kind Kind
	// UID is the stuck object's: the pod's, or the Job's for Refused and
	// Quota. The Tracker times each by it.
	UID     types.UID
	Pod     string // "" for Refused and Quota
	Reason  string // e.g. ImagePullBackOff, Unschedulable, FailedMount
	Message string // the kubelet's, the scheduler's or the event's message
}

// String names the pod, the reason and the message.
func (c Cause) String() string {
	who := "pod " + c.Pod
	if c.Kind == Refused || c.Kind == Quota {
		who = "no pod can be created"
	}
	if c.Message == "" {
		return fmt.Sprintf("%s: %s", who, c.Reason)
	}
	return fmt.Sprintf("%s: %s: %s", who, c.Reason, c.Message)
}

// Stuck says whether pod cannot start by itself, and why. A pod that is
// being deleted or has finished is not stuck. events are the pod's events,
// read only when NeedsEvents(pod): their warnings name why a pod stays in
// ContainerCreating, unless a progress event came after (progressSince);
// others are ignored.
func Stuck(pod *corev1.Pod, events []corev1.Event) Cause {
	if !alive(pod) {
		return Cause{UID: pod.UID}
	}
	for _, cs := range containerStatuses(pod) {
		if w := cs.State.Waiting; w != nil && stuck(w.Reason) {
			msg := w.Message
			if cs.Image != "" && !strings.Contains(msg, cs.Image) {
				msg = strings.TrimSpace(fmt.Sprintf("image %s: %s", cs.Image, msg))
			}
			kind := Container
			if retryablePull(w.Reason, w.Message, cs.Image) {
				kind = Registry
			}
			return Cause{Kind: kind, UID: pod.UID, Pod: pod.Name, Reason: w.Reason, Message: clip(strings.TrimSuffix(msg, ": "))}
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return Cause{Kind: Unschedulable, UID: pod.UID, Pod: pod.Name, Reason: c.Reason, Message: clip(c.Message)}
		}
	}
	if NeedsEvents(pod) {
		if e, ok := latestWarning(events, pod.UID, creatingReasons...); ok && !progressSince(events, pod.UID, lastSeen(e)) {
			return Cause{Kind: Creating, UID: pod.UID, Pod: pod.Name, Reason: e.Reason, Message: clip(e.Message)}
		}
	}
	return Cause{UID: pod.UID}
}

// retryablePull says whether a container waiting with reason and msg
// waits for a pull of image that a retry may heal: a pull error that
// finalPull does not know as final, or the runtime saying the registry is
// unavailable. The names in msg (the image's, the registry's URL and host:
// namesInMessage) are left out before it is matched.
func retryablePull(reason, msg, image string) bool {
	switch reason {
	case "RegistryUnavailable":
		return true
	case "ErrImagePull", "ImagePullBackOff":
		if image != "" {
			msg = strings.ReplaceAll(msg, image, "")
		}
		msg = strings.ToLower(namesInMessage.ReplaceAllString(msg, ""))
		return !slices.ContainsFunc(finalPull, func(s string) bool { return strings.Contains(msg, s) })
	default:
		return false
	}
}

// progressReasons are the reasons of the Normal events that say a pod's
// start moved on: its volume attached, its image being pulled or pulled,
// a container created or started. One seen after a creating warning (a
// Multi-Attach error while the game's pod let go of the volume) says the
// warning is history, though the pod still waits in ContainerCreating
// (pulling a large image): it is not stuck.
var progressReasons = []string{"SuccessfulAttachVolume", "SuccessfulMountVolume", "Pulling", "Pulled", "Created", "Started"}

// progressSince says whether events hold a Normal progress event about the
// object uid last seen after t (both the cluster's times).
func progressSince(events []corev1.Event, uid types.UID, t time.Time) bool {
	return slices.ContainsFunc(events, func(e corev1.Event) bool {
		return e.Type == corev1.EventTypeNormal && e.InvolvedObject.UID == uid &&
			slices.Contains(progressReasons, e.Reason) && lastSeen(e).After(t)
	})
}

// NeedsEvents says whether only pod's events can tell why it does not start:
// it is on a node, pending, and none of its containers has started or is
// stuck by its status (they wait in ContainerCreating or PodInitializing).
func NeedsEvents(pod *corev1.Pod) bool {
	if !alive(pod) || pod.Status.Phase != corev1.PodPending || pod.Spec.NodeName == "" {
		return false
	}
	for _, cs := range containerStatuses(pod) {
		if w := cs.State.Waiting; w == nil || stuck(w.Reason) {
			return false
		}
	}
	return true
}

// JobNeedsEvents says whether only the Job's events can tell why it does
// not run: none of its pods is alive (none was created, or the last one
// finished or is being deleted and no new one came).
func JobNeedsEvents(pods []corev1.Pod) bool {
	for i := range pods {
		if alive(&pods[i]) {
			return false
		}
	}
	return true
}

// JobRefused says whether the Job cannot get a pod because the API server
// refuses to create it: the Job has no live pod and its events hold a
// FailedCreate warning. job is the Job's UID and Cause carries it; pods are
// the Job's pods, events the Job's events, read only when
// JobNeedsEvents(pods).
func JobRefused(job types.UID, pods []corev1.Pod, events []corev1.Event) Cause {
	if !JobNeedsEvents(pods) {
		return Cause{UID: job}
	}
	if e, ok := latestWarning(events, job, refusedReason); ok {
		kind := Refused
		if quotaFull(e.Message) {
			kind = Quota
		}
		return Cause{Kind: kind, UID: job, Reason: e.Reason, Message: clip(e.Message)}
	}
	return Cause{UID: job}
}

// quotaFull says whether msg, a FailedCreate event's, is a ResourceQuota's
// refusal of a pod that fits the quota's limits by itself: the quota
// admission's "exceeded quota: <name>, requested: pods=1, used: pods=4,
// limited: pods=4", each requested amount at most its limit. Such a pod is
// admitted once other pods give back what they use. A pod that asks for
// more than a limit (a quota of no pods), or a message of another form, is
// refused for good.
func quotaFull(msg string) bool {
	_, rest, ok := strings.Cut(msg, "exceeded quota: ")
	if !ok {
		return false
	}
	_, rest, ok = strings.Cut(rest, ", requested: ")
	if !ok {
		return false
	}
	requested, rest, ok := strings.Cut(rest, ", used: ")
	if !ok {
		return false
	}
	_, limited, ok := strings.Cut(rest, ", limited: ")
	if !ok {
		return false
	}
	want, ok := quantities(requested)
	if !ok || len(want) == 0 {
		return false
	}
	limits, ok := quantities(limited)
	if !ok {
		return false
	}
	for name, q := range want {
		limit, found := limits[name]
		if !found || q.Cmp(limit) > 0 {
			return false
		}
	}
	return true
}

// quantities parses the quota admission's list of amounts,
// "pods=1,requests.cpu=500m"; ok is false for anything else.
func quantities(list string) (map[string]resource.Quantity, bool) {
	qs := map[string]resource.Quantity{}
	for item := range strings.SplitSeq(strings.TrimSpace(list), ",") {
		name, value, found := strings.Cut(item, "=")
		if !found || name == "" {
			return nil, false
		}
		q, err := resource.ParseQuantity(value)
		if err != nil {
			return nil, false
		}
		qs[name] = q
	}
	return qs, true
}

// alive says whether pod is neither being deleted nor finished.
func alive(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp == nil && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

func containerStatuses(pod *corev1.Pod) []corev1.ContainerStatus {
	return append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
}

// latestWarning returns, among the Warning events about the object uid whose
// reason is one of reasons, one of the first-ranked reason found, the latest
// of those.
func latestWarning(events []corev1.Event, uid types.UID, reasons ...string) (corev1.Event, bool) {
	var (
		best     corev1.Event
		bestRank = len(reasons)
	)
	for _, e := range events {
		if e.Type != corev1.EventTypeWarning || e.InvolvedObject.UID != uid {
			continue
		}
		rank := slices.Index(reasons, e.Reason)
		if rank < 0 {
			continue
		}
		if rank < bestRank || (rank == bestRank && lastSeen(e).After(lastSeen(best))) {
			best, bestRank = e, rank
		}
	}
	return best, bestRank < len(reasons)
}

// lastSeen is when the event last happened, whichever API wrote it.
func lastSeen(e corev1.Event) time.Time {
	t := e.LastTimestamp.Time
	if e.Series != nil && e.Series.LastObservedTime.After(t) {
		t = e.Series.LastObservedTime.Time
	}
	if e.EventTime.After(t) {
		t = e.EventTime.Time
	}
	return t
}

// clip bounds a message from the cluster to maxMessage bytes, at a rune
// boundary.
func clip(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	cut := maxMessage
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// Grace is how long a pod may stay stuck, per kind, before the Job is failed.
type Grace struct {
	Container     time.Duration
	Registry      time.Duration
	Unschedulable time.Duration
	Creating      time.Duration
	Refused       time.Duration
	Quota         time.Duration
}

// DefaultGrace: a minute for a container whose image the registry does not
// have or refuses, or whose Secret key is missing (the kubelet's first
// retries show it is not a fluke); five for a pull that fails in a way a
// retry may heal (a registry restarting or failing over, a rate limit, a
// network partition) and for an unschedulable pod (a cluster autoscaler
// adds a node in a few minutes); two for a pod whose sandbox or volumes
// cannot be set up (a slow attach or a CNI plugin still starting heal
// within them: the kubelet itself gives up waiting for volumes after about
// two); half a minute for a Job whose pods the API server refuses
// (admission does not change its mind by itself; the Job controller retries
// a few times in that time), five when a ResourceQuota that other pods fill
// refuses them (they may finish: a backup of another server, a rollout).
var DefaultGrace = Grace{Container: time.Minute, Registry: 5 * time.Minute, Unschedulable: 5 * time.Minute,
	Creating: 2 * time.Minute, Refused: 30 * time.Second, Quota: 5 * time.Minute}

func (g Grace) of(k Kind) time.Duration {
	switch k {
	case Registry:
		return g.Registry
	case Unschedulable:
		return g.Unschedulable
	case Creating:
		return g.Creating
	case Refused:
		return g.Refused
	case Quota:
		return g.Quota
	default:
		return g.Container
	}
}

// pullWait says whether c is a container's wait for its image's pull.
func pullWait(c Cause) bool {
	return c.Kind == Registry || c.Kind == Container && pullReasons[c.Reason]
}

// Tracker remembers since when each pod (or Job) has been stuck, by its own
// clock (the API server's may differ).
type Tracker struct {
	since map[types.UID]stuckSince
}

type stuckSince struct {
	kind Kind
	pull bool // a wait for the image's pull (pullWait)
	at   time.Time
}

// Observe records the objects looked at now, each with how it is stuck (a
// NotStuck Cause for one that is not), and returns the first cause that has
// been stuck (the same kind throughout; an image's pull, final or not, is
// one wait) for longer than the grace of its kind now; ok is
// false when none has. An object that is no longer stuck, or no longer
// looked at, is forgotten.
func (t *Tracker) Observe(causes []Cause, now time.Time, g Grace) (cause Cause, ok bool) {
	if t.since == nil {
		t.since = map[types.UID]stuckSince{}
	}
	seen := make(map[types.UID]bool, len(causes))
	for _, c := range causes {
		seen[c.UID] = true
		if c.Kind == NotStuck {
			delete(t.since, c.UID)
			continue
		}
		s, found := t.since[c.UID]
		switch {
		case found && s.pull && pullWait(c):
			// A pull's failures, final or not, are one wait: its status
			// alternates between ErrImagePull and ImagePullBackOff, and
			// an older kubelet's back-off says nothing of the error. The
			// wait is judged by the grace of what it shows now.
			s.kind = c.Kind
			t.since[c.UID] = s
		case !found || s.kind != c.Kind || s.pull != pullWait(c):
			s = stuckSince{kind: c.Kind, pull: pullWait(c), at: now}
			t.since[c.UID] = s
		}
		if !ok && now.Sub(s.at) >= g.of(c.Kind) {
			cause, ok = c, true
		}
	}
	for uid := range t.since {
		if !seen[uid] {
			delete(t.since, uid)
		}
	}
	return cause, ok
}

// Summary is what a run reports in its termination message (any kind's
// result of jobapi), the fields the components expose.
type Summary = jobapi.Summary

// ParseSummary decodes a termination message (see jobapi.ParseSummary).
func ParseSummary(msg string) (Summary, error) { return jobapi.ParseSummary(msg) }
