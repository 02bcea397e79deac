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
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/worldbackup/worldbackup/jobapi"
)

// stuckReasons are the waiting reasons of a container that will not start
// without a change by someone: the kubelet retries them, but a retry does
// not fix a wrong image name or a missing Secret key.
var stuckReasons = map[string]bool{
	"ErrImagePull":               true,
	"ImagePullBackOff":           true,
	"ErrImageNeverPull":          true,
	"InvalidImageName":           true,
	"CreateContainerConfigError": true,
	"CreateContainerError":       true,
}

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
	// (an image that cannot be pulled, a missing Secret key).
	Container
	// Unschedulable: no node takes the pod. A cluster autoscaler may still
	// add one, so it gets a longer grace.
	Unschedulable
	// Creating: the pod is on a node but its sandbox or volumes cannot be
	// set up (creatingReasons): no CNI plugin, a volume attached to another
	// node, a volume that cannot be mounted.
	Creating
	// Refused: the Job has no pod because the API server refuses to create
	// it (its FailedCreate events): Pod Security, a quota, a webhook.
	Refused
)

// Cause is why one pod (or the Job, for Refused) is stuck, in words for the
// `pulumi up` output.
type Cause struct {
	Kind Kind
	// UID is the stuck object's: the pod's, or the Job's for Refused. The
	// Tracker times each by it.
	UID     types.UID
	Pod     string // "" for Refused
	Reason  string // e.g. ImagePullBackOff, Unschedulable, FailedMount
	Message string // the kubelet's, the scheduler's or the event's message
}

// String names the pod, the reason and the message.
func (c Cause) String() string {
	who := "pod " + c.Pod
	if c.Kind == Refused {
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
		if w := cs.State.Waiting; w != nil && stuckReasons[w.Reason] {
			msg := w.Message
			if cs.Image != "" && !strings.Contains(msg, cs.Image) {
				msg = strings.TrimSpace(fmt.Sprintf("image %s: %s", cs.Image, msg))
			}
			return Cause{Kind: Container, UID: pod.UID, Pod: pod.Name, Reason: w.Reason, Message: clip(strings.TrimSuffix(msg, ": "))}
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
		if w := cs.State.Waiting; w == nil || stuckReasons[w.Reason] {
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
		return Cause{Kind: Refused, UID: job, Reason: e.Reason, Message: clip(e.Message)}
	}
	return Cause{UID: job}
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
	Unschedulable time.Duration
	Creating      time.Duration
	Refused       time.Duration
}

// DefaultGrace: a minute for a container (a registry hiccup heals within
// it); five for an unschedulable pod (a cluster autoscaler adds a node in a
// few minutes); two for a pod whose sandbox or volumes cannot be set up (a
// slow attach or a CNI plugin still starting heal within them: the kubelet
// itself gives up waiting for volumes after about two); half a minute for a
// Job whose pods the API server refuses (admission does not change its mind
// by itself; the Job controller retries a few times in that time).
var DefaultGrace = Grace{Container: time.Minute, Unschedulable: 5 * time.Minute, Creating: 2 * time.Minute, Refused: 30 * time.Second}

func (g Grace) of(k Kind) time.Duration {
	switch k {
	case Unschedulable:
		return g.Unschedulable
	case Creating:
		return g.Creating
	case Refused:
		return g.Refused
	default:
		return g.Container
	}
}

// Tracker remembers since when each pod (or Job) has been stuck, by its own
// clock (the API server's may differ).
type Tracker struct {
	since map[types.UID]stuckSince
}

type stuckSince struct {
	kind Kind
	at   time.Time
}

// Observe records the objects looked at now, each with how it is stuck (a
// NotStuck Cause for one that is not), and returns the first cause that has
// been stuck (the same kind throughout) for longer than its grace; ok is
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
		if !found || s.kind != c.Kind {
			s = stuckSince{kind: c.Kind, at: now}
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
