package kubeenv

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"

	"github.com/occ-platform/terraform-provider-occ/internal/sandboxapi"
)

// The test sandbox driver stands in for OpenShell, the agent-sandbox driver
// the provider targets in production: it serves the Sandbox API of
// internal/sandboxapi on the test cluster. For each Sandbox it runs one Pod
// (which kwok makes Running and Ready, by the behaviour annotations of the
// Pod template), reports the Pod's readiness and the credential attachments
// on the Sandbox's status, and simulates the OpenShell gateway: a
// selector-less Service whose one endpoint is ready unless an outage is
// simulated (SetOutage). Like the upstream agent-sandbox controller, it
// gives each Sandbox a headless Service of the Sandbox's name that selects
// its Pod by the label sandboxNameHashLabel (status.service and
// status.serviceFQDN name it), so that the Pod answers at
// NAME.NAMESPACE.svc: on the real node a dedicated Codex gateway reaches
// its sandboxed harness there. With ServeCredentialGateway it also stands
// in for the Credential Gateway (credentialgateway.go): it holds keys and
// swaps the harness's placeholder for them on the way out.

//go:embed sandbox/agents.x-k8s.io_sandboxes.yaml
var sandboxCRDYAML []byte

// Condition reasons the driver reports.
const (
	// Of the Ready condition.
	SandboxReasonPodReady           = "PodReady"
	SandboxReasonPodNotReady        = "PodNotReady"
	SandboxReasonSuspended          = "Suspended"
	SandboxReasonInvalidPodTemplate = "InvalidPodTemplate"
	SandboxReasonPodCreateFailed    = "PodCreateFailed"
	SandboxReasonPodConflict        = "PodConflict"
	// Of the attachment conditions.
	SandboxReasonAttached          = "Attached"
	SandboxReasonInvalidAnnotation = "InvalidAnnotation"
)

// ConditionInvalidAttachments is the condition the driver sets (False,
// reason InvalidAnnotation) instead of the per-attachment conditions when
// the Sandbox's sandboxapi.AnnotationAttachments cannot be decoded or names
// an attachment that cannot be a condition type.
var ConditionInvalidAttachments = sandboxapi.AttachmentCondition("invalid")

// annotationTemplateHash, on a Pod the driver created, is a hash of the
// Sandbox's spec.podTemplate the Pod was built from: a Pod whose hash
// differs from the Sandbox's template is deleted and created again.
const annotationTemplateHash = "testenv.occ.dev/sandbox-template-hash"

// sandboxNameHashLabel is the label on a Sandbox's Pod that its headless
// Service selects (upstream agent-sandbox's label of the same name: a hash
// of the Sandbox's name, since a name may be longer than a label value).
const sandboxNameHashLabel = "agents.x-k8s.io/sandbox-name-hash"

// sandboxNameHash is that label's value for a Sandbox name.
func sandboxNameHash(name string) string {
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:8])
}

// gatewayEndpointIP is the address of the simulated gateway's endpoint.
const gatewayEndpointIP = "10.0.0.1"

// InstallSandboxCRD installs the agent-sandbox CRD (idempotent: already
// exists is fine, concurrent callers are fine) and waits until it is
// Established, discovery serves sandboxes in agents.x-k8s.io/v1alpha1, and
// the garbage collector handles Sandboxes (see waitSandboxGC: the first
// call on a cluster can take up to about 30 s).
func (c *Cluster) InstallSandboxCRD(ctx context.Context) error {
	if err := c.createSandboxCRD(ctx); err != nil {
		return err
	}
	return c.waitSandboxGC(ctx)
}

// createSandboxCRD creates the CRD and waits until it is served. Start
// calls it before the controller manager starts, so that the garbage
// collector knows Sandboxes from its first discovery.
func (c *Cluster) createSandboxCRD(ctx context.Context) error {
	crd := &unstructured.Unstructured{}
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(sandboxCRDYAML), 4096)
	for len(crd.Object) == 0 { // skip the comment-only document before "---"
		if err := decoder.Decode(&crd.Object); err != nil {
			return fmt.Errorf("testenv/kubeenv: decode the Sandbox CRD: %w", err)
		}
	}
	if _, err := c.Dynamic.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("testenv/kubeenv: create CRD %s: %w", sandboxapi.CRDName, err)
	}
	for {
		last := c.sandboxCRDServed(ctx)
		if last == nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testenv/kubeenv: CRD %s not served: %w (last check: %v)", sandboxapi.CRDName, ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// sandboxGC remembers, per cluster, the probe of waitSandboxGC: one at a
// time, and none once one succeeded.
var sandboxGC = struct {
	mu     sync.Mutex
	probes map[*Cluster]*gcProbe
}{probes: map[*Cluster]*gcProbe{}}

type gcProbe struct {
	done chan struct{}
	err  error
}

// waitSandboxGC waits until the garbage collector deletes the dependents of
// a deleted Sandbox. The controller manager's garbage collector learns new
// resources from discovery every 30 s (hard-coded); until then it ignores
// owner references to a Sandbox and never finishes a Sandbox deleted with
// the Foreground or Orphan propagation policy. A CRD installed before the
// controller manager starts is known at once, and the probe then takes
// about a second.
func (c *Cluster) waitSandboxGC(ctx context.Context) error {
	sandboxGC.mu.Lock()
	p := sandboxGC.probes[c]
	if p == nil {
		p = &gcProbe{done: make(chan struct{})}
		sandboxGC.probes[c] = p
		go func() {
			// Not bound to ctx: a caller that gives up leaves the probe to
			// the next.
			pctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			p.err = c.probeSandboxGC(pctx)
			if p.err != nil {
				sandboxGC.mu.Lock()
				delete(sandboxGC.probes, c) // the next caller tries again
				sandboxGC.mu.Unlock()
			}
			close(p.done)
		}()
	}
	sandboxGC.mu.Unlock()
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return fmt.Errorf("testenv/kubeenv: the garbage collector does not handle Sandboxes yet: %w", ctx.Err())
	}
}

// probeSandboxGC creates, in a namespace of its own, a Sandbox and a
// ConfigMap it owns, deletes the Sandbox and waits a few seconds for the
// ConfigMap to go; it tries again with new objects until one goes.
func (c *Cluster) probeSandboxGC(ctx context.Context) error {
	core := c.Clientset.CoreV1()
	ns, err := core.Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "sandbox-gc-probe-"},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("testenv/kubeenv: sandbox garbage collection probe: %w", err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = core.Namespaces().Delete(ctx, ns.Name, deleteNow)
	}()
	sandboxes := c.Dynamic.Resource(sandboxapi.GVR).Namespace(ns.Name)
	for attempt := 0; ; attempt++ {
		name := fmt.Sprintf("probe-%d", attempt)
		sb, err := sandboxes.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": sandboxapi.GroupVersion,
			"kind":       sandboxapi.Kind,
			"metadata":   map[string]any{"name": name},
			"spec":       map[string]any{"replicas": int64(0), "podTemplate": map[string]any{"spec": map[string]any{}}},
		}}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("testenv/kubeenv: sandbox garbage collection probe: %w", err)
		}
		if _, err := core.ConfigMaps(ns.Name).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name: name,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: sandboxapi.GroupVersion, Kind: sandboxapi.Kind, Name: name, UID: sb.GetUID(),
			}},
		}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("testenv/kubeenv: sandbox garbage collection probe: %w", err)
		}
		if err := sandboxes.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("testenv/kubeenv: sandbox garbage collection probe: %w", err)
		}
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
			_, err := core.ConfigMaps(ns.Name).Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("testenv/kubeenv: the garbage collector does not handle Sandboxes: %w\n--- kube-controller-manager log ---\n%s",
					ctx.Err(), c.LogTail(BinControllerManager, 20))
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// sandboxCRDServed returns nil once the Sandbox CRD is Established and
// discovery lists its resource.
func (c *Cluster) sandboxCRDServed(ctx context.Context) error {
	crd, err := c.Dynamic.Resource(crdGVR).Get(ctx, sandboxapi.CRDName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	established := false
	for _, cond := range conditions {
		if m, ok := cond.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
			established = true
		}
	}
	if !established {
		return errors.New("CRD not Established yet")
	}
	resources, err := c.Clientset.Discovery().ServerResourcesForGroupVersion(sandboxapi.GroupVersion)
	if err != nil {
		return err
	}
	if !hasResources(resources, sandboxapi.Resource) {
		return fmt.Errorf("discovery does not list %s in %s yet", sandboxapi.Resource, sandboxapi.GroupVersion)
	}
	return nil
}

// SandboxDriverOptions configure StartSandboxDriver.
type SandboxDriverOptions struct {
	// Namespaces the driver watches Sandboxes in (the test's tenant
	// namespaces). At least one is required: drivers of parallel tests share
	// the cluster and must not act on each other's Sandboxes.
	Namespaces []string
	// GatewayNamespace and GatewayService are where the simulated OpenShell
	// gateway Service lives. Defaults: a new namespace created for this
	// driver (prefix "openshell-") and sandboxapi.DefaultGatewayService. The
	// driver creates the namespace if it is missing (and then deletes it when
	// the test ends), a selector-less Service (port 8080 named "grpc") and
	// one EndpointSlice for it (one endpoint, 10.0.0.1, ready unless an
	// outage is simulated).
	GatewayNamespace string
	GatewayService   string
}

// SandboxDriver is a running test sandbox driver; see StartSandboxDriver.
type SandboxDriver struct {
	c          *Cluster
	t          testing.TB
	gwNS, gwSv string
	namespaces []string // watched

	queue workqueue.TypedRateLimitingInterface[sandboxKey]

	// gate: a reconcile holds it for reading while it works, SetOutage for
	// writing while it flips outage, so that once SetOutage(true) returns no
	// reconcile writes anything.
	gate   sync.RWMutex
	outage bool

	mu          sync.Mutex
	known       map[sandboxKey]bool          // the Sandboxes the watches have seen and not seen deleted
	failures    map[string]attachmentFailure // by attachment name
	provisioned []string
	gateway     *credentialGateway // ServeCredentialGateway's, nil until then

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// sandboxKey names a Sandbox.
type sandboxKey struct{ namespace, name string }

func (k sandboxKey) String() string { return k.namespace + "/" + k.name }

type attachmentFailure struct{ reason, message string }

// StartSandboxDriver installs the Sandbox CRD, creates the gateway Service
// and its EndpointSlice (ready), and runs the driver until t ends: a
// t.Cleanup stops it and deletes the gateway namespace if the driver created
// it. It fails the test (t.Fatalf) when it cannot start.
func (c *Cluster) StartSandboxDriver(t testing.TB, opts SandboxDriverOptions) *SandboxDriver {
	t.Helper()
	if len(opts.Namespaces) == 0 {
		t.Fatalf("testenv/kubeenv: StartSandboxDriver needs at least one namespace to watch")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.InstallSandboxCRD(ctx); err != nil {
		t.Fatalf("%v", err)
	}

	d := &SandboxDriver{
		c:    c,
		t:    t,
		gwNS: opts.GatewayNamespace,
		gwSv: opts.GatewayService,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[sandboxKey](50*time.Millisecond, 5*time.Second),
			workqueue.TypedRateLimitingQueueConfig[sandboxKey]{Name: "sandbox-driver"}),
		known:    map[sandboxKey]bool{},
		failures: map[string]attachmentFailure{},
	}
	if d.gwSv == "" {
		d.gwSv = sandboxapi.DefaultGatewayService
	}
	if err := d.ensureGatewayNamespace(ctx); err != nil {
		t.Fatalf("testenv/kubeenv: sandbox driver gateway namespace: %v", err)
	}
	if err := d.ensureGatewayService(ctx); err != nil {
		t.Fatalf("testenv/kubeenv: sandbox driver gateway Service %s/%s: %v", d.gwNS, d.gwSv, err)
	}
	if err := d.writeGatewayEndpoints(ctx, true); err != nil {
		t.Fatalf("testenv/kubeenv: sandbox driver gateway EndpointSlice %s/%s: %v", d.gwNS, d.gwSv, err)
	}

	runCtx, stop := context.WithCancel(context.Background())
	d.cancel = stop
	t.Cleanup(d.stop)
	seen := map[string]bool{}
	for _, ns := range opts.Namespaces {
		if seen[ns] {
			continue
		}
		seen[ns] = true
		d.namespaces = append(d.namespaces, ns)
		for _, lw := range []listWatch{d.sandboxWatch(ns), d.podWatch(ns)} {
			// The first list is synchronous: once StartSandboxDriver returns,
			// every change is seen.
			rv, err := d.relist(ctx, lw)
			if err != nil {
				t.Fatalf("testenv/kubeenv: sandbox driver: list %s: %v", lw.what, err)
			}
			d.wg.Go(func() { d.follow(runCtx, lw, rv) })
		}
	}
	d.wg.Go(func() { d.work(runCtx) })
	return d
}

// GatewayNamespace is the namespace of the simulated gateway Service.
func (d *SandboxDriver) GatewayNamespace() string { return d.gwNS }

// GatewayService is the name of the simulated gateway Service.
func (d *SandboxDriver) GatewayService() string { return d.gwSv }

// SetOutage(true) simulates a gateway outage: the gateway's endpoint turns
// not ready and the driver stops provisioning (no Pods created or deleted,
// no status written) until SetOutage(false), after which it catches up on
// every Sandbox. It returns once the EndpointSlice is written.
func (d *SandboxDriver) SetOutage(ctx context.Context, down bool) error {
	if down {
		d.setOutage(true) // waits for a reconcile in progress
		return d.writeGatewayEndpoints(ctx, false)
	}
	if err := d.writeGatewayEndpoints(ctx, true); err != nil {
		return err
	}
	d.setOutage(false)
	d.enqueueAll()
	return nil
}

func (d *SandboxDriver) setOutage(down bool) {
	d.gate.Lock()
	defer d.gate.Unlock()
	d.outage = down
}

// FailAttachment makes the attachment with this name (in any Sandbox)
// report its condition False with reason and message instead of True,
// reason "Attached". It applies to the Sandboxes processed after the call
// and re-processes the existing ones. The reason must be a valid condition
// reason (CamelCase); an invalid one fails the test.
func (d *SandboxDriver) FailAttachment(name, reason, message string) {
	if errs := metav1validation.IsValidConditionReason(reason); len(errs) > 0 || len(reason) > 1024 {
		d.t.Errorf("testenv/kubeenv: FailAttachment(%q): invalid condition reason %q: %s", name, reason, strings.Join(errs, "; "))
		return
	}
	d.mu.Lock()
	d.failures[name] = attachmentFailure{reason: reason, message: message}
	d.mu.Unlock()
	d.enqueueAll()
}

// Provisioned returns the Sandboxes ("ns/name") the driver created a Pod
// for, in order; a Sandbox whose Pod was created again (template change,
// resume after replicas 0) appears again.
func (d *SandboxDriver) Provisioned() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.provisioned)
}

// stop ends the worker and the watches and waits for them.
func (d *SandboxDriver) stop() {
	d.cancel()
	d.queue.ShutDown()
	d.wg.Wait()
}

func (d *SandboxDriver) logf(format string, args ...any) {
	d.t.Logf("sandbox driver: "+format, args...)
}

// --- gateway ---

func (d *SandboxDriver) ensureGatewayNamespace(ctx context.Context) error {
	namespaces := d.c.Clientset.CoreV1().Namespaces()
	if d.gwNS != "" {
		if _, err := namespaces.Get(ctx, d.gwNS, metav1.GetOptions{}); err == nil {
			return nil
		} else if !apierrors.IsNotFound(err) {
			return err
		}
	}
	om := metav1.ObjectMeta{Name: d.gwNS}
	if d.gwNS == "" {
		om = metav1.ObjectMeta{GenerateName: "openshell-"}
	}
	ns, err := namespaces.Create(ctx, &corev1.Namespace{ObjectMeta: om}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil // created by someone else meanwhile; theirs to delete
	}
	if err != nil {
		return err
	}
	d.gwNS = ns.Name
	d.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := namespaces.Delete(ctx, ns.Name, deleteNow); err != nil && !apierrors.IsNotFound(err) {
			d.logf("delete gateway namespace %s: %v", ns.Name, err)
		}
	})
	return nil
}

// ensureGatewayService creates the gateway Service without a selector: its
// endpoints are the EndpointSlice the driver writes.
func (d *SandboxDriver) ensureGatewayService(ctx context.Context) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:   d.gwSv,
			Labels: map[string]string{"app.kubernetes.io/name": "openshell", "app.kubernetes.io/managed-by": "occ-testenv"},
		},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{
			Name: "grpc", Port: 8080, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP,
		}}},
	}
	_, err := d.c.Clientset.CoreV1().Services(d.gwNS).Create(ctx, svc, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// writeGatewayEndpoints creates or updates the gateway's EndpointSlice with
// its one endpoint ready or not.
func (d *SandboxDriver) writeGatewayEndpoints(ctx context.Context, ready bool) error {
	want := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: d.gwSv,
			Labels: map[string]string{
				sandboxapi.LabelServiceName: d.gwSv,
				// Not the endpointslice controllers': they leave it alone.
				discoveryv1.LabelManagedBy: "testenv.occ.dev",
			},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{gatewayEndpointIP},
			Conditions: discoveryv1.EndpointConditions{Ready: new(ready), Serving: new(ready), Terminating: new(false)},
		}},
		Ports: []discoveryv1.EndpointPort{{Name: new("grpc"), Port: new(int32(8080)), Protocol: new(corev1.ProtocolTCP)}},
	}
	client := d.c.Clientset.DiscoveryV1().EndpointSlices(d.gwNS)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := client.Get(ctx, want.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = client.Create(ctx, want, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		cur.Labels, cur.AddressType, cur.Endpoints, cur.Ports = want.Labels, want.AddressType, want.Endpoints, want.Ports
		_, err = client.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

// --- watching ---

// listWatch lists and watches one resource in one namespace and passes
// what it sees on.
type listWatch struct {
	what  string // for messages: "sandboxes in NS"
	list  func(ctx context.Context) (objs []runtime.Object, resourceVersion string, err error)
	watch func(ctx context.Context, resourceVersion string) (watch.Interface, error)
	// listed receives the objects of each list, event each watch event
	// (bookmarks excepted).
	listed func(objs []runtime.Object)
	event  func(typ watch.EventType, obj runtime.Object)
}

// sandboxWatch follows the Sandboxes of a namespace: each one seen is
// known (for enqueueAll) and queued; a deleted one is forgotten.
func (d *SandboxDriver) sandboxWatch(ns string) listWatch {
	client := d.c.Dynamic.Resource(sandboxapi.GVR).Namespace(ns)
	return listWatch{
		what: "sandboxes in " + ns,
		list: func(ctx context.Context) ([]runtime.Object, string, error) {
			l, err := client.List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, "", err
			}
			objs := make([]runtime.Object, len(l.Items))
			for i := range l.Items {
				objs[i] = &l.Items[i]
			}
			return objs, l.GetResourceVersion(), nil
		},
		watch: func(ctx context.Context, rv string) (watch.Interface, error) {
			return client.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		},
		listed: func(objs []runtime.Object) {
			d.mu.Lock()
			for k := range d.known {
				if k.namespace == ns {
					delete(d.known, k)
				}
			}
			d.mu.Unlock()
			for _, obj := range objs {
				d.sandboxSeen(obj, false)
			}
		},
		event: func(typ watch.EventType, obj runtime.Object) { d.sandboxSeen(obj, typ == watch.Deleted) },
	}
}

func (d *SandboxDriver) sandboxSeen(obj runtime.Object, deleted bool) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	key := sandboxKey{m.GetNamespace(), m.GetName()}
	d.mu.Lock()
	defer d.mu.Unlock()
	if deleted {
		// The garbage collector deletes its Pod (owner reference); the
		// driver forgets it.
		delete(d.known, key)
		return
	}
	d.known[key] = true
	d.queue.Add(key)
}

// podWatch follows the Pods of a namespace and queues the Sandbox that
// controls each. A list (after a watch expired) also queues every known
// Sandbox of the namespace, in case its Pod was deleted meanwhile.
func (d *SandboxDriver) podWatch(ns string) listWatch {
	client := d.c.Clientset.CoreV1().Pods(ns)
	return listWatch{
		what: "pods in " + ns,
		list: func(ctx context.Context) ([]runtime.Object, string, error) {
			l, err := client.List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, "", err
			}
			objs := make([]runtime.Object, len(l.Items))
			for i := range l.Items {
				objs[i] = &l.Items[i]
			}
			return objs, l.ResourceVersion, nil
		},
		watch: func(ctx context.Context, rv string) (watch.Interface, error) {
			return client.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		},
		listed: func(objs []runtime.Object) {
			d.mu.Lock()
			for k := range d.known {
				if k.namespace == ns {
					d.queue.Add(k)
				}
			}
			d.mu.Unlock()
			for _, obj := range objs {
				d.enqueuePodOwner(obj)
			}
		},
		event: func(_ watch.EventType, obj runtime.Object) { d.enqueuePodOwner(obj) },
	}
}

// enqueuePodOwner queues the Sandbox that controls a Pod.
func (d *SandboxDriver) enqueuePodOwner(obj runtime.Object) {
	if pod, ok := obj.(*corev1.Pod); ok {
		if owner := sandboxOwner(pod); owner != nil {
			d.queue.Add(sandboxKey{pod.Namespace, owner.Name})
		}
	}
}

// enqueueAll queues every known Sandbox.
func (d *SandboxDriver) enqueueAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k := range d.known {
		d.queue.Add(k)
	}
}

// relist lists lw and passes the objects on; it returns the list's
// resourceVersion, to watch from.
func (d *SandboxDriver) relist(ctx context.Context, lw listWatch) (string, error) {
	objs, rv, err := lw.list(ctx)
	if err != nil {
		return "", err
	}
	lw.listed(objs)
	return rv, nil
}

// follow watches lw from resourceVersion rv until ctx ends, listing again
// whenever the watch cannot resume (expired resourceVersion, errors).
func (d *SandboxDriver) follow(ctx context.Context, lw listWatch, rv string) {
	for ctx.Err() == nil {
		if rv == "" {
			var err error
			if rv, err = d.relist(ctx, lw); err != nil {
				if ctx.Err() == nil {
					d.logf("list %s: %v (retrying)", lw.what, err)
					sleepCtx(ctx, time.Second)
				}
				continue
			}
		}
		w, err := lw.watch(ctx, rv)
		if err != nil {
			if ctx.Err() == nil && !expired(err) {
				d.logf("watch %s: %v (listing again)", lw.what, err)
				sleepCtx(ctx, time.Second)
			}
			rv = ""
			continue
		}
		rv = d.drain(ctx, lw, w, rv)
	}
}

// drain passes w's events on until w or ctx ends. It returns the
// resourceVersion to resume from, "" when the watch cannot resume.
func (d *SandboxDriver) drain(ctx context.Context, lw listWatch, w watch.Interface, rv string) string {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return rv
		case ev, ok := <-w.ResultChan():
			if !ok {
				return rv // the server ended the watch (timeout): resume
			}
			if ev.Type == watch.Error {
				if err := apierrors.FromObject(ev.Object); !expired(err) {
					d.logf("watch %s: %v (listing again)", lw.what, err)
				}
				return ""
			}
			if m, err := meta.Accessor(ev.Object); err == nil {
				rv = m.GetResourceVersion()
			}
			if ev.Type != watch.Bookmark {
				lw.event(ev.Type, ev.Object)
			}
		}
	}
}

// expired: the resourceVersion to watch from is too old; list again.
func expired(err error) bool { return apierrors.IsResourceExpired(err) || apierrors.IsGone(err) }

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// sandboxOwner is the Pod's controller reference when it is a Sandbox.
func sandboxOwner(pod *corev1.Pod) *metav1.OwnerReference {
	owner := metav1.GetControllerOf(pod)
	if owner == nil || owner.Kind != sandboxapi.Kind || !strings.HasPrefix(owner.APIVersion, sandboxapi.Group+"/") {
		return nil
	}
	return owner
}

// work processes queued Sandboxes one at a time until the queue shuts down.
func (d *SandboxDriver) work(ctx context.Context) {
	for {
		key, shutdown := d.queue.Get()
		if shutdown {
			return
		}
		err := d.reconcile(ctx, key)
		switch {
		case err == nil || ctx.Err() != nil:
			d.queue.Forget(key)
		default:
			d.logf("%s: %v (retrying)", key, err)
			d.queue.AddRateLimited(key)
		}
		d.queue.Done(key)
	}
}

// --- reconcile ---

// observation is what reconcile found or did about a Sandbox's Pod; the
// Ready condition is computed from it.
type observation struct {
	suspended bool
	// pod is the Sandbox's current Pod, nil when it has none (yet).
	pod *corev1.Pod
	// reason and message, when reason is set, are Ready=False's, whatever
	// the Pod's state.
	reason, message string
}

// reconcile brings one Sandbox's Pod and status in line with its spec. It
// reads the Sandbox and its Pod from the API server: the watches only say
// when to look.
func (d *SandboxDriver) reconcile(ctx context.Context, key sandboxKey) error {
	d.gate.RLock()
	defer d.gate.RUnlock()
	if d.outage {
		return nil // SetOutage(false) queues every Sandbox again
	}
	sb, err := d.c.Dynamic.Resource(sandboxapi.GVR).Namespace(key.namespace).Get(ctx, key.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil // deleted: the garbage collector deletes its Pod
	}
	if err != nil {
		return err
	}
	if sb.GetDeletionTimestamp() != nil {
		return nil
	}
	obs, err := d.ensurePod(ctx, sb)
	if err != nil {
		return err
	}
	if err := d.ensureService(ctx, sb); err != nil {
		return err
	}
	return d.updateStatus(ctx, sb, obs)
}

// ensureService creates the Sandbox's headless Service (no cluster IP, no
// ports: its name resolves to the Pod's address), owned by the Sandbox so
// that the garbage collector deletes it with it. A Service of that name
// that the Sandbox does not own is left alone.
func (d *SandboxDriver) ensureService(ctx context.Context, sb *unstructured.Unstructured) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: sb.GetName(), Namespace: sb.GetNamespace(),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: sandboxapi.GroupVersion, Kind: sandboxapi.Kind, Name: sb.GetName(), UID: sb.GetUID(),
				Controller: new(true), BlockOwnerDeletion: new(true)}}},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{sandboxNameHashLabel: sandboxNameHash(sb.GetName())}},
	}
	_, err := d.c.Clientset.CoreV1().Services(sb.GetNamespace()).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create service: %w", err)
	}
	return nil
}

// ensurePod creates, replaces or deletes the Sandbox's Pod as its spec asks.
func (d *SandboxDriver) ensurePod(ctx context.Context, sb *unstructured.Unstructured) (observation, error) {
	ns, name := sb.GetNamespace(), sb.GetName()
	replicas, found, _ := unstructured.NestedInt64(sb.Object, "spec", "replicas")
	if !found {
		replicas = 1
	}
	pod, err := d.c.Clientset.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		pod = nil
	case err != nil:
		return observation{}, fmt.Errorf("get pod: %w", err)
	}
	if replicas == 0 {
		if pod != nil && pod.DeletionTimestamp == nil && sandboxOwner(pod) != nil {
			if err := d.deletePod(ctx, pod); err != nil {
				return observation{}, err
			}
		}
		return observation{suspended: true}, nil
	}

	want, err := sandboxPod(sb)
	if err != nil {
		return observation{reason: SandboxReasonInvalidPodTemplate, message: err.Error()}, nil
	}
	if pod != nil {
		owner := sandboxOwner(pod)
		switch {
		case owner == nil:
			return observation{reason: SandboxReasonPodConflict,
				message: fmt.Sprintf("pod %s exists and is not controlled by a Sandbox", name)}, nil
		case pod.DeletionTimestamp != nil:
			// Its deletion event queues the Sandbox again.
			return observation{reason: SandboxReasonPodNotReady, message: fmt.Sprintf("pod %s is terminating", name)}, nil
		case owner.UID != sb.GetUID():
			if err := d.deletePod(ctx, pod); err != nil {
				return observation{}, err
			}
			return observation{reason: SandboxReasonPodNotReady,
				message: fmt.Sprintf("replacing pod %s of an earlier Sandbox of the same name", name)}, nil
		case pod.Annotations[annotationTemplateHash] != want.Annotations[annotationTemplateHash]:
			if err := d.deletePod(ctx, pod); err != nil {
				return observation{}, err
			}
			return observation{reason: SandboxReasonPodNotReady,
				message: fmt.Sprintf("replacing pod %s: the pod template changed", name)}, nil
		}
		return observation{pod: pod}, nil
	}

	created, err := d.c.Clientset.CoreV1().Pods(ns).Create(ctx, want, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		// Created meanwhile; its add event queues the Sandbox again.
		return observation{reason: SandboxReasonPodNotReady, message: fmt.Sprintf("pod %s is being created", name)}, nil
	case apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err):
		return observation{reason: SandboxReasonPodCreateFailed, message: err.Error()}, nil
	case err != nil:
		return observation{}, fmt.Errorf("create pod: %w", err)
	}
	d.mu.Lock()
	d.provisioned = append(d.provisioned, ns+"/"+name)
	d.mu.Unlock()
	return observation{pod: created}, nil
}

// deletePod deletes this very Pod (UID precondition) at once; a Pod already
// gone or replaced is fine.
func (d *SandboxDriver) deletePod(ctx context.Context, pod *corev1.Pod) error {
	opts := *deleteNow.DeepCopy()
	opts.Preconditions = metav1.NewUIDPreconditions(string(pod.UID))
	err := d.c.Clientset.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, opts)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete pod: %w", err)
	}
	return nil
}

// sandboxPod is the Pod the Sandbox's spec.podTemplate describes, named
// like the Sandbox and controlled by it.
func sandboxPod(sb *unstructured.Unstructured) (*corev1.Pod, error) {
	tmpl, found, err := unstructured.NestedMap(sb.Object, "spec", "podTemplate")
	if err != nil || !found {
		return nil, fmt.Errorf("spec.podTemplate is missing or not an object (%v)", err)
	}
	raw, err := json.Marshal(tmpl) // maps marshal with sorted keys: a stable hash
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(raw)

	specMap, _, err := unstructured.NestedMap(tmpl, "spec")
	if err != nil {
		return nil, fmt.Errorf("spec.podTemplate.spec: %w", err)
	}
	var spec corev1.PodSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(specMap, &spec); err != nil {
		return nil, fmt.Errorf("spec.podTemplate.spec is not a PodSpec: %w", err)
	}
	podLabels, _, err := unstructured.NestedStringMap(tmpl, "metadata", "labels")
	if err != nil {
		return nil, fmt.Errorf("spec.podTemplate.metadata.labels: %w", err)
	}
	annotations, _, err := unstructured.NestedStringMap(tmpl, "metadata", "annotations")
	if err != nil {
		return nil, fmt.Errorf("spec.podTemplate.metadata.annotations: %w", err)
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[annotationTemplateHash] = hex.EncodeToString(sum[:12])
	if podLabels == nil {
		podLabels = map[string]string{}
	}
	podLabels[sandboxNameHashLabel] = sandboxNameHash(sb.GetName())
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        sb.GetName(),
			Namespace:   sb.GetNamespace(),
			Labels:      podLabels,
			Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         sandboxapi.GroupVersion,
				Kind:               sandboxapi.Kind,
				Name:               sb.GetName(),
				UID:                sb.GetUID(),
				Controller:         new(true),
				BlockOwnerDeletion: new(true),
			}},
		},
		Spec: spec,
	}, nil
}

// --- status ---

// sandboxStatus is the Sandbox's status as the CRD defines it.
type sandboxStatus struct {
	Conditions  []metav1.Condition `json:"conditions,omitempty"`
	Replicas    int32              `json:"replicas"`
	Selector    string             `json:"selector,omitempty"`
	PodIPs      []string           `json:"podIPs,omitempty"`
	ServiceFQDN string             `json:"serviceFQDN,omitempty"`
	Service     string             `json:"service,omitempty"`
}

// updateStatus writes the status computed from obs when it differs from the
// Sandbox's; on a conflict it reads the Sandbox again and retries.
func (d *SandboxDriver) updateStatus(ctx context.Context, sb *unstructured.Unstructured, obs observation) error {
	client := d.c.Dynamic.Resource(sandboxapi.GVR).Namespace(sb.GetNamespace())
	first := true
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			latest, err := client.Get(ctx, sb.GetName(), metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			if latest.GetUID() != sb.GetUID() {
				return nil // another Sandbox of the same name: its own events handle it
			}
			sb = latest
		}
		first = false
		old := decodeStatus(sb)
		next := d.computeStatus(sb, obs)
		if equality.Semantic.DeepEqual(old, next) {
			return nil
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&next)
		if err != nil {
			return err
		}
		sb.Object["status"] = m
		_, err = client.UpdateStatus(ctx, sb, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

func decodeStatus(sb *unstructured.Unstructured) sandboxStatus {
	var st sandboxStatus
	if m, ok := sb.Object["status"].(map[string]any); ok {
		// A status the driver cannot read is replaced as a whole.
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &st); err != nil {
			return sandboxStatus{}
		}
	}
	return st
}

// computeStatus is the Sandbox's status for obs, keeping the conditions'
// lastTransitionTime when their status does not change.
func (d *SandboxDriver) computeStatus(sb *unstructured.Unstructured, obs observation) sandboxStatus {
	st := decodeStatus(sb)
	ns, name, gen := sb.GetNamespace(), sb.GetName(), sb.GetGeneration()
	set := func(typ string, status metav1.ConditionStatus, reason, message string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: gen,
		})
	}

	st.Service = name
	st.ServiceFQDN = name + "." + ns + ".svc.cluster.local"
	podLabels, _, _ := unstructured.NestedStringMap(sb.Object, "spec", "podTemplate", "metadata", "labels")
	st.Selector = labels.SelectorFromSet(podLabels).String()
	st.Replicas, st.PodIPs = 0, nil
	if obs.pod != nil {
		st.Replicas = 1
		for _, ip := range obs.pod.Status.PodIPs {
			st.PodIPs = append(st.PodIPs, ip.IP)
		}
	}

	switch {
	case obs.suspended:
		set(sandboxapi.ConditionReady, metav1.ConditionFalse, SandboxReasonSuspended, "the Sandbox is suspended (spec.replicas is 0)")
	case obs.reason != "":
		set(sandboxapi.ConditionReady, metav1.ConditionFalse, obs.reason, obs.message)
	case obs.pod != nil && PodReady(obs.pod):
		set(sandboxapi.ConditionReady, metav1.ConditionTrue, SandboxReasonPodReady, fmt.Sprintf("pod %s is ready", obs.pod.Name))
	case obs.pod != nil:
		set(sandboxapi.ConditionReady, metav1.ConditionFalse, SandboxReasonPodNotReady, podNotReadyMessage(obs.pod))
	default:
		set(sandboxapi.ConditionReady, metav1.ConditionFalse, SandboxReasonPodNotReady, fmt.Sprintf("pod %s does not exist yet", name))
	}

	// Attachments: one condition each, or the invalid condition alone.
	keep := map[string]bool{}
	attachments, err := decodeAttachments(sb.GetAnnotations()[sandboxapi.AnnotationAttachments])
	if err != nil {
		set(ConditionInvalidAttachments, metav1.ConditionFalse, SandboxReasonInvalidAnnotation, err.Error())
		keep[ConditionInvalidAttachments] = true
	} else {
		d.mu.Lock()
		for _, a := range attachments {
			typ := sandboxapi.AttachmentCondition(a.Name)
			if f, failed := d.failures[a.Name]; failed {
				set(typ, metav1.ConditionFalse, f.reason, f.message)
			} else if !d.attachmentHeld(a) {
				set(typ, metav1.ConditionFalse, ReasonCredentialNotHeld,
					fmt.Sprintf("credential gateway %s holds no %s credential for %s", a.Gateway, a.SourceType, a.Name))
			} else {
				set(typ, metav1.ConditionTrue, SandboxReasonAttached,
					fmt.Sprintf("credential gateway %s attached %s", a.Gateway, a.SourceType))
			}
			keep[typ] = true
		}
		d.mu.Unlock()
	}
	st.Conditions = slices.DeleteFunc(st.Conditions, func(c metav1.Condition) bool {
		return strings.HasPrefix(c.Type, sandboxapi.AttachmentConditionPrefix) && !keep[c.Type]
	})
	return st
}

// decodeAttachments is sandboxapi.DecodeAttachments, plus the checks that
// every attachment has a name that makes a valid condition type and that no
// name repeats.
func decodeAttachments(annotation string) ([]sandboxapi.Attachment, error) {
	attachments, err := sandboxapi.DecodeAttachments(annotation)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for i, a := range attachments {
		typ := sandboxapi.AttachmentCondition(a.Name)
		if a.Name == "" {
			return nil, fmt.Errorf("annotation %s: attachment %d has no name", sandboxapi.AnnotationAttachments, i)
		}
		if errs := metav1validation.ValidateLabelName(typ, field.NewPath("type")); len(errs) > 0 {
			return nil, fmt.Errorf("annotation %s: attachment %q does not make a valid condition type: %v",
				sandboxapi.AnnotationAttachments, a.Name, errs.ToAggregate())
		}
		if seen[a.Name] {
			return nil, fmt.Errorf("annotation %s: attachment %q appears twice", sandboxapi.AnnotationAttachments, a.Name)
		}
		seen[a.Name] = true
	}
	return attachments, nil
}

// podNotReadyMessage says why a Pod is not ready: its phase and the first
// container that waits or is not ready.
func podNotReadyMessage(pod *corev1.Pod) string {
	phase := pod.Status.Phase
	if phase == "" {
		phase = corev1.PodPending
	}
	msg := fmt.Sprintf("pod %s is %s", pod.Name, phase)
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			return msg + fmt.Sprintf(", container %s waiting: %s", cs.Name, w.Reason)
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if !cs.Ready {
			return msg + fmt.Sprintf(", container %s not ready", cs.Name)
		}
	}
	return msg + ", not ready"
}
