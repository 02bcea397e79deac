package observe

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// ArchiverContainer is the name of the archiver container in the components' Jobs.
const ArchiverContainer = "archiver"

// DefaultInterval is how often a Watchdog looks at the Job's pods.
const DefaultInterval = 5 * time.Second

// Watchdog watches one Job while `pulumi up` waits for it.
type Watchdog struct {
	Client    kubernetes.Interface
	Namespace string
	Job       string
	Grace     Grace
	Interval  time.Duration // 0: DefaultInterval
	// Timeout, when set, ends the watch that long after the Job it waits
	// for was first seen (not after Run started: in a large `pulumi up`
	// the engine creates a Job long after its component was built).
	Timeout time.Duration
	// Report is told the cause before the Job is failed, and any trouble
	// failing it.
	Report func(msg string)
	// Warn, when set, is told once that the events cannot be read (RBAC).
	Warn func(msg string)
	// Now is the clock; nil: time.Now.
	Now func() time.Time

	warned *sync.Once // Warn is told once per Run
}

// Run looks every Interval (backing off to every absentBackoff Intervals
// while the Job is not there) until ctx ends, the Job it waits for has
// finished, or it has failed the Job because a pod stayed stuck past its
// grace. It fails a Job by setting spec.activeDeadlineSeconds to 1 (a
// mutable field): the Job controller then fails it with reason
// DeadlineExceeded, which the Kubernetes provider's Job await reports at
// once.
//
// A finished Job that is already there when Run starts is the one `pulumi
// up` may be about to replace (same name): Run waits for a new one. Lookups
// that fail are retried; Run never fails a Job for them.
func (w Watchdog) Run(ctx context.Context) {
	interval := w.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	now := w.Now
	if now == nil {
		now = time.Now
	}
	w.warned = new(sync.Once)
	var (
		tr    Tracker
		stale types.UID // a Job that was finished when Run started
		first = true
		until time.Time // Timeout after the Job was first seen
	)
	wait := interval
	timer := time.NewTimer(interval)
	defer timer.Stop()
	for {
		done, uid, live := w.step(ctx, &tr, now(), first, stale)
		if first {
			stale, first = uid, false
		}
		if done {
			return
		}
		if live && until.IsZero() && w.Timeout > 0 {
			until = now().Add(w.Timeout)
		}
		if !until.IsZero() && !now().Before(until) {
			return
		}
		wait = nextWait(wait, interval, live)
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
	}
}

// absentBackoff bounds how far the looks for a Job that is not there (yet)
// spread out, in intervals: in a large `pulumi up` the engine creates
// Jobs over many minutes, and a look every interval from each of a fleet's
// watchdogs would keep the API server busy answering 404s.
const absentBackoff = 4

// nextWait is the wait before the next look, after one that waited wait:
// interval while the Job is there, else doubling from interval up to
// absentBackoff intervals.
func nextWait(wait, interval time.Duration, live bool) time.Duration {
	if live {
		return interval
	}
	return min(2*wait, absentBackoff*interval)
}

// step looks once; it returns whether Run is done, on the first look the
// UID of a Job that had already finished, and whether it found the Job it
// waits for (live: there and not finished).
func (w Watchdog) step(ctx context.Context, tr *Tracker, now time.Time, first bool, stale types.UID) (done bool, staleUID types.UID, live bool) {
	job, err := w.Client.BatchV1().Jobs(w.Namespace).Get(ctx, w.Job, metav1.GetOptions{})
	if err != nil { // not created yet, or a transient error: look again
		return false, "", false
	}
	if finished(job) {
		if first {
			return false, job.UID, false
		}
		return job.UID != stale, "", false
	}
	pods, err := jobPods(ctx, w.Client, job)
	if err != nil {
		return false, "", true
	}
	causes := make([]Cause, 0, len(pods)+1)
	for i := range pods {
		var events []corev1.Event
		if NeedsEvents(&pods[i]) {
			events = w.events(ctx, pods[i].UID, "")
		}
		causes = append(causes, Stuck(&pods[i], events))
	}
	var jobEvents []corev1.Event
	if JobNeedsEvents(pods) {
		jobEvents = w.events(ctx, job.UID, corev1.EventTypeWarning)
	}
	causes = append(causes, JobRefused(job.UID, pods, jobEvents))
	cause, ok := tr.Observe(causes, now, w.Grace)
	if !ok {
		return false, "", true
	}
	w.Report(fmt.Sprintf("Job %s/%s cannot run: %s; failing it now rather than at its deadline "+
		"(fix the cause, then run `pulumi up` again)", w.Namespace, w.Job, cause))
	if err := FailJob(ctx, w.Client, w.Namespace, w.Job); err != nil {
		w.Report(err.Error())
	}
	return true, "", true
}

// maxEvents bounds the events read about one object at one look: the
// kubelet and the controllers fold repeats into one event (its count), so a
// stuck object has a few.
const maxEvents = 100

// events lists the events of type typ ("": any) about the object uid in
// the Job's namespace (none when they cannot be read: the look is retried;
// a lookup RBAC refuses is told to Warn once).
func (w Watchdog) events(ctx context.Context, uid types.UID, typ string) []corev1.Event {
	set := fields.Set{"involvedObject.uid": string(uid)}
	if typ != "" {
		set["type"] = typ
	}
	sel := set.AsSelector().String()
	list, err := w.Client.CoreV1().Events(w.Namespace).List(ctx, metav1.ListOptions{FieldSelector: sel, Limit: maxEvents})
	if err != nil {
		if (apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)) && w.Warn != nil && w.warned != nil {
			w.warned.Do(func() {
				w.Warn(fmt.Sprintf("cannot read the events of Job %s/%s (%s): a pod that cannot be created, or whose "+
					"sandbox or volumes cannot be set up, is not named; grant list on events", w.Namespace, w.Job, apierrors.ReasonForError(err)))
			})
		}
		return nil
	}
	return list.Items
}

// FailJob makes the Job's deadline pass now, so its controller fails it
// (reason DeadlineExceeded) and deletes its running pods.
func FailJob(ctx context.Context, c kubernetes.Interface, ns, name string) error {
	patch := []byte(`{"spec":{"activeDeadlineSeconds":1}}`)
	if _, err := c.BatchV1().Jobs(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("failing Job %s/%s (setting activeDeadlineSeconds to 1): %w", ns, name, err)
	}
	return nil
}

// finished says whether the Job has completed or failed.
func finished(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// jobPods lists the pods of exactly this Job (its selector holds its UID).
func jobPods(ctx context.Context, c kubernetes.Interface, job *batchv1.Job) ([]corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(job.Spec.Selector)
	if err != nil || job.Spec.Selector == nil {
		return nil, fmt.Errorf("the selector of Job %s/%s: %v", job.Namespace, job.Name, err)
	}
	pods, err := c.CoreV1().Pods(job.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("listing the pods of Job %s/%s: %w", job.Namespace, job.Name, err)
	}
	return pods.Items, nil
}

// ErrNoResult says that the Job has no pod whose archiver container
// succeeded (it was deleted, e.g. by its TTL, or has not run).
var ErrNoResult = errors.New("no succeeded pod")

// Result reads the summary the archiver reported in the termination message
// of the Job's succeeded pod.
func Result(ctx context.Context, c kubernetes.Interface, ns, name string) (Summary, error) {
	job, err := c.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Summary{}, fmt.Errorf("reading the result of Job %s/%s: the Job is gone: %w", ns, name, ErrNoResult)
	}
	if err != nil {
		return Summary{}, fmt.Errorf("reading Job %s/%s: %w", ns, name, err)
	}
	pods, err := jobPods(ctx, c, job)
	if err != nil {
		return Summary{}, err
	}
	for _, p := range pods {
		if t := archiverSucceeded(&p); t != nil {
			s, err := ParseSummary(t.Message)
			if err != nil {
				return Summary{}, fmt.Errorf("reading the result of Job %s/%s from pod %s: %w", ns, name, p.Name, err)
			}
			return s, nil
		}
	}
	return Summary{}, fmt.Errorf("reading the result of Job %s/%s: %w", ns, name, ErrNoResult)
}

// archiverSucceeded returns the terminated state of the pod's archiver
// container when it exited with 0 (nil otherwise): its run is over, and
// its termination message holds the report.
func archiverSucceeded(p *corev1.Pod) *corev1.ContainerStateTerminated {
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; cs.Name == ArchiverContainer && t != nil && t.ExitCode == 0 {
			return t
		}
	}
	return nil
}

// ArchiverDone waits until a pod of the Job has ended its archiver
// container with exit code 0, and returns nil: the run is over, and the
// Job completes a moment later, once the Job controller has seen the pod
// (a second or more on a busy node). It watches the Job's pods (its
// selector holds its UID, so an earlier Job of the same name is not
// mistaken for it), and looks again every interval (0: five seconds) in
// case a watch breaks or the Job is not there yet. It returns ctx's cause
// when ctx ends first.
func ArchiverDone(ctx context.Context, c kubernetes.Interface, ns, name string, interval time.Duration) error {
	return eachJobPod(ctx, c, ns, name, interval, func(_ context.Context, p *corev1.Pod) (bool, error) {
		return archiverSucceeded(p) != nil, nil
	})
}

// ArchiverStarted waits until a pod of the Job has started its archiver
// container (running, or already ended) and returns nil; it watches as
// ArchiverDone does, and returns ctx's cause when ctx ends first.
func ArchiverStarted(ctx context.Context, c kubernetes.Interface, ns, name string, interval time.Duration) error {
	return eachJobPod(ctx, c, ns, name, interval, func(_ context.Context, p *corev1.Pod) (bool, error) {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == ArchiverContainer && (cs.State.Running != nil || cs.State.Terminated != nil) {
				return true, nil
			}
		}
		return false, nil
	})
}

// eachJobPod shows visit every pod of the Job, listed and then as watched,
// until visit says stop (it returns visit's error then: nil, or why it
// stopped) or ctx ends (it returns ctx's cause). It looks again every
// interval (0: five seconds) in case a watch breaks or the Job is not there
// yet.
func eachJobPod(ctx context.Context, c kubernetes.Interface, ns, name string, interval time.Duration,
	visit func(context.Context, *corev1.Pod) (stop bool, err error)) error {
	if interval <= 0 {
		interval = 5 * time.Second
	}
	for {
		if stop, err := eachJobPodWithin(ctx, c, ns, name, interval, visit); stop {
			return err
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
	}
}

// eachJobPodWithin is eachJobPod for up to interval: stop is false when the
// time is up, or the Job, its pods or a watch cannot be read (the caller
// looks again).
func eachJobPodWithin(ctx context.Context, c kubernetes.Interface, ns, name string, interval time.Duration,
	visit func(context.Context, *corev1.Pod) (bool, error)) (stop bool, err error) {
	wctx, cancel := context.WithTimeout(ctx, interval)
	defer cancel()
	job, err := c.BatchV1().Jobs(ns).Get(wctx, name, metav1.GetOptions{})
	if err != nil || job.Spec.Selector == nil {
		<-wctx.Done()
		return false, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(job.Spec.Selector)
	if err != nil {
		<-wctx.Done()
		return false, nil
	}
	pods, err := c.CoreV1().Pods(ns).List(wctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		<-wctx.Done()
		return false, nil
	}
	for i := range pods.Items {
		if stop, err := visit(wctx, &pods.Items[i]); stop {
			return true, err
		}
	}
	w, err := c.CoreV1().Pods(ns).Watch(wctx, metav1.ListOptions{LabelSelector: sel.String(), ResourceVersion: pods.ResourceVersion})
	if err != nil {
		<-wctx.Done()
		return false, nil
	}
	defer w.Stop()
	for {
		select {
		case <-wctx.Done():
			return false, nil
		case ev, open := <-w.ResultChan():
			if !open {
				<-wctx.Done()
				return false, nil
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || !sel.Matches(labels.Set(p.Labels)) {
				continue
			}
			if stop, err := visit(wctx, p); stop {
				return true, err
			}
		}
	}
}

// Finished waits until the Job has completed or failed and returns it. It
// watches the Job (told at once when it changes), and looks again every
// interval (0: five seconds) in case a watch breaks; a lookup that fails is
// retried until ctx ends. A Job that is not there yet is waited for.
func Finished(ctx context.Context, c kubernetes.Interface, ns, name string, interval time.Duration) (*batchv1.Job, error) {
	if interval <= 0 {
		interval = 5 * time.Second
	}
	var last error
	for {
		job, err := c.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case err == nil && finished(job):
			return job, nil
		case err != nil && !apierrors.IsNotFound(err):
			last = err
		}
		opts := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()}
		if err == nil {
			opts.ResourceVersion = job.ResourceVersion
		}
		if job, ok := watchFinished(ctx, c, ns, name, opts, interval); ok {
			return job, nil
		}
		if ctx.Err() != nil {
			if last != nil {
				return nil, fmt.Errorf("waiting for Job %s/%s: %w (last lookup: %v)", ns, name, context.Cause(ctx), last)
			}
			return nil, fmt.Errorf("waiting for Job %s/%s: %w", ns, name, context.Cause(ctx))
		}
	}
}

// watchFinished watches the Job for up to interval and returns it once it
// has finished; ok is false when the time is up, the watch ends or cannot
// be started (the caller looks again).
func watchFinished(ctx context.Context, c kubernetes.Interface, ns, name string, opts metav1.ListOptions, interval time.Duration) (*batchv1.Job, bool) {
	wctx, cancel := context.WithTimeout(ctx, interval)
	defer cancel()
	w, err := c.BatchV1().Jobs(ns).Watch(wctx, opts)
	if err != nil {
		<-wctx.Done()
		return nil, false
	}
	defer w.Stop()
	for {
		select {
		case <-wctx.Done():
			return nil, false
		case ev, open := <-w.ResultChan():
			if !open {
				return nil, false
			}
			if job, ok := ev.Object.(*batchv1.Job); ok && job.Name == name && finished(job) {
				return job, true
			}
		}
	}
}

// Failure returns the reason and message of a failed Job's Failed
// condition ("" when it did not fail).
func Failure(job *batchv1.Job) string {
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return strings.TrimSpace(c.Reason + ": " + c.Message)
		}
	}
	return ""
}
