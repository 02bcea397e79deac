// Package observe looks at a component's Job while `pulumi up` waits for it.
// A Watchdog fails a Job whose pod cannot start (an image that cannot be
// pulled, a missing Secret key, a pod no node takes) once it has been stuck
// for a grace period, so the Kubernetes provider's await ends at once with
// DeadlineExceeded instead of at the Job's deadline; Result reads what the
// finished run reported in its pod's termination message. The pure parts
// (Stuck, Tracker, ParseSummary) hold the decisions and are tested without a
// cluster.
package observe

import (
	"fmt"
	"strings"
	"time"

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
)

// Cause is why one pod is stuck, in words for the `pulumi up` output.
type Cause struct {
	Kind    Kind
	Pod     string
	Reason  string // e.g. ImagePullBackOff, Unschedulable
	Message string // the kubelet's or the scheduler's message
}

// String names the pod, the reason and the message.
func (c Cause) String() string {
	if c.Message == "" {
		return fmt.Sprintf("pod %s: %s", c.Pod, c.Reason)
	}
	return fmt.Sprintf("pod %s: %s: %s", c.Pod, c.Reason, c.Message)
}

// Stuck says whether pod cannot start by itself, and why. A pod that is
// being deleted or has finished is not stuck.
func Stuck(pod *corev1.Pod) Cause {
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return Cause{}
	}
	statuses := append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
	for _, cs := range statuses {
		if w := cs.State.Waiting; w != nil && stuckReasons[w.Reason] {
			msg := w.Message
			if cs.Image != "" && !strings.Contains(msg, cs.Image) {
				msg = strings.TrimSpace(fmt.Sprintf("image %s: %s", cs.Image, msg))
			}
			return Cause{Kind: Container, Pod: pod.Name, Reason: w.Reason, Message: strings.TrimSuffix(msg, ": ")}
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return Cause{Kind: Unschedulable, Pod: pod.Name, Reason: c.Reason, Message: c.Message}
		}
	}
	return Cause{}
}

// Grace is how long a pod may stay stuck, per kind, before the Job is failed.
type Grace struct {
	Container     time.Duration
	Unschedulable time.Duration
}

// DefaultGrace: a minute for a container (a registry hiccup heals within
// it), five for an unschedulable pod (a cluster autoscaler adds a node in a
// few minutes).
var DefaultGrace = Grace{Container: time.Minute, Unschedulable: 5 * time.Minute}

func (g Grace) of(k Kind) time.Duration {
	if k == Unschedulable {
		return g.Unschedulable
	}
	return g.Container
}

// Tracker remembers since when each pod has been stuck (by its own clock:
// the API server's may differ).
type Tracker struct {
	since map[types.UID]stuckSince
}

type stuckSince struct {
	kind Kind
	at   time.Time
}

// Observe records pods as seen at now and returns the cause of the first pod
// that has been stuck (the same kind throughout) for longer than its grace;
// ok is false when none has. A pod that is no longer stuck is forgotten.
func (t *Tracker) Observe(pods []corev1.Pod, now time.Time, g Grace) (cause Cause, ok bool) {
	if t.since == nil {
		t.since = map[types.UID]stuckSince{}
	}
	seen := make(map[types.UID]bool, len(pods))
	for i := range pods {
		p := &pods[i]
		seen[p.UID] = true
		c := Stuck(p)
		if c.Kind == NotStuck {
			delete(t.since, p.UID)
			continue
		}
		s, found := t.since[p.UID]
		if !found || s.kind != c.Kind {
			s = stuckSince{kind: c.Kind, at: now}
			t.since[p.UID] = s
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
