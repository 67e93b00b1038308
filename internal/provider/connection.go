package provider

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/occ-platform/terraform-provider-occ/internal/executor"
)

// A provider block may read a value Terraform learns only at apply (a
// cluster's host from a module that creates it). During that plan the
// setting is unknown. Read as empty, it would let the client fall back to
// KUBECONFIG, ~/.kube/config or an in-cluster account, or SSH to the
// agent's keys: refresh and the data sources could read another cluster.
// Instead no connection of that kind is made before apply: refreshes keep
// the state they have (or are deferred, where Terraform allows it), and
// reads that must answer now fail naming the setting.

// connectionPending is the error of a connection whose settings are not
// known yet.
type connectionPending struct {
	kind     string
	settings []string
}

func (e *connectionPending) Error() string {
	return fmt.Sprintf("the provider's %s connection is not known until apply: %s %s a value Terraform learns only then (from a resource or module output not applied yet). "+
		"The provider makes no %s connection before then, and never falls back to another source in its place (KUBECONFIG, ~/.kube/config, an in-cluster account, an SSH agent), which could reach another cluster or host",
		e.kind, strings.Join(e.settings, ", "), map[bool]string{true: "is", false: "are"}[len(e.settings) == 1], e.kind)
}

// unknownSettings names the settings of a provider block that are unknown
// (the block itself when it is).
func unknownSettings(prefix string, v attr.Value) []string {
	switch {
	case v == nil || v.IsNull():
		return nil
	case v.IsUnknown():
		return []string{prefix}
	}
	var out []string
	switch t := v.(type) {
	case types.Object:
		for name, a := range t.Attributes() {
			out = append(out, unknownSettings(prefix+"."+name, a)...)
		}
	case types.List:
		for i, e := range t.Elements() {
			out = append(out, unknownSettings(fmt.Sprintf("%s[%d]", prefix, i), e)...)
		}
	case types.Map:
		for k, e := range t.Elements() {
			out = append(out, unknownSettings(fmt.Sprintf("%s[%q]", prefix, k), e)...)
		}
	}
	slices.Sort(out)
	return out
}

// pending is the connection of kind whose settings are not known yet, or
// nil; kind "" asks about every kind (an import id, which any kind may
// recognise).
func (d *Data) pending(kind string) *connectionPending {
	if d == nil || len(d.unknown) == 0 {
		return nil
	}
	if kind == "" {
		kind = slices.Sorted(maps.Keys(d.unknown))[0]
	}
	if s := d.unknown[kind]; len(s) > 0 {
		return &connectionPending{kind: kind, settings: s}
	}
	return nil
}

// failure is the executor failure of a read that cannot wait for apply.
func (e *connectionPending) failure() *executor.Failure {
	return &executor.Failure{Code: executor.Unavailable, Summary: fmt.Sprintf("the provider's %s connection is not known until apply", e.kind),
		Reason: e.Error(), Err: e,
		Next: "Run this read once the values the provider block uses are applied (terraform apply -target on what makes them), or give the provider block values known at plan."}
}

// keepUnrefreshed reports a refresh skipped because its connection is not
// known yet: the state is kept as it is, with a warning.
func keepUnrefreshed(diags *diag.Diagnostics, what string, p *connectionPending) {
	diags.AddWarning(fmt.Sprintf("%s was not refreshed: the %s connection is not known yet", what, p.kind),
		p.Error()+". The state is kept as it was; the apply, which knows the connection, works against what it names.")
}

// isPending reports whether err is a connection not known yet.
func isPending(err error) bool {
	var p *connectionPending
	return errors.As(err, &p)
}

// unrefreshed keeps a refresh of an object on compute kind (or, for "",
// any kind: an imported agent) whose connection is not known yet, and
// reports whether it did.
func (d *Data) unrefreshed(diags *diag.Diagnostics, what, kind string) bool {
	p := d.pending(kind)
	if p != nil {
		keepUnrefreshed(diags, what, p)
	}
	return p != nil
}
