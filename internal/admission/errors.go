// Package admission holds the OCC platform's rules (RULES.md), each in one
// place and named by its id, and Admit, which turns an Agent's four inputs
// into one immutable Revision or typed errors. It is pure: no I/O, no
// Terraform types.
package admission

import (
	"fmt"
	"strings"

	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
)

// Class is the platform's error class; a diagnostic summary starts with it.
type Class string

const (
	// InvalidRequest (400): an impossible or unsupported combination.
	InvalidRequest Class = "INVALID_REQUEST"
	// ResourceConflict (409): a combination the target cannot take now or by policy.
	ResourceConflict Class = "RESOURCE_CONFLICT"
)

// HTTPStatus is the status the platform answers with for the class.
func (c Class) HTTPStatus() int {
	if c == ResourceConflict {
		return 409
	}
	return 400
}

// Error is one refused rule: its class, its rule id, where it points (an
// attribute path of the Agent's inputs and, inside a Configuration
// document, a document path), and a message that says what to change.
type Error struct {
	Class Class
	Rule  string
	// Attribute is the path of the offending input, as attribute names from
	// the resource the error is reported on, e.g. ["harness_auth","source"].
	Attribute []string
	// DocPath points inside the Configuration document when the fault is there.
	DocPath occconfig.Path
	Message string
}

func (e *Error) Error() string {
	if e.Rule == "" {
		return fmt.Sprintf("%s: %s", e.Class, e.Detail())
	}
	return fmt.Sprintf("%s: %s (rule %s)", e.Class, e.Detail(), e.Rule)
}

// Detail is the message with the document path, without class and rule.
func (e *Error) Detail() string {
	if len(e.DocPath) > 0 {
		return fmt.Sprintf("%s: %s", e.DocPath.String(), e.Message)
	}
	return e.Message
}

// Errors is every refusal found in one pass, in the order the rules ran.
type Errors []*Error

func (es Errors) Error() string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "; ")
}

// Has reports whether a refusal for rule is present.
func (es Errors) Has(rule string) bool {
	for _, e := range es {
		if e.Rule == rule {
			return true
		}
	}
	return false
}

func invalid(rule string, attr []string, doc occconfig.Path, format string, args ...any) *Error {
	return &Error{Class: InvalidRequest, Rule: rule, Attribute: attr, DocPath: doc, Message: fmt.Sprintf(format, args...)}
}

func conflict(rule string, attr []string, format string, args ...any) *Error {
	return &Error{Class: ResourceConflict, Rule: rule, Attribute: attr, Message: fmt.Sprintf(format, args...)}
}

// Warning is advice that does not refuse the combination.
type Warning struct {
	Rule      string
	Attribute []string
	DocPath   occconfig.Path
	Message   string
}
