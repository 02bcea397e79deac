package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/worldbackup/worldbackup/jobapi"
	"github.com/worldbackup/worldbackup/provider/jobspec"
	"github.com/worldbackup/worldbackup/provider/observe"
	"github.com/worldbackup/worldbackup/provider/preflight"
)

// MaxConcurrency bounds the concurrency input (and the program's
// clusters[].concurrency): how many backups a Gate lets run at once. The
// archiver's --concurrency has the same bound.
const MaxConcurrency = jobapi.MaxConcurrency

// A Gate bounds how many backups run at once: a backup that sets
// concurrency, made through Gates (WorldBackupArgs.Gates; the plugin does
// this for every WorldBackup), runs only while fewer than the gate's limit
// of its backups run, whatever the CLI's --parallel.
//
// The Kubernetes provider waits for a Job in one of the engine's step
// workers, and `pulumi up` has 4 × GOMAXPROCS of them by default: 8 backups
// at a time on two cores, and nothing else moves while they run. A gated
// Job is created with pulumi.com/skipAwait instead, so the engine's worker
// is free at once, and the component waits for it itself, as the provider
// would: its outputs resolve when the Job has finished, a failed Job fails
// the component (and `pulumi up`) with the Job's reason, and the watchdog
// fails a Job whose pod cannot start (observe.Watchdog).
//
// A gated backup runs in two steps, so that starting a pod (seconds on a
// busy node) overlaps the backups that run:
//   - its Job is created (its registration waits, pulumi.DependsOnInputs)
//     while fewer than twice the limit of the gate's Jobs are under way:
//     the running ones and up to as many started early, an early one only
//     once the pods that run at once have started (Gate.settled);
//   - its archiver waits at the door for one of the limit's slots in the
//     catalog (jobspec.WithConcurrency; catalog.Slots in the archiver),
//     which the archiver before it frees as it exits.
//
// The slots are per catalog and group (the cluster's kube context,
// concurrencyGroup): the backups of one cluster that record into one
// catalog run at most the limit at once; those that record into several
// catalogs, at most twice the limit (the Jobs under way). A Job's place is
// given back as soon as its archiver has exited with 0
// (observe.ArchiverDone), before the Job controller marks the Job
// complete; a failed archiver (the Job may retry) keeps it until the Job
// has finished. A Job waits for its slot inside its deadline.
//
// A Job is gated only where the component would watch it anyway: a known
// Job, the preflight on (a cluster to ask: not in render mode) and no
// skipAwait; elsewhere the gate is passed by. A gated Job differs from an
// ungated one (skipAwait, the door's flags), so turning a cap on or off
// replaces the Jobs of the current run once (the archiver makes a recorded
// run's new Job a no-op).
//
// One Gate serves one cluster in one program run; a nil *Gate gates
// nothing.
type Gate struct {
	slots chan struct{} // the Jobs under way: running or at the door (twice the limit)
	limit int
	group string        // the catalog's concurrency group of the gate's backups
	poll  time.Duration // how often a held slot looks again at its Job, which it watches; 0: observe.Finished's default

	mu       sync.Mutex
	starting int // Jobs created to run at once (not early) whose archiver has not started yet
}

// newGate returns a gate that lets limit backups of group run at once;
// limit must be at least 1.
func newGate(limit int, group string) (*Gate, error) {
	if limit < 1 {
		return nil, fmt.Errorf("a gate's limit must be at least 1, not %d", limit)
	}
	if err := jobapi.CheckConcurrency(limit, group); err != nil {
		return nil, err
	}
	return &Gate{slots: make(chan struct{}, 2*limit), limit: limit, group: group}, nil
}

// Limit is how many of the gate's backups run at once.
func (g *Gate) Limit() int { return g.limit }

// settleLook is how often a Job to be created early looks whether the gate
// has settled (Gate.settled).
const settleLook = 50 * time.Millisecond

// settled says whether a Job may be created early, to wait at the door:
// only once every Job created to run at once (fewer than the limit were
// under way) has started its archiver, so that starting pods early never
// slows those that start to run now (on a small node, starting pods takes
// all of its CPU). Jobs created early do not hold each other back.
func (g *Gate) settled() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.starting == 0
}

// addStarting adds n to the Jobs under way whose archiver has not started.
func (g *Gate) addStarting(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.starting += n
}

// concurrencyGroup is the group of a cluster's slots in the catalog: its
// kube context, which names the cluster without credentials and does not
// change when they do. Two clusters of one name (two kubeconfigs' current
// contexts, say) that record into one catalog share one cap: stricter,
// never looser. A name too long for a group is named by its SHA-256.
func concurrencyGroup(cl preflight.Cluster) string {
	switch g := "context " + cl.Context; {
	case cl.Context == "":
		return "current-context"
	case len(g) > jobapi.MaxConcurrencyGroup:
		sum := sha256.Sum256([]byte(cl.Context))
		return "context sha256:" + hex.EncodeToString(sum[:])
	default:
		return g
	}
}

// Gates are the concurrency caps of one program run: one Gate per cluster
// (the kubeconfig and context the backup's preflight asks), made by the
// first backup on it that sets concurrency and shared by every later one.
// Backups on one cluster must set the same concurrency. A program makes one
// Gates and passes it to each WorldBackup (WorldBackupArgs.Gates); the
// plugin holds one per process, which serves one `pulumi up`. The zero
// value is ready to use, and it is safe for concurrent use.
type Gates struct {
	mu sync.Mutex
	m  map[preflight.Cluster]*Gate
}

// of returns the gate of cluster cl with limit backups at once, made on
// first use; a gate of cl made with another limit is an error that says
// which.
func (gs *Gates) of(cl preflight.Cluster, limit int) (*Gate, error) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if g, ok := gs.m[cl]; ok {
		if g.Limit() != limit {
			return nil, fmt.Errorf("concurrency is %d, but another WorldBackup of this program on the same cluster (%s) set %d: a cluster has one cap, so give its backups the same concurrency",
				limit, cl, g.Limit())
		}
		return g, nil
	}
	g, err := newGate(limit, concurrencyGroup(cl))
	if err != nil {
		return nil, err
	}
	if gs.m == nil {
		gs.m = map[preflight.Cluster]*Gate{}
	}
	gs.m[cl] = g
	return g, nil
}

// gateOf returns the Gate the Job of pl goes through: the cluster's gate in
// gates with limit concurrency (nil: no cap). It is nil too where the gate
// would be passed by (Gate.gates): in render mode, say, nothing is awaited,
// so nothing is capped.
func gateOf(gates *Gates, concurrency *int, pl jobPlan) (*Gate, error) {
	if concurrency == nil || pl.Job == nil || !observed(pl.Job, pl.Preflight) {
		return nil, nil
	}
	if gates == nil {
		return nil, errors.New("concurrency caps the backups of a whole program, so they must share one *provider.Gates: " +
			"set gates in each WorldBackupArgs (the plugin does it for TypeScript, Python and YAML programs)")
	}
	return gates.of(pl.Preflight.Cluster, *concurrency)
}

// registerGrace is how long a slot waits for its Job's registration: a
// create the engine refused (the `up` is failing) gives its slot back then,
// so the program does not wait on it forever.
const registerGrace = 2 * time.Minute

// gates returns whether g gates the Job of pl: a known Job the component
// would watch (observed).
func (g *Gate) gates(pl jobPlan) bool {
	return g != nil && pl.Job != nil && observed(pl.Job, pl.Preflight)
}

// through marks the Job of pl as gated: the Kubernetes provider does not
// wait for it (the component does), at preview as at up, so both see the
// same Job. The Job is copied, not changed.
func (g *Gate) through(pl jobPlan) jobPlan {
	if !g.gates(pl) {
		return pl
	}
	job := jobspec.WithConcurrency(pl.Job, g.limit, g.group)
	if job.Annotations == nil {
		job.Annotations = map[string]string{}
	}
	job.Annotations[jobspec.AnnotationSkipAwait] = "true"
	pl.Job, pl.gate = job, g
	return pl
}

// gatedRun is one gated Job at `pulumi up`: its slot, taken before its
// registration, and what its run reported, known once it has finished.
type gatedRun struct {
	g          *Gate
	early      bool          // created early, to wait at the door (Gate.settled)
	registered chan struct{} // closed when the Job is registered
	done       chan struct{} // closed when sum and err are set
	sum        observe.Summary
	err        error
}

// slot returns the dependency that holds the registration of pl's Job until
// the gate has a free slot, then starts watching the Job (hold).
func (g *Gate) slot(ctx *pulumi.Context, comp pulumi.Resource, pl jobPlan, newClient clientMaker) (*gatedRun, pulumi.ResourceArrayOutput) {
	run := &gatedRun{g: g, registered: make(chan struct{}), done: make(chan struct{})}
	dep := pulumi.ResourceArray{}.ToResourceArrayOutput().ApplyT(func(rs []pulumi.Resource) ([]pulumi.Resource, error) {
		select {
		case g.slots <- struct{}{}:
		case <-ctx.Context().Done():
			return nil, ctx.Context().Err()
		}
		run.early = len(g.slots) > g.limit
		for run.early && !g.settled() {
			select {
			case <-time.After(settleLook):
			case <-ctx.Context().Done():
				<-g.slots
				return nil, ctx.Context().Err()
			}
		}
		if !run.early {
			g.addStarting(1)
		}
		go run.hold(ctx, comp, pl, newClient)
		return rs, nil
	}).(pulumi.ResourceArrayOutput)
	return run, dep
}

// wait returns what the run reported once its Job has finished.
func (r *gatedRun) wait() (observe.Summary, error) {
	<-r.done
	return r.sum, r.err
}

// hold waits for the Job to be registered and to finish, gives the slot
// back, and records what the run reported: a Job that failed, or did not
// finish within the plan's timeout, is an error.
//
// The slot is given back as soon as the Job's archiver has exited with 0
// (observe.ArchiverDone): the backup is over then, and the next one starts
// while the Job controller marks this Job complete, a second or more later
// on a busy node. The outputs still wait for the Job's own verdict.
func (r *gatedRun) hold(ctx *pulumi.Context, comp pulumi.Resource, pl jobPlan, newClient clientMaker) {
	defer close(r.done)
	release := sync.OnceFunc(func() { <-r.g.slots })
	defer release()
	started := sync.OnceFunc(func() {
		if !r.early {
			r.g.addStarting(-1)
		}
	})
	defer started()
	job := pl.Job
	select {
	case <-r.registered:
	case <-time.After(registerGrace):
		r.err = fmt.Errorf("Job %s/%s was not created within %s", job.Namespace, job.Name, registerGrace)
		return
	case <-ctx.Context().Done():
		r.err = ctx.Context().Err()
		return
	}
	client, err := newClient(pl.Preflight.Cluster)
	if err != nil {
		r.err = fmt.Errorf("waiting for Job %s/%s: %w", job.Namespace, job.Name, err)
		return
	}
	warn := func(msg string) {
		_ = ctx.Log.Warn(fmt.Sprintf("Job %s/%s: %s", job.Namespace, job.Name, msg), &pulumi.LogArgs{Resource: comp})
	}
	// Registered but not there: a Job of an earlier `pulumi up`, which a
	// registration without change does not create again, deleted since
	// it finished (ttlSecondsAfterFinished, kubectl, a GitOps prune).
	// Nothing to wait for; its outputs stay empty, as an ungated one's.
	if _, err := client.BatchV1().Jobs(job.Namespace).Get(ctx.Context(), job.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		warn("gone (deleted after an earlier run): sha256, sizeBytes and status stay empty")
		return
	}
	wctx, stop := context.WithTimeoutCause(ctx.Context(), pl.Timeout,
		fmt.Errorf("it did not finish within its timeout, %s", pl.Timeout))
	defer stop()
	startWatchdog(wctx, ctx, comp, client, job, 0) // wctx ends pl.Timeout after the Job was registered
	go func() {
		if observe.ArchiverStarted(wctx, client, job.Namespace, job.Name, r.g.poll) == nil {
			started()
		}
	}()
	go func() {
		if observe.ArchiverDone(wctx, client, job.Namespace, job.Name, r.g.poll) == nil {
			release()
		}
	}()
	done, err := observe.Finished(wctx, client, job.Namespace, job.Name, r.g.poll)
	if err != nil {
		r.err = err
		return
	}
	if why := observe.Failure(done); why != "" {
		r.err = fmt.Errorf("Job %s/%s failed: %s (its pods' logs: kubectl -n %s logs job/%s)", job.Namespace, job.Name, why, job.Namespace, job.Name)
		return
	}
	// A finished Job whose pod is gone (garbage-collected since an
	// earlier run) reported nothing readable: a warning, as for an
	// ungated Job, not a failure of every later `pulumi up`.
	sum, err := readResult(ctx, client, job)
	if err != nil {
		warn("sha256, sizeBytes and status stay empty: " + err.Error())
	}
	r.sum = sum
}

// registerGated registers the gated Job of pl as registerChildJob does,
// once the gate has a slot for it, and returns what its run reports.
func registerGated(ctx *pulumi.Context, comp pulumi.Resource, name string, pl jobPlan, newClient clientMaker) (*kubeResource, *gatedRun, error) {
	run, dep := pl.gate.slot(ctx, comp, pl, newClient)
	res, err := registerChildJob(ctx, comp, name, pl, pulumi.DependsOnInputs(dep))
	if err != nil {
		return nil, nil, err
	}
	res.URN().ApplyT(func(pulumi.URN) int {
		close(run.registered)
		return 0
	})
	return res, run, nil
}
