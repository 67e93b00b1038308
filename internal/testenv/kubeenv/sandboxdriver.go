package kubeenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"

	"github.com/occ-platform/terraform-provider-occ/internal/sandboxapi"
)

// The test sandbox driver: what a sandbox driver such as OpenShell runs
// beside the agent-sandbox controller, for the provider's tests. The real
// controller (kubernetes-sigs/agent-sandbox, which the cluster runs, see
// Start) creates each Sandbox's Pod and headless Service and reports its
// Ready condition; this driver implements the OCC sandbox driver extension
// (sandboxapi.Extension) on top: it reports each credential attachment of
// a Sandbox as a condition, simulates the OpenShell gateway (a
// selector-less Service whose one endpoint is ready unless an outage is
// simulated, SetOutage), and with ServeCredentialGateway stands in for the
// Credential Gateway (credentialgateway.go): it holds keys and swaps the
// harness's placeholder for them on the way out.

// Condition reasons of the extension's attachment conditions.
const (
	SandboxReasonAttached          = "Attached"
	SandboxReasonInvalidAnnotation = "InvalidAnnotation"
)

// ConditionInvalidAttachments is the condition the driver sets (False,
// reason InvalidAnnotation) instead of the per-attachment conditions when
// the Sandbox's sandboxapi.AnnotationAttachments cannot be decoded or names
// an attachment that cannot be a condition type.
var ConditionInvalidAttachments = sandboxapi.AttachmentCondition("invalid")

// gatewayEndpointIP is the address of the simulated gateway's endpoint.
const gatewayEndpointIP = "10.0.0.1"

// InstallSandboxCRD installs the agent-sandbox module's Sandbox CRD
// (idempotent: already exists is fine, concurrent callers are fine) and
// waits until it is Established, discovery serves sandboxes in
// sandboxapi.GroupVersion, and
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
	raw, err := os.ReadFile(c.sandboxCRD)
	if err != nil {
		return fmt.Errorf("testenv/kubeenv: the agent-sandbox Sandbox CRD: %w (make testenv copies it from the module)", err)
	}
	crd := &unstructured.Unstructured{}
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
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
			// Suspended: the controller makes no Pod for it.
			"spec": map[string]any{"operatingMode": "Suspended", "podTemplate": map[string]any{"spec": map[string]any{
				"containers": []any{map[string]any{"name": "probe", "image": "probe"}}}}},
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
	// Facets the driver provides (default all three: networking,
	// filesystem, process); a Sandbox that needs another is refused
	// (ConditionPlaced False, ReasonFacetUnsupported).
	Facets []string
	// Profiles are the placement profiles the driver places by: each
	// one's node selector is added to the Pod of a Sandbox that requires
	// it. A Sandbox requiring a profile not listed is refused
	// (ReasonProfileUnavailable). Default: DefaultProfiles.
	Profiles map[string]map[string]string
}

// DefaultProfiles are the stand-in's profiles when its options name none:
// "gpu-a" and "standard", each selecting the Linux nodes (every node of
// the test cluster, kwok's and the real one).
var DefaultProfiles = map[string]map[string]string{
	"gpu-a":    {"kubernetes.io/os": "linux"},
	"standard": {"kubernetes.io/os": "linux"},
}

// SandboxDriver is a running test sandbox driver; see StartSandboxDriver.
type SandboxDriver struct {
	c          *Cluster
	t          testing.TB
	gwNS, gwSv string
	namespaces []string // watched
	facets     []string
	profiles   map[string]map[string]string

	queue workqueue.TypedRateLimitingInterface[sandboxKey]

	// gate: a reconcile holds it for reading while it works, SetOutage for
	// writing while it flips outage, so that once SetOutage(true) returns no
	// reconcile writes anything.
	gate   sync.RWMutex
	outage bool

	mu       sync.Mutex
	known    map[sandboxKey]bool          // the Sandboxes the watches have seen and not seen deleted
	failures map[string]attachmentFailure // by attachment name
	placed   []string
	gateway  *credentialGateway // ServeCredentialGateway's, nil until then

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
		facets:   opts.Facets,
		profiles: opts.Profiles,
	}
	if d.gwSv == "" {
		d.gwSv = sandboxapi.DefaultGatewayService
	}
	if d.facets == nil {
		d.facets = []string{"networking", "filesystem", "process"}
	}
	if d.profiles == nil {
		d.profiles = DefaultProfiles
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

// reconcile places one Sandbox's Pod and writes its extension conditions
// (ConditionPlaced and the attachments). It reads the
// Sandbox from the API server: the watches only say when to look. The
// agent-sandbox controller merge-patches status.conditions from its cache,
// which can drop a condition written meanwhile; that write is an event of
// the Sandbox's, which queues it here again, so the conditions are
// re-asserted (the extension's rule for drivers: sandbox-extension.md).
func (d *SandboxDriver) reconcile(ctx context.Context, key sandboxKey) error {
	d.gate.RLock()
	defer d.gate.RUnlock()
	if d.outage {
		return nil // SetOutage(false) queues every Sandbox again
	}
	client := d.c.Dynamic.Resource(sandboxapi.GVR).Namespace(key.namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sb, err := client.Get(ctx, key.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if sb.GetDeletionTimestamp() != nil {
			return nil
		}
		placed, err := d.place(ctx, sb)
		if err != nil {
			return err
		}
		old, _, _ := unstructured.NestedSlice(sb.Object, "status", "conditions")
		next, changed, err := d.extensionConditions(sb, old, placed)
		if err != nil || !changed {
			return err
		}
		if err := unstructured.SetNestedSlice(sb.Object, next, "status", "conditions"); err != nil {
			return err
		}
		// An update with the read resourceVersion: never over a status
		// the controller wrote meanwhile.
		_, err = client.UpdateStatus(ctx, sb, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

// placement is the driver's verdict on a Sandbox's facets and profile;
// nil while its Pod has not been released yet (none so far).
type placement struct {
	status          metav1.ConditionStatus
	reason, message string
}

// place judges the Sandbox's facets and required profile and, when the
// driver provides them, releases its Pod (the one the agent-sandbox
// controller made, named like the Sandbox and controlled by it): the
// profile's node selector added and the extension's scheduling gate
// removed, in one update with the read resourceVersion. A refused Sandbox's
// Pod stays gated.
func (d *SandboxDriver) place(ctx context.Context, sb *unstructured.Unstructured) (*placement, error) {
	ann := sb.GetAnnotations()
	for _, f := range strings.Split(ann[sandboxapi.AnnotationFacets], ",") {
		if f = strings.TrimSpace(f); f != "" && !slices.Contains(d.facets, f) {
			return &placement{metav1.ConditionFalse, sandboxapi.ReasonFacetUnsupported,
				fmt.Sprintf("the driver provides the facets %s, not %s", strings.Join(d.facets, ", "), f)}, nil
		}
	}
	selector := map[string]string{}
	if p := ann[sandboxapi.AnnotationRequiredProfile]; p != "" {
		sel, ok := d.profiles[p]
		if !ok {
			names := make([]string, 0, len(d.profiles))
			for n := range d.profiles {
				names = append(names, n)
			}
			slices.Sort(names)
			return &placement{metav1.ConditionFalse, sandboxapi.ReasonProfileUnavailable,
				fmt.Sprintf("the driver has no placement profile %q (it has %s)", p, strings.Join(names, ", "))}, nil
		}
		selector = sel
	}
	pods := d.c.Clientset.CoreV1().Pods(sb.GetNamespace())
	pod, err := pods.Get(ctx, sb.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil // the controller has not made it yet; its add event queues the Sandbox
	case err != nil:
		return nil, err
	}
	if owner := sandboxOwner(pod); owner == nil || owner.UID != sb.GetUID() {
		return nil, nil
	}
	released := &placement{metav1.ConditionTrue, sandboxapi.ReasonPlaced, "placed by the driver"}
	gated := slices.ContainsFunc(pod.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == sandboxapi.SchedulingGate })
	if !gated {
		return released, nil
	}
	if pod.Spec.NodeSelector == nil {
		pod.Spec.NodeSelector = map[string]string{}
	}
	for k, v := range selector {
		pod.Spec.NodeSelector[k] = v
	}
	pod.Spec.SchedulingGates = slices.DeleteFunc(pod.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == sandboxapi.SchedulingGate })
	if _, err := pods.Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("release pod %s: %w", pod.Name, err)
	}
	d.mu.Lock()
	d.placed = append(d.placed, sb.GetNamespace()+"/"+sb.GetName())
	d.mu.Unlock()
	return released, nil
}

// Placed returns the Sandboxes ("ns/name") whose Pod the driver released
// for scheduling, in order; a Sandbox whose Pod was made again (a restart)
// appears again.
func (d *SandboxDriver) Placed() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.placed)
}

// extensionConditions is the Sandbox's status.conditions (raw, as read)
// with the extension's conditions computed for it: ConditionPlaced when
// placed is known, and the attachments; the other
// conditions (the controller's) are kept as they are, and a condition's
// lastTransitionTime is kept when its status does not change.
func (d *SandboxDriver) extensionConditions(sb *unstructured.Unstructured, raw []any, placed *placement) (next []any, changed bool, err error) {
	conds := sandboxapi.Conditions(raw)
	before := slices.Clone(conds)
	gen := sb.GetGeneration()
	set := func(typ string, status metav1.ConditionStatus, reason, message string) {
		meta.SetStatusCondition(&conds, metav1.Condition{
			Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: gen,
		})
	}

	if placed != nil {
		set(sandboxapi.ConditionPlaced, placed.status, placed.reason, placed.message)
	}

	// One condition per attachment, or the invalid condition alone.
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
	conds = slices.DeleteFunc(conds, func(c metav1.Condition) bool {
		return strings.HasPrefix(c.Type, sandboxapi.AttachmentConditionPrefix) && !keep[c.Type]
	})
	if equality.Semantic.DeepEqual(before, conds) {
		return nil, false, nil
	}
	for _, c := range conds {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&c)
		if err != nil {
			return nil, false, err
		}
		next = append(next, m)
	}
	return next, true, nil
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
