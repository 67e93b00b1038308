package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

// A deploy never takes over an object it did not write. Every object of an
// agent bears a name derived from the agent's; another application's
// object, or a hand-made one, may bear it first. A forced server-side
// apply would make such an object the agent's (our labels on it, our
// fields in it) and destroy would then delete it, so each write is
// guarded, at no request more in the common case:
//
//   - an object the agent's Service records as the agent's
//     (AnnotationAgentObjects, written by each activation) is applied;
//   - any other is created (Create fails, writing nothing, when the name
//     is taken) or, for a Deployment, applied with a selector that is
//     immutable once the Deployment exists (the apply of another
//     Deployment of that name is refused, writing nothing);
//   - when the name is taken, the object is read: the agent's own (our
//     labels for this agent, written by our field manager: an interrupted
//     earlier deploy's) is applied; anything else is RESOURCE_CONFLICT
//     naming the object, and what this deploy had created before meeting
//     it is deleted again, so a refused deploy leaves the namespace as it
//     found it.

// AnnotationAgentObjects on the agent's Service lists the objects kept per
// agent (not per revision) that its activated revision holds, as
// "Kind/name" joined by ",": what a later deploy applies without asking
// whose they are.
const AnnotationAgentObjects = "occ-platform.io/agent-objects"

// guard is one deploy's record of the names it may write and of what it
// created.
type guard struct {
	agent, ns string
	// known are the objects the agent's Service records as its own.
	known map[string]bool
	// made are the objects this deploy created, in order; kept whether it
	// also wrote to an object that existed before it (then a refusal
	// cannot say that nothing is left).
	made []madeObject
	kept bool
}

type madeObject struct {
	kind, name string
	del        func(context.Context, metav1.DeleteOptions) error
	uid        types.UID
}

func newGuard(agent, ns string) *guard { return &guard{agent: agent, ns: ns} }

// learn takes the agent's objects from its Service's record.
func (g *guard) learn(annotations map[string]string) {
	if g == nil {
		return
	}
	g.known = parseAgentObjects(annotations[AnnotationAgentObjects])
}

func parseAgentObjects(s string) map[string]bool {
	out := map[string]bool{}
	for _, k := range strings.Split(s, ",") {
		if k = strings.TrimSpace(k); k != "" {
			out[k] = true
		}
	}
	return out
}

// agentObjects is the AnnotationAgentObjects value for the objects of a
// rendered revision that are kept per agent.
func agentObjects(objs *render.Objects, tokens []string) string {
	var out []string
	for _, t := range tokens {
		out = append(out, "Secret/"+t)
	}
	for _, sa := range objs.ServiceAccounts {
		out = append(out, "ServiceAccount/"+*sa.Name)
	}
	for _, p := range objs.NetworkPolicies {
		out = append(out, "NetworkPolicy/"+*p.Name)
	}
	for _, d := range objs.Deployments {
		out = append(out, "Deployment/"+*d.Name)
	}
	if s := objs.HarnessService; s != nil {
		out = append(out, "Service/"+*s.Name)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

func (g *guard) isKnown(kind, name string) bool {
	return g != nil && g.known[kind+"/"+name]
}

// created records an object this deploy created.
func (g *guard) created(kind, name string, uid types.UID, del func(context.Context, metav1.DeleteOptions) error) {
	if g != nil {
		g.made = append(g.made, madeObject{kind: kind, name: name, del: del, uid: uid})
	}
}

// wroteExisting records a write to an object that existed before.
func (g *guard) wroteExisting() {
	if g != nil {
		g.kept = true
	}
}

// ours reports whether an existing object is the agent's: labelled for it
// and written by the provider's field manager.
func ours(obj metav1.Object, agent string) bool {
	return ownedBy(obj, agent) && wroteIt(obj)
}

// put writes one object under the guard. create writes it only when the
// name is free; get reads what holds the name; apply writes it over an
// object of the agent's (cur: as read; the zero value for an object the
// Service records); del deletes it again after a refusal.
func put[T metav1.Object](ctx context.Context, g *guard, kind, name string,
	create func(context.Context) (T, error), get func(context.Context) (T, error),
	apply func(ctx context.Context, cur T) error, del func(context.Context, metav1.DeleteOptions) error) error {
	if g.isKnown(kind, name) {
		g.wroteExisting()
		var none T
		return apply(ctx, none)
	}
	for attempt := 0; attempt < 2; attempt++ {
		obj, err := create(ctx)
		switch {
		case err == nil:
			g.created(kind, name, obj.GetUID(), del)
			return nil
		case !apierrors.IsAlreadyExists(err):
			return fmt.Errorf("create %s %s: %w", kind, name, err)
		}
		cur, err := get(ctx)
		switch {
		case apierrors.IsNotFound(err):
			continue // gone since: create it
		case err != nil:
			return fmt.Errorf("read %s %s: %w", kind, name, err)
		case !ours(cur, g.agent):
			return foreignObject(kind, g.ns, cur, g.agent)
		}
		g.wroteExisting()
		return apply(ctx, cur)
	}
	return fmt.Errorf("create %s %s: it was deleted and created again while this deploy ran", kind, name)
}

// foreignObject refuses to write over an object that is not the agent's.
func foreignObject(kind, ns string, obj metav1.Object, agent string) *executor.Failure {
	owner := "was not made by this provider for it"
	l := obj.GetLabels()
	if a := l[render.LabelAgent]; a != "" && a != agent && l[render.LabelManagedBy] == render.ManagedBy {
		owner = fmt.Sprintf("belongs to agent %q", a)
	}
	return &executor.Failure{Code: executor.ResourceConflict, Agent: agent,
		Summary: fmt.Sprintf("%s %s/%s is not agent %q's", kind, ns, obj.GetName(), agent),
		Reason:  fmt.Sprintf("agent %q needs the name %s for its %s, and the object of that name %s; the provider never writes to, or deletes, an object it did not make", agent, obj.GetName(), kind, owner),
		Next:    fmt.Sprintf("Rename this agent, or remove or rename %s %s if it is nobody's, then apply again.", kind, obj.GetName())}
}

// undo deletes, newest first, what this deploy created, each under its
// UID, after a refusal before any workload ran. It reports whether the
// namespace is as the deploy found it.
func (g *guard) undo(ctx context.Context, log executor.Log) bool {
	if g == nil {
		return true
	}
	// The refusal may have come at the deadline: the clean-up has its own.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	clean := !g.kept
	for i := len(g.made) - 1; i >= 0; i-- {
		m := g.made[i]
		err := m.del(ctx, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(m.uid))})
		if err != nil && !apierrors.IsNotFound(err) {
			clean = false
			log.Print("could not delete what the refused deploy created", map[string]any{"work.operation": "undo", "kind": m.kind, "name": m.name, "level": "warn", "error": err.Error()})
		}
	}
	g.made = nil
	return clean
}

// refused reports whether err is a refusal to write over another's object
// (or any RESOURCE_CONFLICT before the workloads ran).
func refused(err error) bool {
	var f *executor.Failure
	return errors.As(err, &f) && f.Code == executor.ResourceConflict
}

// asObject is an apply configuration as the typed object Create takes.
func asObject[T any](ac any) (*T, error) {
	b, err := json.Marshal(ac)
	if err != nil {
		return nil, err
	}
	out := new(T)
	return out, json.Unmarshal(b, out)
}

// deleter is a typed client's Delete.
type deleter interface {
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// deleteNamed deletes one object by name.
func deleteNamed(c deleter, name string) func(context.Context, metav1.DeleteOptions) error {
	return func(ctx context.Context, o metav1.DeleteOptions) error { return c.Delete(ctx, name, o) }
}

// collectionDeleter is a typed client's DeleteCollection.
type collectionDeleter interface {
	DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, listOpts metav1.ListOptions) error
}

// deleteThroughCollection deletes one object by name with the verb the
// provider's Role grants for its kind (deletecollection, not delete): a
// collection of the one name, the UID precondition applied to it.
func deleteThroughCollection(c collectionDeleter, name string) func(context.Context, metav1.DeleteOptions) error {
	return func(ctx context.Context, o metav1.DeleteOptions) error {
		return c.DeleteCollection(ctx, o, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	}
}
