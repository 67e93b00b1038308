package executor

import (
	"errors"
	"fmt"
	"strings"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/runtimerecord"
)

// Op is the operation a failure happened in.
type Op string

const (
	OpPrepare Op = "prepare"
	OpDeploy  Op = "deploy"
	OpRead    Op = "read"
	OpDelete  Op = "delete"
	OpImport  Op = "import"
	OpList    Op = "list"
	OpTurn    Op = "turn"
	// OpGateway is opening a way into an agent's gateway, or reading its
	// token (the occ_agent_tunnel and occ_gateway_token ephemeral
	// resources).
	OpGateway Op = "gateway"
	// OpRestart is a restart of an agent's activated revision (the
	// occ_agent_restart action).
	OpRestart Op = "restart"
	// OpPreflight is a plan's read-only look at the target (Preflight):
	// its failures are those a deploy would meet.
	OpPreflight Op = "preflight"
)

// Failure is an operation that did not succeed: its code from the catalog,
// what happened, where, the structured fields of the startup record that
// held it, the lines that show it, what to do next, and whether anything
// was written. It carries no secret: Lines come only from sources the
// executor vouches for.
type Failure struct {
	Code Code
	Op   Op
	// Agent and Revision name what was deployed (Revision 0 outside a
	// deploy).
	Agent    string
	Revision int64
	// Summary follows the code in the diagnostic's summary; empty means
	// "agent A revision N did not activate" for a deploy.
	Summary string
	// Component is the part that failed, by its name in the target (a
	// container, a unit); Where says it for people: "container gateway",
	// "unit occ-agent-x.service on 10.0.0.5:22".
	Component string
	Where     string
	Phase     string
	// Reason says what happened, in a sentence without a final period.
	Reason string
	// State is the target's own word on the component (systemd's unit
	// state on SSH).
	State  string
	Record *runtimerecord.Record
	// LinesTitle heads Lines ("Last log lines:").
	LinesTitle string
	Lines      []string
	Next       string
	// Wrote is true when anything may have reached the target; set by the
	// executor from its Writes, never by hand.
	Wrote bool
	// Err is the underlying error.
	Err error
}

func (f *Failure) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", f.Code, f.SummaryText())
	if f.Where != "" {
		fmt.Fprintf(&b, ", %s", f.Where)
	}
	if f.Phase != "" {
		fmt.Fprintf(&b, ", phase %s", f.Phase)
	}
	if f.Reason != "" {
		fmt.Fprintf(&b, ": %s", f.Reason)
	} else if f.Err != nil {
		fmt.Fprintf(&b, ": %v", f.Err)
	}
	return b.String()
}

func (f *Failure) Unwrap() error { return f.Err }

// AsRestart words the advice of a failure the deploy's own checks found
// during a restart (Op OpRestart): what a deploy's failure says to do
// before "apply again" is done before a restart again.
func (f *Failure) AsRestart() {
	f.Next = strings.ReplaceAll(f.Next, "apply again", "restart again (or apply)")
	f.Next = strings.ReplaceAll(f.Next, "Apply again", "Restart again (or apply)")
}

// SummaryText is the summary after the code.
func (f *Failure) SummaryText() string {
	switch {
	case f.Summary != "":
		return f.Summary
	case f.Op == OpDeploy && f.Agent != "":
		return fmt.Sprintf("agent %q revision %d did not activate", f.Agent, f.Revision)
	case f.Op == OpPreflight && f.Agent != "":
		return fmt.Sprintf("agent %q revision %d would not activate", f.Agent, f.Revision)
	case f.Op == OpTurn && f.Agent != "":
		return fmt.Sprintf("agent %q did not answer the turn", f.Agent)
	case f.Op == OpGateway && f.Agent != "":
		return fmt.Sprintf("agent %q: its gateway cannot be reached", f.Agent)
	case f.Op == OpRestart && f.Agent != "" && f.Revision > 0:
		return fmt.Sprintf("agent %q revision %d was not restarted", f.Agent, f.Revision)
	case f.Agent != "":
		return fmt.Sprintf("agent %q: %s failed", f.Agent, f.Op)
	}
	return string(f.Op) + " failed"
}

// RecordText renders a startup record's structured fields (PR7) in one
// line, the same for every executor; "" for none.
func RecordText(r *runtimerecord.Record) string {
	if r == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Startup record: %s", r.Event)
	add := func(k string, v any) { fmt.Fprintf(&b, ", %s %v", k, v) }
	if r.Attempt > 0 {
		add("attempt", r.Attempt)
	}
	if r.ExitCode != nil {
		add("exitCode", *r.ExitCode)
	}
	if r.Signal != "" {
		add("signal", r.Signal)
	}
	if r.Code != "" {
		add("code", r.Code)
	}
	if r.Phase != "" {
		add("phase", r.Phase)
	}
	for _, kv := range [][2]string{{"failureClass", r.FailureClass}, {"causeKind", r.CauseKind}, {"causeDetail", r.CauseDetail},
		{"bodyShape", r.BodyShape}, {"providerErrorCode", r.ProviderErrorCode}, {"providerErrorType", r.ProviderErrorType}} {
		if kv[1] != "" {
			add(kv[0], kv[1])
		}
	}
	if r.ProviderCode != 0 {
		add("providerCode", r.ProviderCode)
	}
	if len(r.ResponseHeaderMarker) > 0 {
		add("responseHeaderMarker", strings.Join(r.ResponseHeaderMarker, ","))
	}
	return b.String() + "."
}

// Detail is the diagnostic's detail: where, what happened, the record, the
// lines, what was written and what to do next. A Failure without Next gets
// the catalog's advice for its code.
func (f *Failure) Detail(revisionID string) string {
	var b strings.Builder
	head := []string{}
	if f.Agent != "" {
		if f.Revision > 0 {
			h := fmt.Sprintf("Agent %q, revision %d", f.Agent, f.Revision)
			if revisionID != "" {
				h += fmt.Sprintf(" (%s)", revisionID)
			}
			head = append(head, h)
		} else {
			head = append(head, fmt.Sprintf("Agent %q", f.Agent))
		}
	}
	if f.Where != "" {
		head = append(head, f.Where)
	}
	if f.Phase != "" {
		head = append(head, "phase "+f.Phase)
	}
	if len(head) > 0 {
		b.WriteString(strings.Join(head, ", ") + ".\n")
	}
	switch {
	case f.Reason != "":
		fmt.Fprintf(&b, "What happened: %s.\n", f.Reason)
	case f.Err != nil:
		fmt.Fprintf(&b, "What happened: %v.\n", f.Err)
	}
	if f.State != "" {
		fmt.Fprintf(&b, "Unit state: %s.\n", f.State)
	}
	if r := RecordText(f.Record); r != "" {
		b.WriteString(r + "\n")
	}
	if len(f.Lines) > 0 {
		title := f.LinesTitle
		if title == "" {
			title = "Last log lines:"
		}
		b.WriteString(title + "\n")
		for _, l := range f.Lines {
			// The executors redact raw lines with what they know; whatever
			// looks like a credential goes here too (AU7).
			fmt.Fprintf(&b, "  %s\n", Redactor{}.Line(l))
		}
	}
	next := f.Next
	if next == "" {
		if e, ok := Lookup(f.Code); ok {
			next = e.Advice
		}
	}
	if next != "" {
		fmt.Fprintf(&b, "Next: %s\n", next)
	}
	if !f.Wrote && (f.Op == OpDeploy || f.Op == OpPrepare) {
		b.WriteString("Nothing was written.\n")
	}
	if f.Op == OpPreflight {
		b.WriteString("Found by the plan's preflight, which reads the target and writes nothing; the apply would fail with this code (provider setting preflight = false plans without it).\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// StaleFailure refuses revision n of agent because the target already
// serves newer revision live (AC3); holder says what serves it ("the
// Service already serves", "the host already selects"), outcome what
// became of n.
func StaleFailure(agent string, n, live int64, holder, phase, outcome string) *Failure {
	return &Failure{Code: Stale, Agent: agent, Revision: n, Phase: phase,
		Reason: fmt.Sprintf("%s newer revision %d; %s", holder, live, outcome),
		Next:   "Another apply activated a newer revision. Refresh (terraform plan) and apply again."}
}

// Exit is what an operation knows at its exit, where Normalize turns the
// error it ends with into the error it returns.
type Exit struct {
	Op Op
	// Agent and Revision name what the operation was about (Revision 0
	// outside a deploy); a failure that names no agent gets them.
	Agent    string
	Revision int64
	// Writes is the operation's (nil: nothing was written); every
	// failure's Wrote comes from it.
	Writes *Writes
	// Code, Summary and Next word an error that is not yet a *Failure:
	// Code "" is the operation's default (DefaultCode), Next "" the
	// catalog's advice for the code.
	Code          Code
	Summary, Next string
	// Classify, when set, words an error that is not yet a *Failure from
	// the executor's own error types (a code, a summary, advice). It sees
	// the failure with every field above set, and may change any.
	Classify func(f *Failure, err error)
	// Finish, when set, adds the executor's own wording to every failure
	// the exit returns.
	Finish func(f *Failure)
}

// DefaultCode is the code of an operation's error that nothing
// classified: a deploy's DEPLOYMENT_FAILED, a delete's DELETE_FAILED, and
// UNAVAILABLE for an operation that only reads (or prepares, or sends a
// turn): what it depends on did not answer.
func DefaultCode(op Op) Code {
	switch op {
	case OpDeploy:
		return DeploymentFailed
	case OpDelete:
		return DeleteFailed
	}
	return Unavailable
}

// Normalize is the one way an executor's operation turns the error it
// ends with into what it returns: nil stays nil; an admission refusal
// (admission.Errors, *admission.Error) is returned unchanged; a *Failure
// is kept, with the exit's Op and Wrote, and its agent and revision when it
// names none; any other error becomes a *Failure with x's code (or the
// operation's default), summary and advice, the error as its reason, worded
// further by x.Classify. x.Finish sees every failure last.
func Normalize(err error, x Exit) error {
	if err == nil {
		return nil
	}
	var es admission.Errors
	var one *admission.Error
	if errors.As(err, &es) || errors.As(err, &one) {
		return err
	}
	var f *Failure
	known := errors.As(err, &f)
	if !known {
		code := x.Code
		if code == "" {
			code = DefaultCode(x.Op)
		}
		f = &Failure{Code: code, Summary: x.Summary, Next: x.Next, Reason: err.Error(), Err: err}
	}
	f.Op, f.Wrote = x.Op, x.Writes.Any()
	if f.Agent == "" {
		f.Agent, f.Revision = x.Agent, x.Revision
	}
	if !known && x.Classify != nil {
		x.Classify(f, err)
	}
	if x.Finish != nil {
		x.Finish(f)
	}
	return f
}
