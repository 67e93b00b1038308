package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/identityschema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// Where an agent runs, said without its compute: in an occ_agent's
// resource identity, in an occ_agent list block and in data.occ_agent.
// Each compute kind's row declares the attributes that locate its target
// (kindRow.target: a Kubernetes namespace; an SSH host and port); these
// schemas are their union, in kindOrder, and one set of checks judges a
// target for all of them.

// targetAttr is one attribute that locates an agent on its kind's
// target.
type targetAttr struct {
	name string
	// number: an integer (identity and list block); else a string.
	number bool
	// key: setting it names the kind's target. Exactly one kind's key is
	// set in a target; the kind's other attributes refine it (a port).
	key bool
	// identity, list and data describe it in the identity, the list block
	// and data.occ_agent ("" keeps a key out of the data source, which
	// takes keys only); dataValidators check it there.
	identity, list, data string
	dataValidators       []validator.String
	// what and example say what to write in a key left empty: "the
	// tenant namespace", "occ-acme".
	what, example string
}

// agentTarget holds a target's attribute values by name; an attribute it
// does not hold is null.
type agentTarget map[string]attr.Value

// str and num read a string and an integer attribute (null when absent).
func (t agentTarget) str(name string) types.String {
	if v, ok := t[name].(types.String); ok {
		return v
	}
	return types.StringNull()
}

func (t agentTarget) num(name string) types.Int64 {
	if v, ok := t[name].(types.Int64); ok {
		return v
	}
	return types.Int64Null()
}

// has reports whether attribute name is set: known and not null, and,
// with emptyIsUnset, not an empty string.
func (t agentTarget) has(name string, emptyIsUnset bool) bool {
	v, ok := t[name]
	if !ok || v.IsNull() || v.IsUnknown() {
		return false
	}
	s, isString := v.(types.String)
	return !emptyIsUnset || !isString || s.ValueString() != ""
}

// unknown reports whether any attribute is still unknown.
func (t agentTarget) unknown() bool {
	for _, v := range t {
		if v.IsUnknown() {
			return true
		}
	}
	return false
}

// agentIdentityModel is an occ_agent's identity: its name and where it
// runs, in the target attributes of its compute kind.
type agentIdentityModel struct {
	Name   types.String
	Target agentTarget
}

// targetAttrs lists every kind's target attributes, in kindOrder.
func targetAttrs() []targetAttr {
	var all []targetAttr
	for _, k := range kindOrder {
		all = append(all, executors[k].target...)
	}
	return all
}

func (a targetAttr) typ() attr.Type {
	if a.number {
		return types.Int64Type
	}
	return types.StringType
}

func (a targetAttr) null() attr.Value {
	if a.number {
		return types.Int64Null()
	}
	return types.StringNull()
}

// keyOf is the name of a kind's key attribute ("" for a kind without a
// target).
func keyOf(row kindRow) string {
	for _, a := range row.target {
		if a.key {
			return a.name
		}
	}
	return ""
}

func agentIdentitySchema() identityschema.Schema {
	attrs := map[string]identityschema.Attribute{
		"name": identityschema.StringAttribute{RequiredForImport: true, Description: "The Agent's name."},
	}
	for _, a := range targetAttrs() {
		if a.number {
			attrs[a.name] = identityschema.Int64Attribute{OptionalForImport: true, Description: a.identity}
		} else {
			attrs[a.name] = identityschema.StringAttribute{OptionalForImport: true, Description: a.identity}
		}
	}
	return identityschema.Schema{Attributes: attrs}
}

func identityAttrTypes() map[string]attr.Type {
	types_ := map[string]attr.Type{"name": types.StringType}
	for _, a := range targetAttrs() {
		types_[a.name] = a.typ()
	}
	return types_
}

// object is the identity as Terraform holds it: every kind's target
// attribute, null but the agent's own kind's.
func (m agentIdentityModel) object() types.Object {
	vals := map[string]attr.Value{"name": m.Name}
	if m.Name.IsUnknown() {
		vals["name"] = types.StringNull()
	}
	for _, a := range targetAttrs() {
		vals[a.name] = a.null()
		if v, ok := m.Target[a.name]; ok && v.Type(context.Background()).Equal(a.typ()) {
			vals[a.name] = v
		}
	}
	return types.ObjectValueMust(identityAttrTypes(), vals)
}

// identityFromObject reads an identity (or, without its name, a list
// block) as Terraform passed it.
func identityFromObject(o types.Object) agentIdentityModel {
	m := agentIdentityModel{Name: types.StringNull(), Target: agentTarget{}}
	for k, v := range o.Attributes() {
		switch name, isString := v.(types.String); {
		case k == "name" && isString:
			m.Name = name
		case k != "name" && !v.IsNull():
			m.Target[k] = v
		}
	}
	return m
}

// equal reports whether two identities are the same.
func (m agentIdentityModel) equal(o agentIdentityModel) bool {
	return m.object().Equal(o.object())
}

func (m agentIdentityModel) String() string { return m.object().String() }

// targetProblem is a value a kind refuses in its own target attribute
// (kindRow.checkTarget): "port" "0" is "not a TCP port", fix "write 1 to
// 65535, or leave it out for 22".
type targetProblem struct {
	attr, value, is, fix string
}

type faultKind int

const (
	faultNone    faultKind = iota
	faultBoth              // two kinds' keys: a and b
	faultNeither           // no kind's key
	faultForeign           // a (of kind owner) set with another kind's key b
	faultEmpty             // key a is an empty string
	faultValue             // the kind refuses a value (problem)
)

// targetFault is what is wrong with a target; each caller words it for
// its own attribute (an identity's error, a list block's diagnostic).
type targetFault struct {
	kind    faultKind
	a, b    string
	owner   kindRow
	empty   targetAttr
	problem *targetProblem
}

// judge finds the kind a target names, and what is wrong with it: it
// must set exactly one kind's key, no other kind's attribute, no empty
// key (unless emptyIsUnset, as in an identity, where "" reads as unset),
// and values its kind accepts.
func (t agentTarget) judge(emptyIsUnset bool) (kindRow, targetFault) {
	var keys []string
	var rows []kindRow
	for _, k := range kindOrder {
		r := executors[k]
		if key := keyOf(r); key != "" && t.has(key, emptyIsUnset) {
			keys, rows = append(keys, key), append(rows, r)
		}
	}
	switch len(keys) {
	case 0:
		return kindRow{}, targetFault{kind: faultNeither}
	case 1:
	default:
		return kindRow{}, targetFault{kind: faultBoth, a: keys[0], b: keys[1]}
	}
	row := rows[0]
	for _, k := range kindOrder {
		r := executors[k]
		if r.block == row.block {
			continue
		}
		for _, a := range r.target {
			if t.has(a.name, emptyIsUnset) {
				return row, targetFault{kind: faultForeign, a: a.name, b: keys[0], owner: r}
			}
		}
	}
	for _, a := range row.target {
		if a.key && !a.number && t.str(a.name).ValueString() == "" {
			return row, targetFault{kind: faultEmpty, a: a.name, empty: a}
		}
	}
	if row.checkTarget != nil {
		if p := row.checkTarget(t); p != nil {
			return row, targetFault{kind: faultValue, problem: p}
		}
	}
	return row, targetFault{}
}

// targetOptions says which targets there are, each as its key and what
// it names joined by sep: "namespace for a Kubernetes namespace, or host
// (and port) for an SSH host".
func targetOptions(sep string) string {
	var opts []string
	for _, k := range kindOrder {
		if r := executors[k]; keyOf(r) != "" {
			opts = append(opts, r.claim+sep+r.noun)
		}
	}
	return strings.Join(opts, ", or ")
}

// firstKey is the first kind's key, where a target that names none is
// refused.
func firstKey() string {
	for _, k := range kindOrder {
		if key := keyOf(executors[k]); key != "" {
			return key
		}
	}
	return "name"
}

// importID is the import id an identity names; err names the identity
// attribute to fix.
func (m agentIdentityModel) importID() (string, error) {
	if m.Name.ValueString() == "" {
		return "", fmt.Errorf("identity.name must be set: the Agent's name")
	}
	row, f := m.Target.judge(true)
	switch f.kind {
	case faultBoth:
		return "", fmt.Errorf("identity sets both %s and %s: set one, %s", f.a, f.b, targetOptions(" for "))
	case faultNeither:
		return "", fmt.Errorf("identity must set %s", targetOptions(" for "))
	case faultForeign:
		return "", fmt.Errorf("identity.%s is for %s: remove it, or set %s instead of %s", f.a, f.owner.noun, keyOf(f.owner), f.b)
	case faultValue:
		p := f.problem
		return "", fmt.Errorf("identity.%s %s is %s: %s", p.attr, p.value, p.is, p.fix)
	}
	return row.importID(m), nil
}

// check reports what is wrong with a known occ_agent list block, at the
// attribute to fix.
func (t agentTarget) check(diags *diag.Diagnostics) {
	if t.unknown() {
		return // checked again when the query runs
	}
	switch _, f := t.judge(false); f.kind {
	case faultBoth:
		addAttrError(diags, path.Root(f.b), fmt.Sprintf("INVALID_REQUEST: %s and %s are both set", f.a, f.b),
			"A listing reads one target: set "+targetOptions(" to list ")+".")
	case faultNeither:
		addAttrError(diags, path.Root(firstKey()), "INVALID_REQUEST: nothing to list", "Set "+targetOptions(" to list ")+".")
	case faultForeign:
		addAttrError(diags, path.Root(f.a), fmt.Sprintf("INVALID_REQUEST: %s is for %s", f.a, f.owner.noun),
			fmt.Sprintf("Remove %s, or list %s with %s instead of %s.", f.a, f.owner.noun, keyOf(f.owner), f.b))
	case faultEmpty:
		addAttrError(diags, path.Root(f.a), "INVALID_REQUEST: "+f.a+" is empty", fmt.Sprintf("Write %s to list, such as %s.", f.empty.what, f.empty.example))
	case faultValue:
		p := f.problem
		addAttrError(diags, path.Root(p.attr), fmt.Sprintf("INVALID_REQUEST: %s is %s", p.attr, p.is), fmt.Sprintf("%s %s: %s.", p.attr, p.value, p.fix))
	}
}
