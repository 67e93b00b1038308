package kube

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

// expose gives the agent's Service (as the API server last returned it)
// the compute's exposure x, outside revision identity: nothing when it has
// it already (no request), otherwise one update under the Service's
// resourceVersion, judged again on a conflict. A load balancer is then
// waited for, with a watch, until a controller gives it an address, unless
// x.NoWait. It returns the Service as it now is.
func (e *Executor) expose(ctx context.Context, svc *corev1.Service, agent string, x admission.Exposure) (*corev1.Service, error) {
	svcs := e.Client.CoreV1().Services(svc.Namespace)
	// An Update that meets a newer Service (someone wrote it meanwhile) is
	// made again on the Service as it is now, while it is still the
	// agent's: client-go's RetryOnConflict (retry.DefaultRetry, five tries).
	var foreign error
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		upd := svc.DeepCopy()
		exposed := render.ExposeService(upd, x)
		if !e.recordReferences(upd) && !exposed {
			return nil
		}
		e.log.Print("updating the agent's Service (exposure, recorded references)", map[string]any{"work.operation": "expose", "service_type": string(upd.Spec.Type)})
		got, err := svcs.Update(ctx, upd, metav1.UpdateOptions{FieldManager: render.FieldManager})
		if err == nil {
			svc = got
			return nil
		}
		if !apierrors.IsConflict(err) {
			return fmt.Errorf("update Service %s: %w", svc.Name, err)
		}
		cur, gerr := svcs.Get(ctx, svc.Name, metav1.GetOptions{})
		if gerr != nil {
			return fmt.Errorf("read Service %s: %w", svc.Name, gerr)
		}
		if !ownedBy(cur, agent) {
			foreign = foreignService(cur, agent)
			return foreign
		}
		svc = cur
		return fmt.Errorf("update Service %s: %w", svc.Name, err) // a conflict: tried again
	})
	switch {
	case foreign != nil:
		return nil, foreign
	case err != nil:
		return nil, exposureFailure(agent, svc, x, err)
	}
	if !x.LoadBalancer() || x.NoWait || render.LoadBalancerAddress(svc) != "" {
		return svc, nil
	}
	return e.awaitLoadBalancer(ctx, svc, agent)
}

// recordReferences sets the deploy's references on svc, reporting whether
// that changed it: a ModeSettings deploy changes the compute the record
// holds without a new revision, and writes it with the exposure.
func (e *Executor) recordReferences(svc *corev1.Service) bool {
	if e.references == "" || svc.Annotations[AnnotationReferences] == e.references {
		return false
	}
	if svc.Annotations == nil {
		svc.Annotations = map[string]string{}
	}
	svc.Annotations[AnnotationReferences] = e.references
	return true
}

// awaitLoadBalancer watches the Service until its load balancer has an
// address, within ctx's deadline.
func (e *Executor) awaitLoadBalancer(ctx context.Context, svc *corev1.Service, agent string) (*corev1.Service, error) {
	e.log.Print("waiting for the load balancer's address", map[string]any{"work.operation": "expose", "service": svc.Name})
	svcs := e.Client.CoreV1().Services(svc.Namespace)
	last := svc
	opts := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", svc.Name).String()}
	err := watchUntil(ctx, svcs.Watch, opts, func(ev watch.Event) (bool, error) {
		s, ok := ev.Object.(*corev1.Service)
		if !ok {
			return false, nil
		}
		if ev.Type == watch.Deleted {
			return false, fmt.Errorf("Service %s was deleted while the apply waited for its load balancer", s.Name)
		}
		last = s
		return render.LoadBalancerAddress(s) != "", nil
	})
	if err == nil {
		return last, nil
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || ctx.Err() != nil {
		return nil, &executor.Failure{Code: executor.Deadline, Agent: agent, Phase: "load-balancer",
			Summary: fmt.Sprintf("agent %q is activated, but its load balancer got no address", agent),
			Reason:  fmt.Sprintf("Service %s/%s is of type LoadBalancer and no controller gave it an address before the apply's deadline", svc.Namespace, svc.Name),
			Next: fmt.Sprintf("The revision serves inside the cluster. Check that the cluster runs a load balancer controller for Services of type LoadBalancer (kubectl describe service %s -n %s shows its events), "+
				"or set kubernetes.service.wait_for_load_balancer = false on the compute, or raise timeouts.create/update; then apply again.", svc.Name, svc.Namespace)}
	}
	return nil, exposureFailure(agent, svc, admission.Exposure{Type: admission.ServiceLoadBalancer}, err)
}

func exposureFailure(agent string, svc *corev1.Service, x admission.Exposure, err error) *executor.Failure {
	typ := x.Type
	if typ == "" {
		typ = admission.ServiceClusterIP
	}
	return &executor.Failure{Code: executor.DeploymentFailed, Agent: agent, Phase: "expose",
		Summary: fmt.Sprintf("agent %q: its Service could not be exposed as %s", agent, typ), Reason: err.Error(), Err: err,
		Next: fmt.Sprintf("Check the compute's kubernetes.service settings (the API server's message above names what it refused) and that the provider's identity may get, update and watch services in namespace %s, then apply again.", svc.Namespace)}
}

// syncExposure is Deploy's outside-revision step for the agent's Service:
// read it (one request), give it the exposure, and report its endpoint.
// A Service that is missing or not the agent's is left to the next deploy
// of a revision, which writes it (drift).
func (e *Executor) syncExposure(ctx context.Context, rev *admission.Revision, x admission.Exposure) (string, error) {
	ns := rev.ComputeSettings.Kubernetes().Namespace
	svc, err := e.existingService(ctx, ns, render.ServiceName(rev.Agent))
	switch {
	case err != nil:
		return "", err
	case svc == nil:
		return "", fmt.Errorf("the agent's Service %s/%s is missing; refresh, and the next apply writes it again", ns, render.ServiceName(rev.Agent))
	case !ownedBy(svc, rev.Agent):
		return "", foreignService(svc, rev.Agent)
	}
	svc, err = e.expose(ctx, svc, rev.Agent, x)
	if err != nil {
		return "", err
	}
	return render.Endpoint(svc, rev.Agent, ns), nil
}
