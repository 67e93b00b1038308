package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

// List names the agents in the compute's namespace with one request: the Services the
// provider labels (managed-by and the agent label). An agent's serving
// Service says its activated revision, read as Read reads it
// (serviceObserved); its other Services (the internal gateway's, the
// harness's) say only that it exists, so an agent that lost its serving
// Service is listed drifted, and an agent is listed once however many
// Services or revisions it has. An agent whose first revision never
// activated has no Service yet and is not listed: there is nothing of it
// to import. A namespace that does not exist holds no agents: the API
// server answers an empty list for it, as for an empty one.
func (e *Executor) List(ctx context.Context, on admission.Compute) ([]executor.Listed, error) {
	ns := on.Kubernetes().Namespace
	if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
		return nil, &executor.Failure{Code: executor.InvalidRequest, Op: executor.OpList, Summary: fmt.Sprintf("%q is not a Kubernetes namespace", ns),
			Reason: strings.Join(msgs, "; "), Next: "Name the namespace the agents run in, such as occ-acme."}
	}
	managed, _ := labels.NewRequirement(render.LabelManagedBy, selection.Equals, []string{render.ManagedBy})
	agent, _ := labels.NewRequirement(render.LabelAgent, selection.Exists, nil)
	svcs, err := e.Client.CoreV1().Services(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.NewSelector().Add(*managed, *agent).String()})
	if err != nil {
		return nil, listFailure(ns, err)
	}
	return listed(ns, svcs.Items), nil
}

// listed groups the agents' Services (those the provider labels) by the
// agent their label names, in name order. A label that is no agent name
// (an object labelled by hand) is no agent.
func listed(ns string, svcs []corev1.Service) []executor.Listed {
	serving := map[string]*corev1.Service{}
	for i := range svcs {
		svc := &svcs[i]
		name := svc.Labels[render.LabelAgent]
		if len(validation.IsDNS1035Label(name)) > 0 {
			continue
		}
		if _, seen := serving[name]; !seen {
			serving[name] = nil
		}
		// By name and label: agent "web"'s harness Service "web-harness"
		// is not agent "web-harness"'s serving Service.
		if svc.Name == render.ServiceName(name) {
			serving[name] = svc
		}
	}
	out := make([]executor.Listed, 0, len(serving))
	for name, svc := range serving {
		o := executor.Observed{Exists: true, Drift: executor.DriftWorkload, DriftDetail: serviceDeleted(name)}
		if svc != nil {
			o = serviceObserved(svc, name, ns)
		}
		out = append(out, executor.Listed{Name: name, ID: AgentID(admission.Compute{Settings: admission.KubernetesCompute{Namespace: ns}}, name), Observed: o})
	}
	slices.SortFunc(out, func(a, b executor.Listed) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// listFailure says why namespace ns could not be listed: the identity may
// not list Services there, or the cluster did not answer.
func listFailure(ns string, err error) error {
	return executor.Normalize(err, executor.Exit{Op: executor.OpList, Summary: "cannot list the agents in namespace " + ns, Finish: whereContainer,
		Classify: func(f *executor.Failure, err error) {
			if apierrors.IsForbidden(err) {
				f.Code = executor.ResourceConflict
				f.Reason = "the provider's Kubernetes identity may not list Services there: " + err.Error()
				f.Next = "Grant it the Role in the provider documentation (Kubernetes permissions) in that namespace, then list again."
			}
		}})
}
