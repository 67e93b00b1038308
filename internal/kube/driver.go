package kube

import (
	"context"
	"fmt"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/sandboxapi"
)

// DriverState is what the cluster says about a compute's sandbox driver.
type DriverState struct {
	// Installed is true when the cluster serves the agent-sandbox Sandbox
	// API and the driver's gateway Service exists.
	Installed bool
	// Ready is true while the driver's gateway Service has a ready endpoint.
	Ready bool
	// Detail says why the driver is not ready, for diagnostics.
	Detail string
}

// Observed is the compute with what the cluster said of its driver: the
// driver copied with NotInstalled and Unavailable set, for admission.
func (st DriverState) Observed(c admission.Compute) admission.Compute {
	d := *c.Kubernetes().SandboxDriver
	d.NotInstalled, d.Unavailable = !st.Installed, st.Installed && !st.Ready
	c = c.WithKubernetes(func(k *admission.KubernetesCompute) { k.SandboxDriver = &d })
	return c
}

// DriverState reads the driver live: discovery for the Sandbox API (every
// authenticated identity may use it), then the gateway Service and its
// EndpointSlices (a Role in the gateway's namespace; see the
// kubernetes-permissions guide). A driver is installed when the API is
// served and its gateway Service exists; it is ready while the Service
// has a ready endpoint. Three requests.
func (e *Executor) DriverState(ctx context.Context, d *admission.SandboxDriver) (DriverState, error) {
	var st DriverState
	list, err := e.Client.Discovery().ServerResourcesForGroupVersion(sandboxapi.GroupVersion)
	switch {
	case apierrors.IsNotFound(err):
		st.Detail = fmt.Sprintf("the cluster does not serve %s", sandboxapi.GroupVersion)
		return st, nil
	case err != nil:
		return st, fmt.Errorf("discover %s: %w", sandboxapi.GroupVersion, err)
	}
	for _, r := range list.APIResources {
		if r.Name == sandboxapi.Resource {
			st.Installed = true
		}
	}
	if !st.Installed {
		st.Detail = fmt.Sprintf("the cluster serves %s without %s", sandboxapi.GroupVersion, sandboxapi.Resource)
		return st, nil
	}
	ns, svc := render.DriverGateway(d)
	if _, err := e.Client.CoreV1().Services(ns).Get(ctx, svc, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		st.Installed = false
		st.Detail = fmt.Sprintf("the driver's gateway Service %s/%s does not exist", ns, svc)
		return st, nil
	} else if err != nil {
		return st, fmt.Errorf("read the %s driver's gateway Service %s/%s: %w", d.Name, ns, svc, err)
	}
	slices, err := e.Client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: sandboxapi.LabelServiceName + "=" + svc})
	if err != nil {
		return st, fmt.Errorf("read the %s driver's gateway (EndpointSlices of Service %s/%s): %w", d.Name, ns, svc, err)
	}
	st.Ready, st.Detail = gatewayReady(slices.Items, ns, svc)
	return st, nil
}

// gatewayReady reports whether any endpoint of the gateway's slices is ready.
func gatewayReady(slices []discoveryv1.EndpointSlice, ns, svc string) (bool, string) {
	for _, s := range slices {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
				return true, ""
			}
		}
	}
	return false, fmt.Sprintf("the driver's gateway Service %s/%s has no ready endpoint", ns, svc)
}

// WaitForDriver blocks, with a watch on the gateway's EndpointSlices, until
// the driver's gateway is ready again, or ctx ends (ND5: provisioning waits
// for the driver as for an outage).
func (e *Executor) WaitForDriver(ctx context.Context, d *admission.SandboxDriver) error {
	ns, svc := render.DriverGateway(d)
	sel := metav1.ListOptions{LabelSelector: sandboxapi.LabelServiceName + "=" + svc}
	var backoff relist
	for {
		list, err := e.Client.DiscoveryV1().EndpointSlices(ns).List(ctx, sel)
		if err != nil {
			return fmt.Errorf("read the driver's gateway: %w", err)
		}
		if ok, _ := gatewayReady(list.Items, ns, svc); ok {
			return nil
		}
		opts := sel
		opts.ResourceVersion = list.ResourceVersion
		w, err := e.Client.DiscoveryV1().EndpointSlices(ns).Watch(ctx, opts)
		if err != nil {
			return fmt.Errorf("watch the driver's gateway: %w", err)
		}
		current := map[string]discoveryv1.EndpointSlice{}
		for _, s := range list.Items {
			current[s.Name] = s
		}
		ready, events := false, 0
		for ev := range w.ResultChan() {
			s, ok := ev.Object.(*discoveryv1.EndpointSlice)
			if !ok {
				break // an error event: list again
			}
			events++
			if ev.Type == watch.Deleted {
				delete(current, s.Name)
			} else {
				current[s.Name] = *s
			}
			all := make([]discoveryv1.EndpointSlice, 0, len(current))
			for _, s := range current {
				all = append(all, s)
			}
			if ready, _ = gatewayReady(all, ns, svc); ready {
				break
			}
		}
		w.Stop()
		if ready {
			return nil
		}
		if err := backoff.after(ctx, events); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}
