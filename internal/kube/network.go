package kube

import (
	"context"
	"fmt"
	"sort"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

// ensureNetworkPolicies makes the agent's NetworkPolicies what the compute
// says, before any workload of a revision is written: one request per
// component in the common case; disabled, the
// agent's are deleted (a list by the agent's label, then one delete per
// policy, with its UID as precondition). Policies are per agent, outside
// revision identity: a changed policy restarts nothing.
//
// Each is written under the guard g (guard.go). One created with Create
// and applied later keeps no field the apply would drop: every policy sets
// all of its fields (a selector, both policy types, and ingress and
// egress lists that are never empty and replaced whole).
func (e *Executor) ensureNetworkPolicies(ctx context.Context, g *guard, objs *render.Objects, agent string) error {
	ns, policies := objs.Namespace, objs.NetworkPolicies
	if len(policies) == 0 {
		return e.deleteNetworkPolicies(ctx, ns, agent)
	}
	nps := e.Client.NetworkingV1().NetworkPolicies(ns)
	for _, p := range policies {
		obj, err := asObject[networkingv1.NetworkPolicy](p)
		if err != nil {
			return err
		}
		err = put(ctx, g, "NetworkPolicy", *p.Name,
			func(ctx context.Context) (*networkingv1.NetworkPolicy, error) {
				return nps.Create(ctx, obj, metav1.CreateOptions{FieldManager: render.FieldManager})
			},
			func(ctx context.Context) (*networkingv1.NetworkPolicy, error) {
				return nps.Get(ctx, *p.Name, metav1.GetOptions{})
			},
			func(ctx context.Context, _ *networkingv1.NetworkPolicy) error {
				if _, err := nps.Apply(ctx, p, applyOpts); err != nil {
					return fmt.Errorf("apply NetworkPolicy %s: %w", *p.Name, err)
				}
				return nil
			},
			deleteNamed(nps, *p.Name))
		if err != nil {
			return err
		}
	}
	return nil
}

// deleteNetworkPolicies deletes every NetworkPolicy the provider wrote for
// an agent, found by the agent's label (never by a derived name).
func (e *Executor) deleteNetworkPolicies(ctx context.Context, ns, agent string) error {
	return e.deleteNetworkPoliciesExcept(ctx, ns, agent, nil)
}

// retireNetworkPolicies deletes the agent's NetworkPolicies of components
// revision top no longer runs (a dedicated harness after a switch to
// embedded), once the earlier revision's workloads are retired.
func (e *Executor) retireNetworkPolicies(ctx context.Context, ns, agent string, top render.Topology) error {
	runs := map[string]bool{top.Sandbox: top.Sandbox != ""}
	for _, c := range top.Deployments {
		runs[c] = true
	}
	return e.deleteNetworkPoliciesExcept(ctx, ns, agent, runs)
}

// deleteNetworkPoliciesExcept deletes the agent's NetworkPolicies but
// those of the components keep holds: a list by the agent's label, then
// one delete per policy, with its UID as precondition.
func (e *Executor) deleteNetworkPoliciesExcept(ctx context.Context, ns, agent string, keep map[string]bool) error {
	nps := e.Client.NetworkingV1().NetworkPolicies(ns)
	list, err := nps.List(ctx, metav1.ListOptions{LabelSelector: agentSelector(agent)})
	if err != nil {
		return fmt.Errorf("list NetworkPolicies of %s: %w", agent, err)
	}
	for _, p := range list.Items {
		if keep[p.Labels[render.LabelComponent]] {
			continue
		}
		err := nps.Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(p.UID))})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete NetworkPolicy %s: %w", p.Name, err)
		}
	}
	return nil
}

// agentSelector selects every object the provider made for an agent.
func agentSelector(agent string) string {
	return labels.SelectorFromSet(labels.Set{render.LabelAgent: agent, render.LabelManagedBy: render.ManagedBy}).String()
}

// networkPolicyDrift names the agent's NetworkPolicies the compute asks
// for that are missing ("" when none is), with one list request; the
// components are the agent's topology. A deleted policy is
// executor.DriftNetworkPolicy: the next apply writes it again without a
// new revision.
func (e *Executor) networkPolicyDrift(ctx context.Context, ns, agent string, top render.Topology, c admission.Compute) (string, error) {
	if c.Kubernetes().NetworkPolicy.Disabled {
		return "", nil
	}
	list, err := e.Client.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{LabelSelector: agentSelector(agent)})
	if err != nil {
		return "", err
	}
	have := map[string]bool{}
	for _, p := range list.Items {
		have[p.Name] = true
	}
	var missing []string
	components := append([]string{}, top.Deployments...)
	if top.Sandbox != "" {
		components = append(components, top.Sandbox)
	}
	for _, comp := range components {
		if name := render.NetworkPolicyName(agent, comp); !have[name] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	return strings.Join(missing, ", "), nil
}

// syncNetworkPolicies is Deploy for a revision that already serves and
// does not change: only what the compute applies outside revision
// identity is written, the agent's NetworkPolicies and its Service's
// exposure (executor.ModeSettings).
func (e *Executor) syncNetworkPolicies(ctx context.Context, rev *admission.Revision, c admission.Compute, n int64) (executor.Result, error) {
	var writes executor.Writes
	ctx = executor.WithWrites(ctx, &writes)
	objs, err := renderKubernetes(rev, n, c)
	if err != nil {
		return executor.Result{}, executor.Normalize(err, deployExit(rev.Agent, n, &writes))
	}
	e.log.Print("applying the agent's network policies", map[string]any{"work.operation": "network-policy", "revision": n})
	if err := e.ensureNetworkPolicies(ctx, newGuard(rev.Agent, objs.Namespace), objs, rev.Agent); err != nil {
		return executor.Result{}, executor.Normalize(&executor.Failure{Code: executor.DeploymentFailed, Agent: rev.Agent, Revision: n, Phase: "network-policy",
			Summary: fmt.Sprintf("agent %q: its NetworkPolicies could not be written", rev.Agent), Reason: err.Error(), Err: err,
			Next: "Check that the provider's identity may get, list, create, patch and delete networkpolicies (networking.k8s.io) in the namespace (the Role in the Kubernetes permissions guide), then apply again. The running revision was not touched."},
			deployExit(rev.Agent, n, &writes))
	}
	endpoint, err := e.syncExposure(ctx, rev, objs.Exposure)
	if err != nil {
		return executor.Result{}, executor.Normalize(err, deployExit(rev.Agent, n, &writes))
	}
	return executor.Result{Endpoint: endpoint}, nil
}
