package nodetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/worldbackup/worldbackup/internal/kubenode"
)

// timeline records, as the test sees them through watches (to the
// millisecond, unlike the objects' own second-granular times), when each
// Job of a namespace went through the steps that stand between one backup's
// end and the next one's start under a concurrency cap: the Job created,
// its pod created, its container running, the container terminated, the Job
// complete. It is a measurement for the log, not an assertion.
type timeline struct {
	mu    sync.Mutex
	start time.Time
	jobs  map[string]*jobTimes // by Job name
}

// jobTimes are the steps of one Job, as offsets from the timeline's start
// (0: not seen).
type jobTimes struct {
	created, podCreated, running, terminated, complete time.Duration
}

// watchTimeline starts recording the Jobs and pods of ns until the test
// ends; start is the origin of the offsets.
func watchTimeline(t *testing.T, node *kubenode.Node, ns string, start time.Time) *timeline {
	t.Helper()
	tl := &timeline{start: start, jobs: map[string]*jobTimes{}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	jw, err := node.Client.BatchV1().Jobs(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pw, err := node.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go tl.consume(jw, pw)
	return tl
}

func (tl *timeline) consume(jw, pw watch.Interface) {
	defer jw.Stop()
	defer pw.Stop()
	for jw != nil || pw != nil {
		select {
		case ev, ok := <-resultChan(jw):
			if !ok {
				jw = nil
				continue
			}
			if job, ok := ev.Object.(*batchv1.Job); ok {
				tl.job(job)
			}
		case ev, ok := <-resultChan(pw):
			if !ok {
				pw = nil
				continue
			}
			if pod, ok := ev.Object.(*corev1.Pod); ok {
				tl.pod(pod)
			}
		}
	}
}

// resultChan is w's channel; nil (never ready) when w is nil.
func resultChan(w watch.Interface) <-chan watch.Event {
	if w == nil {
		return nil
	}
	return w.ResultChan()
}

// of returns the times of Job name, made on first sight.
func (tl *timeline) of(name string) *jobTimes {
	j := tl.jobs[name]
	if j == nil {
		j = &jobTimes{}
		tl.jobs[name] = j
	}
	return j
}

// mark sets *at to now unless it is set.
func (tl *timeline) mark(at *time.Duration) {
	if *at == 0 {
		*at = time.Since(tl.start)
	}
}

func (tl *timeline) job(job *batchv1.Job) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	j := tl.of(job.Name)
	tl.mark(&j.created)
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			tl.mark(&j.complete)
		}
	}
}

func (tl *timeline) pod(pod *corev1.Pod) {
	name := pod.Labels[batchv1.JobNameLabel]
	if name == "" {
		return
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	j := tl.of(name)
	tl.mark(&j.podCreated)
	for _, cs := range pod.Status.ContainerStatuses {
		switch {
		case cs.State.Running != nil:
			tl.mark(&j.running)
		case cs.State.Terminated != nil:
			tl.mark(&j.running)
			tl.mark(&j.terminated)
		}
	}
}

// summary is the median time of each step across the Jobs, and for the
// Jobs created after the first wave the median time from the last archiver
// that ended before each was created to its creation (the gate's share:
// it frees a slot when an archiver has ended).
func (tl *timeline) summary() string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var podCreate, start, run, end, gate []time.Duration
	var ends []time.Duration
	for _, j := range tl.jobs {
		if j.terminated > 0 {
			ends = append(ends, j.terminated)
		}
	}
	slices.Sort(ends)
	for _, j := range tl.jobs {
		add := func(to *[]time.Duration, from, until time.Duration) {
			if from > 0 && until >= from {
				*to = append(*to, until-from)
			}
		}
		add(&podCreate, j.created, j.podCreated)
		add(&start, j.podCreated, j.running)
		add(&run, j.running, j.terminated)
		add(&end, j.terminated, j.complete)
		i, _ := slices.BinarySearch(ends, j.created)
		if i > 0 {
			add(&gate, ends[i-1], j.created)
		}
	}
	median := func(ds []time.Duration) string {
		if len(ds) == 0 {
			return "-"
		}
		slices.Sort(ds)
		return fmt.Sprintf("%.2f s", ds[len(ds)/2].Seconds())
	}
	parts := []string{
		"Job created → its pod created " + median(podCreate),
		"pod created → container running " + median(start),
		"container running → terminated (the save included) " + median(run),
		"container terminated → Job complete " + median(end),
		"an archiver ended → the next Job created " + median(gate),
	}
	return fmt.Sprintf("%d Jobs, medians: %s", len(tl.jobs), strings.Join(parts, "; "))
}

// runningEarly is how many containers were running before the first
// archiver ended: at most the cap without early starts, up to twice as
// many with them.
func (tl *timeline) runningEarly() int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	first := time.Duration(-1)
	for _, j := range tl.jobs {
		if j.terminated > 0 && (first < 0 || j.terminated < first) {
			first = j.terminated
		}
	}
	n := 0
	for _, j := range tl.jobs {
		if j.running > 0 && j.running < first {
			n++
		}
	}
	return n
}
