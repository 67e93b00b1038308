package kube

import (
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/runtimerecord"
)

// Pod fixtures as the API server reports them, in the manner of kstatus's
// tests: each names a Pod of agent bench's revision 2 and the verdict
// expected of it. None needs a cluster.

// gatewayPod is the metadata of revision 2's gateway Pod; a fixture adds
// its spec and status.
const gatewayPod = `
apiVersion: v1
kind: Pod
metadata:
  name: bench-gateway-5d8c7b9f4-x2k8q
  namespace: occ-test
  labels:
    occ-platform.io/agent: bench
    occ-platform.io/revision: "2"
    occ-platform.io/component: gateway
spec:
  containers:
  - name: gateway
    image: ghcr.io/occ-platform/runtime:1
`

// verdictWant is a verdict written flat: code "" is no failure; a failure's
// advice (Next) is checked to be there, not word for word.
type verdictWant struct {
	component string
	ready     bool
	phase     string
	started   string
	code      executor.Code
	container string
	failPhase string
	reason    string
}

func TestVerdict_Pods(t *testing.T) {
	cases := []struct {
		name  string
		pod   string
		phase string // the gate's phase before the Pod; "" is "scheduling"
		want  verdictWant
	}{
		{
			name: "pending, not yet scheduled",
			pod: gatewayPod + `
status:
  phase: Pending
`,
			want: verdictWant{component: "gateway", phase: "scheduling"},
		},
		{
			name: "pending, unschedulable",
			pod: gatewayPod + `
status:
  phase: Pending
  conditions:
  - type: PodScheduled
    status: "False"
    reason: Unschedulable
    message: '0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.'
`,
			want: verdictWant{component: "gateway", phase: "scheduling",
				code: executor.Unschedulable, container: "gateway", failPhase: "scheduling",
				reason: "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."},
		},
		{
			// The claim is being provisioned: the scheduler retries once it
			// binds; the claim's Events tell one that never will.
			name: "pending, waits for its state claim (not a failure)",
			pod: gatewayPod + `
status:
  phase: Pending
  conditions:
  - type: PodScheduled
    status: "False"
    reason: Unschedulable
    message: '0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.'
`,
			want: verdictWant{component: "gateway", phase: "scheduling"},
		},
		{
			name: "pending, a WaitForFirstConsumer claim binding (not a failure)",
			pod: gatewayPod + `
status:
  phase: Pending
  conditions:
  - type: PodScheduled
    status: "False"
    reason: Unschedulable
    message: 'running PreBind plugin "VolumeBinding": binding volumes: timed out waiting for the condition'
`,
			want: verdictWant{component: "gateway", phase: "scheduling"},
		},
		{
			name: "pending, scheduling gated (not a failure)",
			pod: gatewayPod + `
status:
  phase: Pending
  conditions:
  - type: PodScheduled
    status: "False"
    reason: SchedulingGated
    message: Scheduling is blocked due to non-empty scheduling gates
`,
			want: verdictWant{component: "gateway", phase: "scheduling"},
		},
		{
			name: "scheduled, container creating",
			pod: gatewayPod + `
status:
  phase: Pending
  conditions:
  - type: PodScheduled
    status: "True"
  - type: Ready
    status: "False"
    reason: ContainersNotReady
  containerStatuses:
  - name: gateway
    image: ghcr.io/occ-platform/runtime:1
    imageID: ""
    ready: false
    restartCount: 0
    started: false
    state:
      waiting:
        reason: ContainerCreating
`,
			want: verdictWant{component: "gateway", phase: "scheduling"},
		},
		{
			name: "image pull error",
			pod: gatewayPod + `
status:
  phase: Pending
  conditions:
  - type: PodScheduled
    status: "True"
  containerStatuses:
  - name: gateway
    image: ghcr.io/occ-platform/runtime:1
    imageID: ""
    ready: false
    restartCount: 0
    state:
      waiting:
        reason: ErrImagePull
        message: 'failed to pull and unpack image "ghcr.io/occ-platform/runtime:1": not found'
`,
			want: verdictWant{component: "gateway", phase: "scheduling",
				code: executor.ImagePull, container: "gateway", failPhase: "image pull",
				reason: `ErrImagePull: failed to pull and unpack image "ghcr.io/occ-platform/runtime:1": not found`},
		},
		{
			name: "image pull back-off",
			pod:  waitingGateway("ghcr.io/occ-platform/runtime:1", "ImagePullBackOff", "Back-off pulling image \"ghcr.io/occ-platform/runtime:1\""),
			want: verdictWant{component: "gateway", phase: "scheduling",
				code: executor.ImagePull, container: "gateway", failPhase: "image pull",
				reason: `ImagePullBackOff: Back-off pulling image "ghcr.io/occ-platform/runtime:1"`},
		},
		{
			name: "invalid image name",
			pod:  waitingGateway("ghcr.io/occ-platform/runtime::1", "InvalidImageName", "Failed to apply default image tag"),
			want: verdictWant{component: "gateway", phase: "scheduling",
				code: executor.ImagePull, container: "gateway", failPhase: "image pull",
				reason: "InvalidImageName: Failed to apply default image tag"},
		},
		{
			name: "container config error",
			pod:  waitingGateway("ghcr.io/occ-platform/runtime:1", "CreateContainerConfigError", "secret \"llm\" not found"),
			want: verdictWant{component: "gateway", phase: "scheduling",
				code: executor.ContainerConfig, container: "gateway", failPhase: "container configuration",
				reason: `CreateContainerConfigError: secret "llm" not found`},
		},
		{
			name: "crash loop with restarts",
			pod: gatewayPod + `
status:
  phase: Running
  conditions:
  - type: PodScheduled
    status: "True"
  - type: Ready
    status: "False"
    reason: ContainersNotReady
  containerStatuses:
  - name: gateway
    image: ghcr.io/occ-platform/runtime:1
    imageID: ""
    ready: false
    restartCount: 3
    started: false
    state:
      waiting:
        reason: CrashLoopBackOff
        message: back-off 40s restarting failed container=gateway pod=bench-gateway-5d8c7b9f4-x2k8q
    lastState:
      terminated:
        exitCode: 1
        reason: Error
        startedAt: "2025-01-01T00:00:10Z"
        finishedAt: "2025-01-01T00:00:11Z"
`,
			want: verdictWant{component: "gateway", phase: "scheduling",
				code: executor.CrashLoop, container: "gateway", failPhase: "scheduling",
				reason: "the container keeps exiting (3 restarts); last exit code 1 (Error)"},
		},
		{
			name: "crash loop after a startup record named the phase",
			pod: gatewayPod + `
status:
  phase: Running
  containerStatuses:
  - name: gateway
    image: ghcr.io/occ-platform/runtime:1
    imageID: ""
    ready: false
    restartCount: 1
    state:
      waiting:
        reason: CrashLoopBackOff
`,
			phase: "model_probe",
			want: verdictWant{component: "gateway", phase: "model_probe",
				code: executor.CrashLoop, container: "gateway", failPhase: "model_probe",
				reason: "the container keeps exiting (1 restarts)"},
		},
		{
			name: "running, not ready",
			pod: gatewayPod + `
status:
  phase: Running
  conditions:
  - type: PodScheduled
    status: "True"
  - type: Initialized
    status: "True"
  - type: ContainersReady
    status: "False"
    reason: ContainersNotReady
  - type: Ready
    status: "False"
    reason: ContainersNotReady
  containerStatuses:
  - name: gateway
    image: ghcr.io/occ-platform/runtime:1
    imageID: ""
    ready: false
    restartCount: 0
    started: true
    state:
      running:
        startedAt: "2025-01-01T00:00:05Z"
`,
			want: verdictWant{component: "gateway", phase: "startup", started: "gateway"},
		},
		{
			name: "running, not ready, phase already past scheduling",
			pod: gatewayPod + `
status:
  phase: Running
  containerStatuses:
  - name: gateway
    image: ghcr.io/occ-platform/runtime:1
    imageID: ""
    ready: false
    restartCount: 0
    started: true
    state:
      running:
        startedAt: "2025-01-01T00:00:05Z"
`,
			phase: "model_probe",
			want:  verdictWant{component: "gateway", phase: "model_probe"},
		},
		{
			name: "ready",
			pod: gatewayPod + `
status:
  phase: Running
  conditions:
  - type: PodScheduled
    status: "True"
  - type: Initialized
    status: "True"
  - type: ContainersReady
    status: "True"
  - type: Ready
    status: "True"
  containerStatuses:
  - name: gateway
    image: ghcr.io/occ-platform/runtime:1
    imageID: ""
    ready: true
    restartCount: 0
    started: true
    state:
      running:
        startedAt: "2025-01-01T00:00:05Z"
`,
			want: verdictWant{component: "gateway", ready: true, phase: "startup", started: "gateway"},
		},
		{
			name: "ready while a sandbox is still provisioning",
			pod: gatewayPod + `
status:
  phase: Running
  conditions:
  - type: Ready
    status: "True"
  containerStatuses:
  - name: gateway
    image: ghcr.io/occ-platform/runtime:1
    imageID: ""
    ready: true
    restartCount: 0
    state:
      running:
        startedAt: "2025-01-01T00:00:05Z"
`,
			phase: "sandbox provisioning",
			want:  verdictWant{component: "gateway", ready: true, phase: "sandbox provisioning"},
		},
		{
			// A terminating Pod whose Ready condition is still True is on
			// its way out: it never counts as ready.
			name: "terminating, Ready condition still true: not ready",
			pod: `
apiVersion: v1
kind: Pod
metadata:
  name: bench-gateway-5d8c7b9f4-x2k8q
  namespace: occ-test
  deletionTimestamp: "2025-01-01T00:01:00Z"
  deletionGracePeriodSeconds: 30
  labels:
    occ-platform.io/agent: bench
    occ-platform.io/revision: "2"
    occ-platform.io/component: gateway
status:
  phase: Running
  conditions:
  - type: Ready
    status: "True"
  containerStatuses:
  - name: gateway
    image: ghcr.io/occ-platform/runtime:1
    imageID: ""
    ready: true
    restartCount: 0
    state:
      running:
        startedAt: "2025-01-01T00:00:05Z"
`,
			want: verdictWant{component: "gateway", ready: false, phase: "startup", started: "gateway"},
		},
		{
			name: "terminating, container terminated",
			pod: `
apiVersion: v1
kind: Pod
metadata:
  name: bench-gateway-5d8c7b9f4-x2k8q
  namespace: occ-test
  deletionTimestamp: "2025-01-01T00:01:00Z"
  labels:
    occ-platform.io/agent: bench
    occ-platform.io/revision: "2"
    occ-platform.io/component: gateway
status:
  phase: Running
  conditions:
  - type: Ready
    status: "False"
  containerStatuses:
  - name: gateway
    image: ghcr.io/occ-platform/runtime:1
    imageID: ""
    ready: false
    restartCount: 0
    state:
      terminated:
        exitCode: 143
        reason: Error
        startedAt: "2025-01-01T00:00:05Z"
        finishedAt: "2025-01-01T00:01:01Z"
`,
			want: verdictWant{component: "gateway", phase: "scheduling"},
		},
		{
			// Of a Pod's containers, the first one running begins the
			// startup phase, and a later one's crash loop is reported in it.
			name: "second container crash loops while the first runs",
			pod: gatewayPod + `
  - name: proxy
    image: ghcr.io/occ-platform/proxy:1
status:
  phase: Running
  conditions:
  - type: Ready
    status: "False"
  containerStatuses:
  - name: gateway
    image: ghcr.io/occ-platform/runtime:1
    imageID: ""
    ready: false
    restartCount: 0
    state:
      running:
        startedAt: "2025-01-01T00:00:05Z"
  - name: proxy
    image: ghcr.io/occ-platform/proxy:1
    imageID: ""
    ready: false
    restartCount: 5
    state:
      waiting:
        reason: CrashLoopBackOff
    lastState:
      terminated:
        exitCode: 2
        reason: Error
        startedAt: "2025-01-01T00:00:20Z"
        finishedAt: "2025-01-01T00:00:21Z"
`,
			want: verdictWant{component: "gateway", phase: "startup", started: "gateway",
				code: executor.CrashLoop, container: "proxy", failPhase: "startup",
				reason: "the container keeps exiting (5 restarts); last exit code 2 (Error)"},
		},
		{
			// Only the app containers' statuses are judged: an init
			// container's crash loop (the Pod shows Init:CrashLoopBackOff)
			// fails only at the deadline.
			name: "init container crash loops",
			pod: gatewayPod + `
  initContainers:
  - name: setup
    image: ghcr.io/occ-platform/runtime:1
status:
  phase: Pending
  conditions:
  - type: Initialized
    status: "False"
    reason: ContainersNotInitialized
  - type: Ready
    status: "False"
    reason: ContainersNotReady
  initContainerStatuses:
  - name: setup
    image: ghcr.io/occ-platform/runtime:1
    imageID: ""
    ready: false
    restartCount: 4
    state:
      waiting:
        reason: CrashLoopBackOff
  containerStatuses:
  - name: gateway
    image: ghcr.io/occ-platform/runtime:1
    imageID: ""
    ready: false
    restartCount: 0
    state:
      waiting:
        reason: PodInitializing
`,
			want: verdictWant{component: "gateway", phase: "scheduling"},
		},
		{
			name: "another component's Pod, ready",
			pod: `
apiVersion: v1
kind: Pod
metadata:
  name: bench-harness-6f7d8c9b5-q9w7e
  namespace: occ-test
  labels:
    occ-platform.io/agent: bench
    occ-platform.io/revision: "2"
    occ-platform.io/component: harness
status:
  phase: Running
  conditions:
  - type: Ready
    status: "True"
  containerStatuses:
  - name: app-server
    image: ghcr.io/occ-platform/codex:1
    imageID: ""
    ready: true
    restartCount: 0
    state:
      running:
        startedAt: "2025-01-01T00:00:05Z"
`,
			want: verdictWant{component: "harness", ready: true, phase: "startup", started: "app-server"},
		},
		{
			name: "another component's Pod, image pull back-off",
			pod: `
apiVersion: v1
kind: Pod
metadata:
  name: bench-harness-6f7d8c9b5-q9w7e
  namespace: occ-test
  labels:
    occ-platform.io/agent: bench
    occ-platform.io/revision: "2"
    occ-platform.io/component: harness
status:
  phase: Pending
  containerStatuses:
  - name: app-server
    image: ghcr.io/occ-platform/codex:1
    imageID: ""
    ready: false
    restartCount: 0
    state:
      waiting:
        reason: ImagePullBackOff
        message: Back-off pulling image "ghcr.io/occ-platform/codex:1"
`,
			want: verdictWant{component: "harness", phase: "scheduling",
				code: executor.ImagePull, container: "app-server", failPhase: "image pull",
				reason: `ImagePullBackOff: Back-off pulling image "ghcr.io/occ-platform/codex:1"`},
		},
		{
			name: "unlabelled Pod, unschedulable",
			pod: `
apiVersion: v1
kind: Pod
metadata:
  name: stray
status:
  phase: Pending
  conditions:
  - type: PodScheduled
    status: "False"
    reason: Unschedulable
    message: 0/1 nodes are available
`,
			want: verdictWant{phase: "scheduling",
				code: executor.Unschedulable, container: "", failPhase: "scheduling", reason: "0/1 nodes are available"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			phase := tc.phase
			if phase == "" {
				phase = "scheduling"
			}
			got := judgePod(podFixture(t, tc.pod), "bench", 2, phase)
			checkVerdict(t, got, tc.want)
		})
	}
}

func podFixture(t *testing.T, manifest string) *corev1.Pod {
	t.Helper()
	var p corev1.Pod
	if err := yaml.UnmarshalStrict([]byte(manifest), &p); err != nil {
		t.Fatalf("fixture: %v", err)
	}
	return &p
}

func checkVerdict(t *testing.T, got podVerdict, want verdictWant) {
	t.Helper()
	flat := verdictWant{component: got.Component, ready: got.Ready, phase: got.Phase, started: got.Started}
	if f := got.Failure; f != nil {
		flat.code, flat.container, flat.failPhase, flat.reason = f.Code, f.Component, f.Phase, f.Reason
		if f.Agent != "bench" || f.Revision != 2 {
			t.Errorf("failure of agent %q revision %d, want bench revision 2", f.Agent, f.Revision)
		}
		if f.Next == "" {
			t.Errorf("failure %s gives no advice", f.Code)
		}
		if f.Record != nil || f.Lines != nil {
			t.Errorf("a Pod verdict carries a record %v or log tail %v", f.Record, f.Lines)
		}
	}
	if flat != want {
		t.Errorf("verdict\n got  %+v\n want %+v", flat, want)
	}
}

// gateState books what the verdicts say: which components have a Pod and
// are ready (only the revision's own components count), the phase and the
// container last heard of, and it hands each failure on with the revision.
func TestVerdict_GateStateBooksTheVerdicts(t *testing.T) {
	st := &gateState{agent: "bench", n: 2, components: map[string]bool{"gateway": true, "harness": true},
		followed: map[string]bool{}, failures: make(chan *Failure, 8), phase: "scheduling"}
	observe := func(manifest string) {
		t.Helper()
		if f := st.observe(podFixture(t, manifest)); f != nil {
			t.Fatalf("observe: %v", f)
		}
	}
	books := func(phase, container string, ready bool) {
		t.Helper()
		st.mu.Lock()
		gotPhase, gotContainer := st.phase, st.container
		st.mu.Unlock()
		if gotPhase != phase || gotContainer != container || st.ready() != ready {
			t.Fatalf("books: phase %q container %q ready %v, want %q %q %v", gotPhase, gotContainer, st.ready(), phase, container, ready)
		}
	}
	const harnessReady = `
metadata:
  name: bench-harness-1
  labels: {occ-platform.io/component: harness}
status:
  conditions: [{type: Ready, status: "True"}]
  containerStatuses:
  - {name: app-server, image: x, imageID: "", ready: true, restartCount: 0, state: {running: {}}}
`
	const sidecarReady = `
metadata:
  name: bench-sidecar-1
  labels: {occ-platform.io/component: sidecar}
status:
  conditions: [{type: Ready, status: "True"}]
`
	const gatewayRunning = `
metadata:
  name: bench-gateway-1
  labels: {occ-platform.io/component: gateway}
status:
  conditions: [{type: Ready, status: "False"}]
  containerStatuses:
  - {name: gateway, image: x, imageID: "", ready: false, restartCount: 0, state: {running: {}}}
`
	const gatewayReady = `
metadata:
  name: bench-gateway-1
  labels: {occ-platform.io/component: gateway}
status:
  conditions: [{type: Ready, status: "True"}]
  containerStatuses:
  - {name: gateway, image: x, imageID: "", ready: true, restartCount: 0, state: {running: {}}}
`

	books("scheduling", "", false)
	observe(harnessReady)
	books("startup", "app-server", false)
	if got := st.unseen(map[string]string{"gateway": "bench-gateway", "harness": "bench-harness"}); !reflect.DeepEqual(got, []string{"gateway"}) {
		t.Errorf("unseen = %v, want [gateway]", got)
	}
	f := st.deadline()
	if f.Code != executor.Deadline || f.Agent != "bench" || f.Revision != 2 || f.Phase != "startup" || f.Component != "app-server" ||
		f.Reason != "the revision did not become ready before the deadline (ready: harness); no Pod was created for: gateway" || f.Record != nil {
		t.Errorf("deadline = %+v", *f)
	}

	// A ready Pod of a component the revision does not run is booked, but
	// does not make the revision ready.
	observe(sidecarReady)
	books("startup", "app-server", false)

	observe(gatewayRunning)
	books("startup", "app-server", false)
	st.record(runtimerecord.Record{Event: runtimerecord.EventStartupPhase, Container: "gateway", Phase: "model_probe"})
	books("model_probe", "gateway", false)
	f = st.deadline()
	if f.Phase != "model_probe" || f.Component != "gateway" || f.Record == nil || f.Record.Phase != "model_probe" ||
		f.Reason != "the revision did not become ready before the deadline (ready: harness, sidecar)" {
		t.Errorf("deadline = %+v", *f)
	}

	observe(gatewayReady)
	books("model_probe", "gateway", true)

	// A failure is judged in the phase booked so far, and carries the revision.
	crash := podFixture(t, `
metadata:
  name: bench-gateway-2
  labels: {occ-platform.io/component: gateway}
status:
  containerStatuses:
  - {name: gateway, image: x, imageID: "", ready: false, restartCount: 2, state: {waiting: {reason: CrashLoopBackOff}}}
`)
	f = st.observe(crash)
	if f == nil || f.Code != executor.CrashLoop || f.Phase != "model_probe" || f.Component != "gateway" || f.Agent != "bench" || f.Revision != 2 {
		t.Fatalf("observe(crash loop) = %+v", f)
	}

	// fail hands a failure on with the revision, and never blocks.
	for range cap(st.failures) + 1 {
		st.fail(&Failure{Code: executor.ReplicaFailure})
	}
	if got := <-st.failures; got.Agent != "bench" || got.Revision != 2 || got.Code != executor.ReplicaFailure {
		t.Errorf("fail handed on %+v", got)
	}
}

// waitingGateway is a pending gateway Pod whose one container waits with
// reason and message (the kubelet's image and configuration errors).
func waitingGateway(image, reason, message string) string {
	return gatewayPod + fmt.Sprintf(`
status:
  phase: Pending
  containerStatuses:
  - name: gateway
    image: %q
    imageID: ""
    ready: false
    restartCount: 0
    state:
      waiting:
        reason: %s
        message: %q
`, image, reason, message)
}
