package admission

import "github.com/occ-platform/terraform-provider-occ/internal/occconfig"

// Harness names (HM1, MR3).
const (
	HarnessOpenClaw = "openclaw"
	HarnessCodex    = "codex"
)

// Execution modes (HM1, HM2).
const (
	ModeEmbedded  = "embedded"
	ModeDedicated = "dedicated"
)

// Compute kinds; what each supports is its row in kindTable (kinds.go).
const (
	KindKubernetes = "kubernetes"
	KindSSH        = "ssh"
)

// Auth methods of a credential source (AU1 to AU5).
const (
	MethodAPIKey           = "api_key"
	MethodCodexPAT         = "codex_pat"
	MethodCredentialSource = "credential_source"
	MethodRuntime          = "runtime"
)

// Credential-gateway source types (AU3).
const (
	SourceTypeOpenAIAPIKey = "openai_api_key"
	SourceTypeCodexOAuth   = "codex_oauth"
)

// Logging ownership (AD4, AD5).
const (
	LoggingPlatform = "platform"
	LoggingDriver   = "driver"
)

// Sandbox facets a driver may provide (ND4).
const (
	FacetNetworking = "networking"
	FacetFilesystem = "filesystem"
	FacetProcess    = "process"
)

// Known value sets, for validators and the matrix tests.
var (
	Harnesses      = []string{HarnessOpenClaw, HarnessCodex}
	ExecutionModes = []string{ModeEmbedded, ModeDedicated}
	ComputeKinds   = kindNames() // the kind table's rows (kinds.go)
	AuthMethods    = []string{MethodAPIKey, MethodCodexPAT, MethodCredentialSource, MethodRuntime}
	SourceTypes    = []string{SourceTypeOpenAIAPIKey, SourceTypeCodexOAuth}
	Facets         = []string{FacetNetworking, FacetFilesystem, FacetProcess}
	LogLevels      = []string{"silent", "fatal", "error", "warn", "info", "debug", "trace"}
	SandboxDrivers = []string{DriverOpenShell}
)

// DriverOpenShell is the bundled sandbox driver (OS1).
const DriverOpenShell = "openshell"

// Compute is where Agents run, as admission sees it: its name and kind,
// and the kind's own settings.
type Compute struct {
	ID   string
	Name string
	Kind string
	// Settings are the kind's own: a KubernetesCompute, an SSHCompute, or
	// the type of a kind registered outside this package (RegisterKind),
	// which only that kind's code reads. Each is a value, never a pointer,
	// so that a copied Compute shares nothing with the original.
	Settings any
}

// SettingsOf returns a kind's settings held in a Compute's or a
// ComputeSettings' Settings as T; the zero T when they are another type
// (another kind's).
func SettingsOf[T any](settings any) T {
	v, _ := settings.(T)
	return v
}

// edited returns settings as T, edited by edit (from the zero T when they
// are another kind's).
func edited[T any](settings any, edit func(*T)) T {
	v := SettingsOf[T](settings)
	edit(&v)
	return v
}

// Kubernetes returns a Kubernetes compute's settings; the zero value on
// another kind.
func (c Compute) Kubernetes() KubernetesCompute { return SettingsOf[KubernetesCompute](c.Settings) }

// SSH returns an SSH compute's settings; the zero value on another kind.
func (c Compute) SSH() SSHCompute { return SettingsOf[SSHCompute](c.Settings) }

// WithKubernetes returns a copy of c whose Kubernetes settings edit has
// changed (starting from the zero value on another kind).
func (c Compute) WithKubernetes(edit func(*KubernetesCompute)) Compute {
	c.Settings = edited(c.Settings, edit)
	return c
}

// WithSSH returns a copy of c whose SSH settings edit has changed
// (starting from the zero value on another kind).
func (c Compute) WithSSH(edit func(*SSHCompute)) Compute {
	c.Settings = edited(c.Settings, edit)
	return c
}

// KubernetesCompute is a Kubernetes compute's settings.
type KubernetesCompute struct {
	Namespace           string
	RuntimeImage        string // empty: the pinned runtime image
	NativeWorkerSupport bool   // deprecated declaration of a custom runtime image; admits nothing (ND6)
	CodexImage          string // empty: the pinned Codex image
	CPUMillis           int64  // CPU limit in millicores; 0 when not set
	MemoryLimit         string
	NodeWorkers         int64 // HM6; 0 means the default
	PodAnnotations      map[string]string
	// Pod placement and pull settings of every runtime Pod; zero values
	// render what Kubernetes defaults to.
	NodeSelector      map[string]string
	Tolerations       []Toleration
	PriorityClassName string
	PodLabels         map[string]string // beside the identity labels, which win (LG4)
	CPURequestMillis  int64             // 0: the CPU limit
	MemoryRequest     string            // "": the memory limit
	// EphemeralStorageLimit bounds each runtime container's node-local
	// storage (logs, writable layer) and each of its Pods' emptyDirs;
	// "": DefaultEphemeralStorageLimit.
	EphemeralStorageLimit string
	ImagePullSecrets      []string
	ImagePullPolicy       string // "": Kubernetes' default
	LoggingOwnership      string
	LoggingLevel          string
	SandboxDriver         *SandboxDriver
	CredentialGateway     *CredentialGateway
	// State is the gateway's persistent state claim; nil keeps the state
	// on an emptyDir (throwaway agents).
	State *State
	// NetworkPolicy is applied per Agent on every deploy and never frozen
	// into a revision (KubernetesSettings leaves it out): changing it
	// restarts nothing.
	NetworkPolicy NetworkPolicy
	// Exposure is the gateway Service's type and annotations, likewise
	// applied on every deploy and never frozen into a revision.
	Exposure Exposure
}

// SSHCompute is an SSH compute's settings.
type SSHCompute struct {
	Host         string
	Port         int64
	OpenClawPath string
	ConfigDir    string
	// How to reach the SSH host: used by the executor, never frozen into a
	// revision (SSHSettings leaves them out).
	HostKey               string // one or more public keys, one per line
	User                  string
	InsecureIgnoreHostKey bool
	Bastion               *Bastion // nil: connect to Host directly
}

// Bastion is the jump host an SSH compute's host is reached through (as
// OpenSSH's ProxyJump). HostKey holds one or more public keys, one per
// line; User "" is the compute's login user.
type Bastion struct {
	Host    string
	Port    int64
	User    string
	HostKey string
}

// State is the Kubernetes compute's claim for each agent's gateway state
// (its state directory and main workspace, /home/node): one
// PersistentVolumeClaim per agent, kept across revisions and Pod restarts.
type State struct {
	// Size, StorageClass ("" for the cluster's default class) and
	// AccessMode shape the claim; they are part of the revision.
	Size         string
	StorageClass string
	AccessMode   string
	// RetainOnDestroy keeps the claim when the agent is destroyed; it
	// shapes nothing that runs, so it is not part of the revision.
	RetainOnDestroy bool
	// AdoptRetained lets a new agent mount the claim an earlier destroy
	// of an agent of the same name kept; not part of the revision.
	AdoptRetained bool
}

// Claim is what a revision freezes of the state claim.
func (s *State) Claim() *StateClaim {
	if s == nil {
		return nil
	}
	return &StateClaim{Size: s.Size, StorageClass: s.StorageClass, AccessMode: s.AccessMode}
}

// Toleration is one toleration of the runtime Pods, shaped like the
// Kubernetes type: Operator is "Equal" or "Exists", Effect one of
// "NoSchedule", "PreferNoSchedule", "NoExecute", or empty for all effects.
type Toleration struct {
	Key               string `json:"key,omitempty"`
	Operator          string `json:"operator,omitempty"`
	Value             string `json:"value,omitempty"`
	Effect            string `json:"effect,omitempty"`
	TolerationSeconds *int64 `json:"toleration_seconds,omitempty"`
}

// Image pull policies a Compute may set (unset: Kubernetes' default).
var ImagePullPolicies = []string{"Always", "IfNotPresent", "Never"}

// Toleration operators and effects, as Kubernetes has them.
var (
	TolerationOperators = []string{"Equal", "Exists"}
	TolerationEffects   = []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}
)

// SandboxDriver is the Compute's optional sandbox driver (ND4).
type SandboxDriver struct {
	Name            string
	Facets          []string
	RequiredProfile string
	// GatewayNamespace and GatewayService locate the driver's gateway in
	// the cluster; they shape no revision.
	GatewayNamespace string
	GatewayService   string
	// Unavailable is true while the driver's gateway is not ready (ND5);
	// known only from a live read, false at plan.
	Unavailable bool
	// NotInstalled is true when a live read found the driver's API (the
	// agent-sandbox Sandbox resource) not served by the cluster: the
	// compute then has no qualifying driver (ND5). False at plan.
	NotInstalled bool
}

// CredentialGateway is the Compute's optional credential gateway (AU3, AU4).
type CredentialGateway struct {
	Name string
}

// SecretRef names an existing Kubernetes Secret and key.
type SecretRef struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// CredentialSource is where the model credential comes from.
type CredentialSource struct {
	ID         string
	Name       string
	Method     string
	Generation int64
	// ComputeID is the Compute the source lives in (Secret-backed and
	// ServiceAccount sources); empty when the source is not tied to one.
	ComputeID       string
	HasValue        bool // a write-only value the provider turns into a Secret
	SecretName      string
	SecretRef       *SecretRef
	ServiceAccount  string
	SourceType      string
	EnvironmentFile string
}

// Configuration is a saved native configuration with its identity.
type Configuration struct {
	ID             string
	Name           string
	Generation     int64
	Document       occconfig.Document
	SecretBindings map[string]SecretRef
}

// Agent is the Agent's own settings.
type Agent struct {
	Name string
	// Harness is the Agent-level runtime policy; empty when omitted (MR5).
	Harness string
	// ExecutionMode is the planned mode; HM2's default and keep-on-update
	// are applied by the caller through DefaultExecutionMode.
	ExecutionMode string
}

// Input is everything one deployment authorizes (AD1).
type Input struct {
	Agent         Agent
	Configuration Configuration
	Compute       Compute
	Source        CredentialSource
}
