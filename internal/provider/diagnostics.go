package provider

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
)

// addAdmissionErrors turns admission refusals into diagnostics, in one
// place: the summary starts with the class, the detail says what to change
// and cites the rule, and the diagnostic points at the attribute (under
// base) that caused it.
func addAdmissionErrors(diags *diag.Diagnostics, base path.Path, err error) {
	var es admission.Errors
	var one *admission.Error
	switch {
	case errors.As(err, &es):
	case errors.As(err, &one):
		es = admission.Errors{one}
	default:
		diags.AddAttributeError(base, "INVALID_REQUEST: admission failed", err.Error())
		return
	}
	for _, e := range es {
		addAttrError(diags, attributePath(base, e.Attribute), summary(e), detail(e))
	}
}

func summary(e *admission.Error) string {
	// The first clause of the message; a period inside a name such as
	// agentRuntime.id does not end it.
	msg := e.Message
	for _, sep := range []string{"; ", ". ", ": "} {
		if i := strings.Index(msg, sep); i > 0 {
			msg = msg[:i]
		}
	}
	if len(msg) > 120 {
		msg = msg[:120] + "…"
	}
	return fmt.Sprintf("%s: %s", e.Class, msg)
}

func detail(e *admission.Error) string {
	var b strings.Builder
	if len(e.DocPath) > 0 {
		fmt.Fprintf(&b, "In the configuration document at %s: ", e.DocPath.String())
	}
	b.WriteString(e.Message)
	if e.Rule == "" {
		// A check of the provider's own, where the rules are silent.
		fmt.Fprintf(&b, "\n\nAnswered as %s (%d).", e.Class, e.Class.HTTPStatus())
	} else {
		fmt.Fprintf(&b, "\n\nRule %s, answered as %s (%d).", e.Rule, e.Class, e.Class.HTTPStatus())
	}
	return b.String()
}

func attributePath(base path.Path, attr []string) path.Path {
	p := base
	for i, a := range attr {
		if i == 0 && base.Equal(path.Empty()) {
			p = path.Root(a)
			continue
		}
		p = p.AtName(a)
	}
	return p
}

// addDocumentError reports a document that does not parse.
func addDocumentError(diags *diag.Diagnostics, at path.Path, err error) {
	var se *occconfig.SyntaxError
	if errors.As(err, &se) {
		addAttrError(diags, at, "INVALID_REQUEST: the configuration document is not valid JSON or JSON5",
			fmt.Sprintf("At line %d, column %d: %s. Fix the document; JSON and JSON5 (comments, trailing commas, unquoted keys) are accepted.", se.Line, se.Column, se.Msg))
		return
	}
	addAttrError(diags, at, "INVALID_REQUEST: the configuration document cannot be used", err.Error())
}

// addWarnings reports admission advice.
func addWarnings(diags *diag.Diagnostics, at path.Path, ws []admission.Warning) {
	for _, w := range ws {
		msg := w.Message
		if len(w.DocPath) > 0 {
			msg = fmt.Sprintf("In the configuration document at %s: %s", w.DocPath.String(), msg)
		}
		diags.AddAttributeWarning(at, fmt.Sprintf("Advice (rule %s)", w.Rule), msg)
	}
}
