package admission

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
)

// Probe is the startup model probe the revision runs (PR1, PR2, PR4).
type Probe struct {
	// Model is the configured primary model, never the MR4 rewrite.
	Model        string `json:"model"`
	OutputTokens int    `json:"output_tokens"`
	// OpenClaw (PR1): WallSeconds plus CPUSeconds at the workload's CPU limit.
	WallSeconds int `json:"wall_seconds,omitempty"`
	CPUSeconds  int `json:"cpu_seconds,omitempty"`
	// Codex (PR4): MaxAttempts attempts of at most AttemptSeconds each, all
	// inside BudgetSeconds, the retry delay included.
	MaxAttempts    int `json:"max_attempts,omitempty"`
	AttemptSeconds int `json:"attempt_seconds,omitempty"`
	BudgetSeconds  int `json:"budget_seconds,omitempty"`
	// Transport: "http-streaming" (embedded OpenClaw), "responses-websocket"
	// (dedicated Codex), or "responses-https" (compatible endpoints) (PR3).
	Transport string `json:"transport"`
	// BaseURL is a compatible Codex endpoint's literal base URL (PR3,
	// PR11), which the probe calls; empty for the provider's default.
	BaseURL string `json:"base_url,omitempty"`
}

// Budget is the probe's wall-clock budget: Codex's fixed budget (PR4), or
// at a CPU limit in millicores 20 s plus the time 45 CPU-seconds take at
// that limit (PR1).
func (p Probe) Budget(cpuMillis int64) time.Duration {
	if p.BudgetSeconds > 0 {
		return time.Duration(p.BudgetSeconds) * time.Second
	}
	wall := time.Duration(p.WallSeconds) * time.Second
	if cpuMillis <= 0 {
		cpuMillis = 1000
	}
	return wall + time.Duration(float64(p.CPUSeconds)*1000/float64(cpuMillis)*float64(time.Second))
}

// SandboxBinding is the sandbox the revision is contained in (AD3, HM5).
type SandboxBinding struct {
	Driver            string   `json:"driver"`
	Facets            []string `json:"facets"`
	RequiredProfile   string   `json:"required_profile,omitempty"`
	CredentialGateway string   `json:"credential_gateway,omitempty"`
}

// SourceBinding is the frozen reference to the credential source (AD3,
// AU7): identity, generation and where the value lives, never the value.
type SourceBinding struct {
	ID              string `json:"id"`
	Method          string `json:"method"`
	Generation      int64  `json:"generation"`
	SecretName      string `json:"secret_name,omitempty"`
	SecretKey       string `json:"secret_key,omitempty"`
	ServiceAccount  string `json:"service_account,omitempty"`
	SourceType      string `json:"source_type,omitempty"`
	EnvironmentFile string `json:"environment_file,omitempty"`
}

// Revision is the immutable, admitted combination one deployment runs (AD3).
type Revision struct {
	Agent                   string             `json:"agent"`
	Harness                 string             `json:"harness"`
	HarnessVersion          string             `json:"harness_version"`
	ExecutionMode           string             `json:"execution_mode"`
	ComputeID               string             `json:"compute_id"`
	ComputeKind             string             `json:"compute_kind"`
	ConfigurationID         string             `json:"configuration_id"`
	ConfigurationGeneration int64              `json:"configuration_generation"`
	Source                  SourceBinding      `json:"source"`
	Credential              CredentialDelivery `json:"credential"`
	Sandbox                 *SandboxBinding    `json:"sandbox,omitempty"`
	PrimaryModel            *ModelRef          `json:"primary_model,omitempty"`
	// Fallbacks keep the configured order; admission neither executes
	// fallback nor changes topology (MR10).
	Fallbacks        []ModelRef `json:"fallbacks,omitempty"`
	MaxConcurrent    int64      `json:"max_concurrent,omitempty"`
	NodeWorkers      int64      `json:"node_workers,omitempty"`
	LoggingOwnership string     `json:"logging_ownership"`
	LoggingLevel     string     `json:"logging_level,omitempty"`
	Probe            Probe      `json:"probe"`
	// SecretBindings reach the gateway container only (AU6).
	SecretBindings []SecretBindingEnv `json:"secret_bindings,omitempty"`
	// AdmittedDocument is the frozen document after the driver transform and
	// logging stamp (AD2, AD4); model references as stored.
	AdmittedDocument occconfig.Document `json:"admitted_document"`
	// GatewayDocument is the private gateway configuration: the admitted
	// document with the MR4 custom-endpoint rewrite.
	GatewayDocument occconfig.Document `json:"gateway_document"`
	// ComputeSettings is every Compute setting that shapes what runs; any
	// change to them is a new revision.
	ComputeSettings ComputeSettings `json:"compute_settings"`

	Warnings []Warning `json:"-"`
}

// ID is the content address of the revision: the first 16 hex digits of the
// sha256 of its canonical JSON. Equal revisions have equal IDs, so a plan
// that changes nothing that matters keeps the revision (no diff).
func (r *Revision) ID() string {
	b, err := json.Marshal(r)
	if err != nil {
		panic(fmt.Sprintf("admission: revision encoding failed: %v", err))
	}
	var generic any
	if err := json.Unmarshal(b, &generic); err != nil {
		panic(fmt.Sprintf("admission: revision decoding failed: %v", err))
	}
	sum := sha256.Sum256(occconfig.Canonical(generic))
	return hex.EncodeToString(sum[:])[:16]
}

// Admit runs the whole admission over an Agent's four inputs and returns the
// revision that would run, or every refusal found. The harness × mode ×
// compute matrix (HM1) is judged first, then dedicated OpenClaw (ND6): an
// unsupported combination, or one that could not serve a turn, is refused
// with INVALID_REQUEST before any other work is admitted.
func Admit(in Input) (*Revision, Errors) {
	doc := in.Configuration.Document
	if doc == nil {
		doc = occconfig.Document{}
	}
	mode := DefaultExecutionMode(in.Agent.ExecutionMode, "")

	// HM1, then ND6, first and alone when the Agent names its harness: the
	// combination is known before the document is read. An omitted harness
	// comes from resolution, so it is judged after Resolve below.
	if in.Agent.Harness != "" {
		if e := CheckHarnessMode(in.Agent.Harness, mode, in.Compute.Kind); e != nil {
			return nil, Errors{e}
		}
		if e := CheckNativeOpenClaw(in.Agent.Harness, mode, in.Compute.Kind); e != nil {
			return nil, Errors{e}
		}
	}

	// Save-time rules again (the Configuration may have been saved by an
	// older provider); their paths point into the agent's configuration.
	if errs := withAttr(CheckDocument(doc), "configuration"); len(errs) > 0 {
		return nil, errs
	}

	// AD2: the sandbox driver may transform the native configuration before
	// validation and admission; the stored source is never touched.
	admitted := occconfig.Clone(doc)
	// MR3: the legacy Agent-level runtime key is ignored upstream; it is not
	// a policy, and the pinned gateway's strict schema would refuse it.
	occconfig.Delete(admitted, pathLegacyRuntime)
	kind := kindRow(in.Compute.Kind)
	if d := in.Compute.Kubernetes().SandboxDriver; d != nil && kind.SandboxDriver {
		admitted = DriverTransform(d.Name, admitted, in.Compute, in.Source)
	}
	// AD4/AD5: logging ownership, after the transform and before validation.
	if ownership(in.Compute) == LoggingPlatform {
		StampPlatformLogging(admitted, loggingLevel(in.Compute))
	}
	if errs := withAttr(CheckDocument(admitted), "compute"); len(errs) > 0 {
		return nil, errs
	}

	res, errs := Resolve(admitted, in.Agent.Harness)
	errs = withAttr(errs, "configuration")
	if res.Harness == "" {
		return nil, errs
	}
	if e := CheckHarnessMode(res.Harness, mode, in.Compute.Kind); e != nil {
		if in.Agent.Harness == "" && e.Attribute[0] == "harness" {
			e.Attribute = []string{"configuration"}
		}
		return nil, Errors{e}
	}
	if e := CheckNativeOpenClaw(res.Harness, mode, in.Compute.Kind); e != nil {
		return nil, Errors{e}
	}
	errs = append(errs, withAttr(checkDedicated(admitted, res, mode), "configuration")...)
	// AD3: the wiring render writes is the platform's; a user value there
	// would be replaced after admission without a word.
	errs = append(errs, withAttr(CheckPlatformKeys(admitted, in.Compute.Kind, res.Harness, mode), "configuration")...)
	if kind.StartupProbe {
		errs = append(errs, withAttr(checkProbeTransport(admitted, res.Primary), "configuration")...)
	}
	errs = append(errs, CheckSandbox(mode, in.Compute)...)
	errs = append(errs, CheckLoggingOwnership(in.Compute)...)
	errs = append(errs, checkEgress(admitted, res.Primary, in.Compute)...)

	primaryProvider := ""
	if res.Primary != nil {
		primaryProvider = res.Primary.Provider
	}
	delivery, authErrs := CheckAuth(res.Harness, mode, primaryProvider, in.Compute, in.Source)
	errs = append(errs, authErrs...)
	bindings, bindErrs := CheckSecretBindings(in.Configuration.SecretBindings, nil)
	for _, e := range bindErrs {
		e.Attribute = []string{"configuration"}
	}
	errs = append(errs, bindErrs...)
	errs = append(errs, checkBindingsCredential(bindings, in.Source)...)
	errs = append(errs, checkBindingsCompute(bindings, in.Compute)...)
	if in.Source.Method != MethodRuntime {
		// PR11, AU6: where the platform delivers the model credential, the
		// document's model credentials refer only to the alias it fills. An
		// SSH host's credentials file is the runtime source itself.
		errs = append(errs, withAttr(checkModelCredentialRefs(admitted, res.Primary, in.Configuration.SecretBindings), "configuration")...)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	// AD3: the platform's wiring is part of what the revision freezes and
	// the plan shows; CheckPlatformKeys passed, so nothing of the user's
	// is replaced (the stamp checks again and refuses rather than skip).
	if errs := StampPlatformKeys(admitted, in.Compute.Kind, res.Harness, mode); len(errs) > 0 {
		return nil, withAttr(errs, "configuration")
	}

	rev := &Revision{
		Agent:                   in.Agent.Name,
		Harness:                 res.Harness,
		HarnessVersion:          HarnessVersion(res.Harness, in.Compute),
		ExecutionMode:           mode,
		ComputeID:               in.Compute.ID,
		ComputeKind:             in.Compute.Kind,
		ConfigurationID:         in.Configuration.ID,
		ConfigurationGeneration: in.Configuration.Generation,
		Source:                  sourceBinding(in.Source),
		Credential:              delivery,
		PrimaryModel:            res.Primary,
		Fallbacks:               slices.Clone(res.Fallbacks),
		LoggingOwnership:        ownership(in.Compute),
		Probe:                   probeFor(res, mode, admitted),
		SecretBindings:          bindings,
		ComputeSettings:         computeSettings(in.Compute),
		Warnings:                DocumentWarnings(doc),
	}
	if rev.LoggingOwnership == LoggingPlatform {
		rev.LoggingLevel = loggingLevel(in.Compute)
	}
	if d := in.Compute.Kubernetes().SandboxDriver; d != nil {
		rev.Sandbox = &SandboxBinding{Driver: d.Name, Facets: sortedFacets(d.Facets), RequiredProfile: d.RequiredProfile}
		if g := in.Compute.Kubernetes().CredentialGateway; g != nil {
			rev.Sandbox.CredentialGateway = g.Name
		}
	}
	if res.Harness == HarnessOpenClaw && mode == ModeDedicated {
		rev.NodeWorkers = in.Compute.Kubernetes().NodeWorkers
		if rev.NodeWorkers == 0 {
			rev.NodeWorkers = DefaultNodeWorkers
		}
	}
	// HM7: dedicated Codex's maxConcurrent, frozen into the document.
	rev.MaxConcurrent = admitMaxConcurrent(admitted, res.Harness, mode, in.Compute.Kubernetes().CPUMillis)
	rev.AdmittedDocument = admitted
	rev.GatewayDocument = GatewayDocument(admitted)
	return rev, nil
}

// checkDedicated applies the dedicated main-Agent rules that run only at
// deployment: Codex's provider (MR6) and a primary model for the probe (PR2).
func checkDedicated(doc occconfig.Document, res Resolution, mode string) Errors {
	if mode != ModeDedicated || res.Harness != HarnessCodex {
		return nil
	}
	if res.Primary == nil {
		return Errors{invalid("PR2", nil, pathDefaultModel, "dedicated Codex must pass a native model probe before serving, so it needs a primary model; set agents.defaults.model to a codex/… model")}
	}
	switch res.Primary.Provider {
	case "codex":
		return codexReproducible(doc, "codex")
	case "openai":
		if CodexPluginWebsocket(doc) {
			return codexReproducible(doc, "openai")
		}
		return Errors{invalid("MR6", nil, pathDefaultModel, "dedicated Codex accepts openai models only when the Codex plugin is enabled with the websocket app-server transport; set plugins.entries.codex.enabled = true and plugins.entries.codex.config.appServer.transport = \"websocket\", or use a codex/… model")}
	default:
		return Errors{invalid("MR6", nil, pathDefaultModel, "dedicated Codex accepts only the native codex provider (or openai with the Codex plugin's websocket transport); %s is provider %q", res.Primary, res.Primary.Provider)}
	}
}

// transportOverrides are the provider keys OpenClaw 2026.9.6 reads as
// authored request transport overrides: with any of them, its Codex
// harness refuses the route ("Codex cannot reproduce authored request
// transport overrides") and the turn does not reach Codex.
var transportOverrides = []string{"headers", "request", "params", "authHeader", "timeoutSeconds", "localService"}

// codexReproducible refuses what dedicated Codex cannot honour of the
// selected provider's entry (MR6), so that no admitted topology fails its
// turns: request transport overrides, which the gateway's Codex harness
// refuses, and for openai a baseUrl of its own, which OpenClaw never routes
// to Codex (a custom OpenAI-compatible route is not one Codex reproduces)
// while the gateway holds no key to run it itself. The user's key then
// never goes to a host the document did not name.
func codexReproducible(doc occconfig.Document, provider string) Errors {
	var errs Errors
	entry := pathProviders.Key(provider)
	for _, k := range transportOverrides {
		if _, ok := occconfig.Lookup(doc, entry.Key(k)); ok {
			errs = append(errs, invalid("MR6", nil, entry.Key(k), "dedicated Codex cannot honour %s: OpenClaw's Codex harness refuses a provider with authored request transport overrides, so no turn would reach Codex; remove %s (Codex sends its own headers to the endpoint)", entry.Key(k), entry.Key(k)))
		}
	}
	if provider == "openai" {
		if u, _ := occconfig.String(doc, entry.Key("baseUrl")); strings.TrimSpace(u) != "" {
			errs = append(errs, invalid("MR6", nil, entry.Key("baseUrl"), "dedicated Codex cannot run openai models at an endpoint of their own: OpenClaw routes a custom OpenAI-compatible baseUrl to its own runtime, never to Codex, and the dedicated gateway holds no key, so no turn would be answered; for a compatible endpoint use a codex/… model with models.providers.codex.baseUrl (OCC points Codex's openai-compatible provider at it), or remove models.providers.openai.baseUrl to use OpenAI"))
		}
	}
	return errs
}

func probeFor(res Resolution, mode string, doc occconfig.Document) Probe {
	p := Probe{OutputTokens: 256, WallSeconds: 20, CPUSeconds: 45, Transport: "http-streaming"}
	if res.Primary != nil {
		p.Model = res.Primary.String()
	}
	if res.Harness == HarnessCodex && mode == ModeDedicated {
		p.WallSeconds, p.CPUSeconds = 0, 0
		p.MaxAttempts, p.AttemptSeconds, p.BudgetSeconds = 2, 30, 61
		p.Transport = "responses-websocket"
		if CustomCodexEndpoint(doc) {
			p.Transport = "responses-https"
			p.BaseURL, _ = occconfig.String(doc, pathCodexBaseURL)
		}
	}
	return p
}

func sourceBinding(s CredentialSource) SourceBinding {
	b := SourceBinding{ID: s.ID, Method: s.Method, Generation: s.Generation, ServiceAccount: s.ServiceAccount,
		SourceType: s.SourceType, EnvironmentFile: s.EnvironmentFile, SecretName: s.SecretName}
	if s.SecretRef != nil {
		b.SecretName, b.SecretKey = s.SecretRef.Name, s.SecretRef.Key
	}
	return b
}

func ownership(c Compute) string {
	if c.Kubernetes().LoggingOwnership == LoggingDriver {
		return LoggingDriver
	}
	return LoggingPlatform
}

func loggingLevel(c Compute) string {
	if c.Kubernetes().LoggingLevel == "" {
		return "info"
	}
	return c.Kubernetes().LoggingLevel
}

func sortedFacets(fs []string) []string {
	out := slices.Clone(fs)
	slices.Sort(out)
	return out
}

// ComputeSettings is what a revision freezes of its Compute: everything the
// executors render from, and nothing about how to connect. Its JSON is one
// object: the kind and name beside the kind's own frozen settings, so that
// the revision ids computed from it do not depend on how the types nest.
type ComputeSettings struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Settings are the kind's frozen settings: a KubernetesSettings, an
	// SSHSettings, or the type of a kind registered outside this package.
	// A value, never a pointer; it must encode as a JSON object (or nil).
	Settings any `json:"-"`
}

// Kubernetes returns the frozen settings of a Kubernetes compute; the zero
// value on another kind.
func (s ComputeSettings) Kubernetes() KubernetesSettings {
	return SettingsOf[KubernetesSettings](s.Settings)
}

// SSH returns the frozen settings of an SSH compute; the zero value on
// another kind.
func (s ComputeSettings) SSH() SSHSettings { return SettingsOf[SSHSettings](s.Settings) }

// WithKubernetes returns a copy of s whose frozen Kubernetes settings edit
// has changed.
func (s ComputeSettings) WithKubernetes(edit func(*KubernetesSettings)) ComputeSettings {
	s.Settings = edited(s.Settings, edit)
	return s
}

// WithSSH returns a copy of s whose frozen SSH settings edit has changed.
func (s ComputeSettings) WithSSH(edit func(*SSHSettings)) ComputeSettings {
	s.Settings = edited(s.Settings, edit)
	return s
}

// MarshalJSON writes the kind and name and the kind's settings as one
// object.
func (s ComputeSettings) MarshalJSON() ([]byte, error) {
	head, err := json.Marshal(struct {
		Kind string `json:"kind"`
		Name string `json:"name"`
	}{s.Kind, s.Name})
	if err != nil || s.Settings == nil {
		return head, err
	}
	rest, err := json.Marshal(s.Settings)
	if err != nil {
		return nil, err
	}
	if len(rest) < 2 || rest[0] != '{' {
		return nil, fmt.Errorf("admission: the settings of compute kind %q encode as %.20s, not an object", s.Kind, rest)
	}
	if string(rest) == "{}" {
		return head, nil
	}
	return append(append(head[:len(head)-1], ','), rest[1:]...), nil
}

// KubernetesSettings is what a revision freezes of a Kubernetes compute.
type KubernetesSettings struct {
	Namespace    string `json:"namespace,omitempty"`
	RuntimeImage string `json:"runtime_image,omitempty"`
	CodexImage   string `json:"codex_image,omitempty"`
	CPUMillis    int64  `json:"cpu_millis,omitempty"`
	MemoryLimit  string `json:"memory_limit,omitempty"`
	// NativeWorkerSupport admits nothing any more (ND6); it stays frozen
	// so that the revisions of the computes that set it keep their ids.
	NativeWorkerSupport bool `json:"native_worker_support,omitempty"`
	// PodAnnotations are the operator's annotations on every runtime Pod.
	PodAnnotations map[string]string `json:"pod_annotations,omitempty"`
	// State is the gateway's persistent state claim; nil: an emptyDir.
	State *StateClaim `json:"state,omitempty"`
	// Placement and pulling of every runtime Pod. Each is omitted while
	// unset, so that a compute that sets none keeps its revision ids.
	NodeSelector      map[string]string `json:"node_selector,omitempty"`
	Tolerations       []Toleration      `json:"tolerations,omitempty"`
	PriorityClassName string            `json:"priority_class_name,omitempty"`
	// PodLabels are the operator's labels on every runtime Pod, beside the
	// identity labels (LG4), which win.
	PodLabels map[string]string `json:"pod_labels,omitempty"`
	// CPURequestMillis and MemoryRequest are the runtime containers'
	// requests; unset (or equal to the limit) they are the limits.
	CPURequestMillis int64    `json:"cpu_request_millis,omitempty"`
	MemoryRequest    string   `json:"memory_request,omitempty"`
	ImagePullSecrets []string `json:"image_pull_secrets,omitempty"`
	ImagePullPolicy  string   `json:"image_pull_policy,omitempty"`
	// EphemeralStorageLimit is the runtime containers' ephemeral-storage
	// limit and every emptyDir's size limit; omitted while it is the
	// default (DefaultEphemeralStorageLimit), so that the computes that
	// keep it keep their revision ids.
	EphemeralStorageLimit string `json:"ephemeral_storage_limit,omitempty"`
}

// DefaultEphemeralStorageLimit is the ephemeral-storage limit of a runtime
// container, and the size limit of each emptyDir, unless the compute sets
// another.
const DefaultEphemeralStorageLimit = "2Gi"

// EphemeralStorage is the frozen ephemeral-storage limit as a quantity.
func (k KubernetesSettings) EphemeralStorage() resource.Quantity {
	if q, err := resource.ParseQuantity(k.EphemeralStorageLimit); err == nil && k.EphemeralStorageLimit != "" {
		return q
	}
	return resource.MustParse(DefaultEphemeralStorageLimit)
}

// SSHSettings is what a revision freezes of an SSH compute.
type SSHSettings struct {
	Host         string `json:"host,omitempty"`
	Port         int64  `json:"port,omitempty"`
	OpenClawPath string `json:"openclaw_path,omitempty"`
	ConfigDir    string `json:"config_dir,omitempty"`
}

// StateClaim is the shape of an agent's state claim as a revision holds
// it: a change gives the agent a new revision, whose apply resizes the
// claim (or refuses what Kubernetes cannot change in place).
type StateClaim struct {
	Size         string `json:"size"`
	StorageClass string `json:"storage_class,omitempty"`
	AccessMode   string `json:"access_mode"`
}

// computeSettings is what the revision freezes of its Compute, as the
// kind's row says (AD3).
func computeSettings(c Compute) ComputeSettings {
	if row := kindRow(c.Kind); row.Settings != nil {
		return row.Settings(c)
	}
	return ComputeSettings{Kind: c.Kind, Name: c.Name}
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// withAttr points document errors at the input attribute that carried the
// document, keeping any attribute an error already names.
func withAttr(errs Errors, attr string) Errors {
	for _, e := range errs {
		if len(e.Attribute) == 0 {
			e.Attribute = []string{attr}
		}
	}
	return errs
}
