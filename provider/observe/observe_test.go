package observe

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func waitingPod(uid, reason, msg string) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, UID: types.UID(uid)},
		Status: corev1.PodStatus{
			Phase: corev1.PodPending,
			ContainerStatuses: []corev1.ContainerStatus{{
				Name:  ArchiverContainer,
				Image: "example.org/archiver:no-such-tag",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}},
			}},
		},
	}
}

func unschedulablePod(uid string) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, UID: types.UID(uid)},
		Status: corev1.PodStatus{
			Phase: corev1.PodPending,
			Conditions: []corev1.PodCondition{{
				Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
				Message: "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.",
			}},
		},
	}
}

// creatingPod is a pod on a node whose archiver container waits in
// ContainerCreating (its sandbox or volumes are being set up).
func creatingPod(uid string) corev1.Pod {
	p := waitingPod(uid, "ContainerCreating", "")
	p.Spec.NodeName = "node-1"
	return p
}

// warning is a Warning event about the object uid, last seen at the minute
// min of the day.
func warning(uid, reason, msg string, min int) corev1.Event {
	return corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: uid + "." + reason, Namespace: ns},
		InvolvedObject: corev1.ObjectReference{UID: types.UID(uid)},
		Type:           corev1.EventTypeWarning,
		Reason:         reason,
		Message:        msg,
		LastTimestamp:  metav1.NewTime(time.Date(2026, 1, 1, 0, min, 0, 0, time.UTC)),
	}
}

// normal is a Normal event about the object uid, last seen at the minute
// min of the day.
func normal(uid, reason string, min int) corev1.Event {
	e := warning(uid, reason, "", min)
	e.Type = corev1.EventTypeNormal
	return e
}

const (
	multiAttach = `Multi-Attach error for volume "pvc-1" Volume is already used by pod(s) lobby-0`
	mountFailed = `MountVolume.SetUp failed for volume "world" : hostPath type check failed: /srv/world is not a directory`
	timedOut    = `Unable to attach or mount volumes: unmounted volumes=[world], unattached volumes=[world]: timed out waiting for the condition`
	noCNI       = `Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox: plugin type="bridge" failed: failed to find plugin "bridge" in path [/opt/cni/bin]`
	psa         = `Error creating: pods "lobby-backup-abc-x" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false`

	// The quota admission's refusals (k8s.io/apiserver's resourcequota
	// plugin): other pods fill the quota; the pod alone exceeds it.
	quotaFilled = `Error creating: pods "lobby-backup-abc-x" is forbidden: exceeded quota: compute, requested: limits.cpu=1,pods=1, used: limits.cpu=3500m,pods=4, limited: limits.cpu=4,pods=4`
	quotaNoPods = `Error creating: pods "lobby-backup-abc-x" is forbidden: exceeded quota: no-pods, requested: pods=1, used: pods=0, limited: pods=0`

	// A kubelet's (1.32 and later) back-off messages, carrying the last
	// pull's error as containerd 2 words it.
	backoffNotFound = `Back-off pulling image "example.org/archiver:no-such-tag": ErrImagePull: rpc error: code = NotFound desc = ` +
		`failed to pull and unpack image "example.org/archiver:no-such-tag": failed to resolve reference ` +
		`"example.org/archiver:no-such-tag": example.org/archiver:no-such-tag: not found`
	backoffUnavailable = `Back-off pulling image "example.org/archiver:no-such-tag": ErrImagePull: rpc error: code = Unknown desc = ` +
		`failed to pull and unpack image "example.org/archiver:no-such-tag": failed to resolve reference ` +
		`"example.org/archiver:no-such-tag": unexpected status from HEAD request to ` +
		`https://example.org/v2/archiver/manifests/no-such-tag: 503 Service Unavailable`
)

func TestStuck(t *testing.T) {
	running := waitingPod("a", "", "")
	running.Status.Phase = corev1.PodRunning
	running.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	running.Spec.NodeName = "node-1"
	failed := waitingPod("b", "ImagePullBackOff", "")
	failed.Status.Phase = corev1.PodFailed
	deleting := waitingPod("c", "ErrImagePull", "")
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	initializing := creatingPod("i")
	initializing.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "init", State: corev1.ContainerState{
		Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}}
	initializing.Status.ContainerStatuses[0].State.Waiting.Reason = "PodInitializing"
	noStatus := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-n", UID: "n"}, Spec: corev1.PodSpec{NodeName: "node-1"},
		Status: corev1.PodStatus{Phase: corev1.PodPending}}
	pullOnNode := waitingPod("e", "ErrImagePull", "not found")
	pullOnNode.Spec.NodeName = "node-1"
	startedOne := creatingPod("s")
	startedOne.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "init", State: corev1.ContainerState{
		Running: &corev1.ContainerStateRunning{}}}}
	notOnNode := waitingPod("u", "ContainerCreating", "")
	long := strings.Repeat("é", maxMessage)

	tests := []struct {
		name       string
		pod        corev1.Pod
		events     []corev1.Event
		kind       Kind
		reason     string
		mentioning []string
	}{
		{name: "image pull backoff, not found", pod: waitingPod("1", "ImagePullBackOff", backoffNotFound),
			kind: Container, reason: "ImagePullBackOff", mentioning: []string{"no-such-tag", "not found"}},
		{name: "image pull backoff, registry answers 503", pod: waitingPod("1", "ImagePullBackOff", backoffUnavailable),
			kind: Registry, reason: "ImagePullBackOff", mentioning: []string{"503 Service Unavailable"}},
		{name: "an older kubelet's back-off says nothing of the error", pod: waitingPod("1", "ImagePullBackOff", `Back-off pulling image "example.org/archiver:no-such-tag"`),
			kind: Registry, reason: "ImagePullBackOff", mentioning: []string{"no-such-tag"}},
		{name: "an outage of a registry whose names hold a final word", pod: waitingPod("1", "ImagePullBackOff",
			`Back-off pulling image "forbidden.example/acme/unauthorized-app:1": ErrImagePull: rpc error: code = Unknown desc = `+
				`failed to pull and unpack image "forbidden.example/acme/unauthorized-app:1": failed to resolve reference `+
				`"forbidden.example/acme/unauthorized-app:1": unexpected status from HEAD request to `+
				`https://forbidden.example/v2/acme/unauthorized-app/manifests/1: 503 Service Unavailable`),
			kind: Registry, reason: "ImagePullBackOff"},
		{name: "a DNS server that times out", pod: waitingPod("1", "ErrImagePull",
			`failed to do request: Head "https://notfound.example/v2/a/manifests/1": dial tcp: lookup notfound.example on 10.96.0.10:53: i/o timeout`),
			kind: Registry, reason: "ErrImagePull"},
		{name: "a registry host that does not exist", pod: waitingPod("1", "ErrImagePull",
			`dial tcp: lookup regsitry.example on 10.96.0.10:53: no such host`),
			kind: Container, reason: "ErrImagePull"},
		{name: "Docker Hub's rate limit", pod: waitingPod("1", "ErrImagePull",
			`unexpected status from GET request to https://registry-1.docker.io/v2/a/b/manifests/1: 429 Too Many Requests - `+
				`Server message: toomanyrequests: You have reached your pull rate limit. See https://www.docker.com/increase-rate-limit`),
			kind: Registry, reason: "ErrImagePull"},
		{name: "pull access denied", pod: waitingPod("1", "ErrImagePull",
			`failed to resolve reference "docker.io/acme/x:1": pull access denied, repository does not exist or may require authorization: `+
				`server message: insufficient_scope: authorization failed`),
			kind: Container, reason: "ErrImagePull"},
		{name: "an untrusted certificate", pod: waitingPod("1", "ErrImagePull",
			`failed to do request: Head "https://r.example/v2/a/manifests/1": tls: failed to verify certificate: x509: certificate signed by unknown authority`),
			kind: Container, reason: "ErrImagePull"},
		{name: "a signature that does not validate, in the back-off", pod: waitingPod("1", "ImagePullBackOff",
			`Back-off pulling image "r.example/a:1": SignatureValidationFailed: image pull failed for r.example/a:1 because the signature validation failed`),
			kind: Container, reason: "ImagePullBackOff"},
		{name: "the runtime says the registry is unavailable", pod: waitingPod("1", "RegistryUnavailable", "image pull failed for x because the registry is unavailable"),
			kind: Registry, reason: "RegistryUnavailable"},
		{name: "a signature that does not validate", pod: waitingPod("1", "SignatureValidationFailed", "image pull failed for x because the signature validation failed"),
			kind: Container, reason: "SignatureValidationFailed"},
		{name: "image pull error names the image", pod: waitingPod("2", "ErrImagePull", "not found"),
			kind: Container, reason: "ErrImagePull", mentioning: []string{"image example.org/archiver:no-such-tag", "not found"}},
		{name: "invalid image name", pod: waitingPod("3", "InvalidImageName", "bad"), kind: Container, reason: "InvalidImageName"},
		{name: "never pull", pod: waitingPod("4", "ErrImageNeverPull", ""), kind: Container, reason: "ErrImageNeverPull"},
		{name: "config error", pod: waitingPod("5", "CreateContainerConfigError", `couldn't find key felis.toml in Secret`),
			kind: Container, reason: "CreateContainerConfigError", mentioning: []string{"felis.toml"}},
		{name: "unschedulable", pod: unschedulablePod("6"), kind: Unschedulable, reason: "Unschedulable", mentioning: []string{"node affinity"}},
		{name: "creating without events is not stuck", pod: creatingPod("7")},
		{name: "pulling is not stuck", pod: waitingPod("8", "PodInitializing", "")},
		{name: "running", pod: running, events: []corev1.Event{warning("a", "FailedMount", mountFailed, 1)}},
		{name: "finished", pod: failed},
		{name: "being deleted", pod: deleting},
		{name: "no status yet", pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "new"}}},

		{name: "a volume that cannot be mounted", pod: creatingPod("m"), events: []corev1.Event{warning("m", "FailedMount", mountFailed, 1)},
			kind: Creating, reason: "FailedMount", mentioning: []string{"hostPath type check failed", "/srv/world"}},
		{name: "Multi-Attach is named over the kubelet's time-out", pod: creatingPod("r"), events: []corev1.Event{
			warning("r", "FailedMount", timedOut, 5), warning("r", "FailedAttachVolume", multiAttach, 1)},
			kind: Creating, reason: "FailedAttachVolume", mentioning: []string{"Multi-Attach error", "lobby-0"}},
		{name: "no CNI plugin", pod: creatingPod("c"), events: []corev1.Event{warning("c", "FailedCreatePodSandBox", noCNI, 1)},
			kind: Creating, reason: "FailedCreatePodSandBox", mentioning: []string{`failed to find plugin "bridge"`}},
		{name: "network not ready", pod: creatingPod("w"), events: []corev1.Event{warning("w", "NetworkNotReady", "network is not ready: cni plugin not initialized", 1)},
			kind: Creating, reason: "NetworkNotReady", mentioning: []string{"cni plugin not initialized"}},
		{name: "the latest event of a reason is named", pod: creatingPod("l"), events: []corev1.Event{
			warning("l", "FailedMount", "old: secret not found", 1), warning("l", "FailedMount", mountFailed, 3)},
			kind: Creating, reason: "FailedMount", mentioning: []string{"hostPath type check"}},
		{name: "an init container's wait counts", pod: initializing, events: []corev1.Event{warning("i", "FailedMount", mountFailed, 1)},
			kind: Creating, reason: "FailedMount"},
		{name: "a pod with no status yet on a node", pod: noStatus, events: []corev1.Event{warning("n", "FailedCreatePodSandBox", noCNI, 1)},
			kind: Creating, reason: "FailedCreatePodSandBox"},
		{name: "a status reason wins over events", pod: pullOnNode, events: []corev1.Event{warning("e", "FailedMount", mountFailed, 1)},
			kind: Container, reason: "ErrImagePull"},
		{name: "a started container: old mount events are history", pod: startedOne, events: []corev1.Event{warning("s", "FailedMount", mountFailed, 1)}},
		{name: "not on a node: the scheduler's business", pod: notOnNode, events: []corev1.Event{warning("u", "FailedMount", mountFailed, 1)}},
		{name: "another object's events", pod: creatingPod("o"), events: []corev1.Event{warning("other", "FailedMount", mountFailed, 1)}},
		{name: "a Normal event", pod: creatingPod("z"), events: func() []corev1.Event {
			e := warning("z", "FailedMount", mountFailed, 1)
			e.Type = corev1.EventTypeNormal
			return []corev1.Event{e}
		}()},
		{name: "an unrelated warning", pod: creatingPod("x"), events: []corev1.Event{warning("x", "FailedScheduling", "0/1 nodes", 1)}},
		{name: "a Multi-Attach error, then the volume attached and the image pulling: history", pod: creatingPod("h"), events: []corev1.Event{
			warning("h", "FailedAttachVolume", multiAttach, 1), normal("h", "SuccessfulAttachVolume", 2), normal("h", "Pulling", 2)}},
		{name: "pulling after a mount error: history", pod: creatingPod("q"), events: []corev1.Event{
			warning("q", "FailedMount", mountFailed, 1), normal("q", "Pulling", 3)}},
		{name: "progress before the warning does not hide it", pod: creatingPod("k"), events: []corev1.Event{
			normal("k", "Pulling", 1), warning("k", "FailedMount", mountFailed, 2)},
			kind: Creating, reason: "FailedMount"},
		{name: "another object's progress does not hide it", pod: creatingPod("j"), events: []corev1.Event{
			warning("j", "FailedMount", mountFailed, 1), normal("other", "Pulling", 2)},
			kind: Creating, reason: "FailedMount"},
		{name: "a Normal event of no progress does not hide it", pod: creatingPod("g"), events: []corev1.Event{
			warning("g", "FailedCreatePodSandBox", noCNI, 1), normal("g", "SandboxChanged", 2)},
			kind: Creating, reason: "FailedCreatePodSandBox"},
		{name: "a long message is bounded", pod: creatingPod("b"), events: []corev1.Event{warning("b", "FailedMount", long, 1)},
			kind: Creating, reason: "FailedMount", mentioning: []string{"…"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Stuck(&tt.pod, tt.events)
			if c.Kind != tt.kind || c.Reason != tt.reason || c.UID != tt.pod.UID {
				t.Fatalf("Stuck = %+v, want kind %d reason %q uid %q", c, tt.kind, tt.reason, tt.pod.UID)
			}
			if len(c.Message) > maxMessage+len("…") || !utf8.ValidString(c.Message) {
				t.Errorf("message of %d bytes (valid UTF-8: %v), want at most %d", len(c.Message), utf8.ValidString(c.Message), maxMessage)
			}
			for _, w := range append(tt.mentioning, tt.reason, tt.pod.Name) {
				if c.Kind != NotStuck && !strings.Contains(c.String(), w) {
					t.Errorf("cause %q does not mention %q", c, w)
				}
			}
		})
	}
}

func TestJobRefused(t *testing.T) {
	const job = "j1"
	done := waitingPod("d", "", "")
	done.Status.Phase = corev1.PodFailed
	tests := []struct {
		name       string
		pods       []corev1.Pod
		events     []corev1.Event
		kind       Kind // Refused, Quota or NotStuck
		mentioning []string
	}{
		{name: "Pod Security refuses every pod", events: []corev1.Event{warning(job, "FailedCreate", psa, 1)}, kind: Refused,
			mentioning: []string{"no pod can be created", "FailedCreate", `violates PodSecurity "restricted:latest"`}},
		{name: "a quota the pod alone exceeds", events: []corev1.Event{warning(job, "FailedCreate", quotaNoPods, 1)},
			kind: Refused, mentioning: []string{"exceeded quota: no-pods"}},
		{name: "a quota other pods fill", events: []corev1.Event{warning(job, "FailedCreate", quotaFilled, 1)},
			kind: Quota, mentioning: []string{"no pod can be created", "exceeded quota: compute", "used: limits.cpu=3500m"}},
		{name: "a quota whose CPU limit the pod alone exceeds", events: []corev1.Event{warning(job, "FailedCreate",
			`Error creating: pods "x" is forbidden: exceeded quota: compute, requested: limits.cpu=2, used: limits.cpu=0, limited: limits.cpu=1500m`, 1)},
			kind: Refused},
		{name: "a quota message of another form", events: []corev1.Event{warning(job, "FailedCreate", `Error creating: pods "x" is forbidden: exceeded quota: q, requested: pods=1`, 1)},
			kind: Refused, mentioning: []string{"exceeded quota"}},
		{name: "a quota message with an amount that does not parse", events: []corev1.Event{warning(job, "FailedCreate",
			`Error creating: pods "x" is forbidden: exceeded quota: q, requested: pods=one, used: pods=1, limited: pods=1`, 1)},
			kind: Refused},
		{name: "a quota failure without amounts", events: []corev1.Event{warning(job, "FailedCreate",
			`Error creating: pods "x" is forbidden: failed quota: compute: must specify limits.cpu for: archiver`, 1)},
			kind: Refused},
		{name: "the retry of a finished pod is refused", pods: []corev1.Pod{done}, events: []corev1.Event{warning(job, "FailedCreate", psa, 1)}, kind: Refused},
		{name: "a pod was created after all", pods: []corev1.Pod{creatingPod("p")}, events: []corev1.Event{warning(job, "FailedCreate", psa, 1)}},
		{name: "no pod yet, no event", events: nil},
		{name: "another Job's refusal", events: []corev1.Event{warning("j0", "FailedCreate", psa, 1)}},
		{name: "a Normal event", events: []corev1.Event{func() corev1.Event {
			e := warning(job, "SuccessfulCreate", "Created pod: x", 1)
			e.Type = corev1.EventTypeNormal
			return e
		}()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := JobRefused(job, tt.pods, tt.events)
			if c.Kind != tt.kind || c.UID != job {
				t.Fatalf("JobRefused = %+v, want kind %d, uid %s", c, tt.kind, job)
			}
			for _, w := range tt.mentioning {
				if !strings.Contains(c.String(), w) {
					t.Errorf("cause %q does not mention %q", c, w)
				}
			}
		})
	}
}

func TestTracker(t *testing.T) {
	g := Grace{Container: time.Minute, Registry: 5 * time.Minute, Unschedulable: 5 * time.Minute, Creating: 2 * time.Minute,
		Refused: 30 * time.Second, Quota: 4 * time.Minute}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pull := Cause{Kind: Container, UID: "a", Reason: "ErrImagePull"}
	blip := Cause{Kind: Registry, UID: "a", Reason: "ErrImagePull"}
	vague := Cause{Kind: Registry, UID: "a", Reason: "ImagePullBackOff"}
	quota := Cause{Kind: Quota, UID: "j", Reason: "FailedCreate"}
	config := Cause{Kind: Container, UID: "a", Reason: "CreateContainerConfigError"}
	backoff := Cause{Kind: Container, UID: "a", Reason: "ImagePullBackOff"}
	started := Cause{UID: "a"}
	other := Cause{Kind: Container, UID: "b", Reason: "ErrImagePull"}
	unsched := Cause{Kind: Unschedulable, UID: "u", Reason: "Unschedulable"}
	mount := Cause{Kind: Creating, UID: "a", Reason: "FailedMount"}
	refused := Cause{Kind: Refused, UID: "j", Reason: "FailedCreate"}
	jobOK := Cause{UID: "j"}

	type look struct {
		after  time.Duration
		causes []Cause
		due    bool
	}
	tests := []struct {
		name  string
		looks []look
	}{
		{"stuck past the grace is due", []look{
			{0, []Cause{pull}, false},
			{30 * time.Second, []Cause{backoff}, false}, // the reason alternates: still stuck since t0
			{time.Minute, []Cause{pull}, true},
		}},
		{"a pod that starts is forgotten", []look{
			{0, []Cause{pull}, false},
			{50 * time.Second, []Cause{started}, false},
			{70 * time.Second, []Cause{pull}, false},
			{2 * time.Minute, []Cause{pull}, false},
			{130 * time.Second, []Cause{pull}, true},
		}},
		{"a replaced pod starts its own clock", []look{
			{0, []Cause{pull}, false},
			{50 * time.Second, []Cause{other}, false},
			{100 * time.Second, []Cause{other}, false},
			{110 * time.Second, []Cause{other}, true},
		}},
		{"unschedulable gets the longer grace", []look{
			{0, []Cause{unsched}, false},
			{2 * time.Minute, []Cause{unsched}, false},
			{5 * time.Minute, []Cause{unsched}, true},
		}},
		{"a sandbox or volume gets its own grace", []look{
			{0, []Cause{mount}, false},
			{time.Minute, []Cause{mount}, false},
			{2 * time.Minute, []Cause{mount}, true},
		}},
		{"a change of kind restarts the clock", []look{
			{0, []Cause{mount}, false},
			{90 * time.Second, []Cause{pull}, false},
			{2 * time.Minute, []Cause{pull}, false},
			{150 * time.Second, []Cause{pull}, true},
		}},
		{"a registry blip gets the longer grace", []look{
			{0, []Cause{blip}, false},
			{4 * time.Minute, []Cause{blip}, false},
			{5 * time.Minute, []Cause{blip}, true},
		}},
		{"an older kubelet's back-off and a final pull error are one wait", []look{
			{0, []Cause{pull}, false},
			{10 * time.Second, []Cause{vague}, false},
			{70 * time.Second, []Cause{vague}, false}, // past the container grace, but it shows nothing final
			{80 * time.Second, []Cause{pull}, true},   // since t0
		}},
		{"a blip, then an image found missing: judged since the first", []look{
			{0, []Cause{blip}, false},
			{time.Minute, []Cause{pull}, true},
		}},
		{"a Secret key missing after a long pull: a wait of its own", []look{
			{0, []Cause{blip}, false},
			{4 * time.Minute, []Cause{blip}, false},
			{270 * time.Second, []Cause{config}, false},
			{330 * time.Second, []Cause{config}, true},
		}},
		{"a quota other pods fill gets its grace", []look{
			{0, []Cause{quota}, false},
			{time.Minute, []Cause{quota}, false},
			{4 * time.Minute, []Cause{quota}, true},
		}},
		{"a refused Job gets the shortest grace", []look{
			{0, []Cause{refused}, false},
			{30 * time.Second, []Cause{refused}, true},
		}},
		{"a Job that got a pod is forgotten", []look{
			{0, []Cause{refused}, false},
			{20 * time.Second, []Cause{jobOK, {UID: "p"}}, false},
			{40 * time.Second, []Cause{refused}, false},
			{70 * time.Second, []Cause{refused}, true},
		}},
		{"nothing looked at", []look{{0, nil, false}, {time.Hour, nil, false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tr Tracker
			for i, l := range tt.looks {
				c, due := tr.Observe(l.causes, t0.Add(l.after), g)
				if due != l.due {
					t.Fatalf("look %d (+%s): due %v (%v), want %v", i, l.after, due, c, l.due)
				}
			}
		})
	}
}

func TestParseSummary(t *testing.T) {
	tests := []struct {
		name    string
		msg     string
		want    Summary
		wantErr string
	}{
		{
			name: "backup done",
			msg: `{"status":"done","server":"lobby","run_id":"node-lobby-r1","archive_ref":"/backups/lobby/node-lobby-r1.tar.zst",` +
				`"size_bytes":1234,"sha256":"` + strings.Repeat("ab", 32) + `","compression":"zstd","file_count":3,"duration_seconds":0.5}` + "\n",
			want: Summary{Status: "done", RunID: "node-lobby-r1", ArchiveRef: "/backups/lobby/node-lobby-r1.tar.zst", SHA256: strings.Repeat("ab", 32), SizeBytes: 1234},
		},
		{
			name: "already recorded with a prune",
			msg:  `{"status":"already-recorded","run_id":"r","sha256":"00","size_bytes":7,"duration_seconds":0,"prune":{"deleted":1}}`,
			want: Summary{Status: "already-recorded", RunID: "r", SHA256: "00", SizeBytes: 7},
		},
		{
			name: "restore",
			msg:  `{"status":"restored","run_id":"x","archive_ref":"/backups/a.tar","sha256":"11"}`,
			want: Summary{Status: "restored", RunID: "x", ArchiveRef: "/backups/a.tar", SHA256: "11"},
		},
		{name: "empty", msg: " \n", wantErr: "empty"},
		{name: "log tail", msg: "archiver backup: open felis.toml: no such file", wantErr: "not the archiver's JSON summary"},
		{name: "no status", msg: `{"run_id":"r"}`, wantErr: "no status"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSummary(tt.msg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseSummary error %v, want one mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseSummary = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}
