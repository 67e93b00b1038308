package admission

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// KindSupport is one row of the compute-kind table: what a compute kind
// supports. The rules that differ by kind (HM1, AU4, AU5, AU6, ND4 to ND6,
// PR11, SS1, SS2) read the row of the Compute's kind instead of naming a
// kind, so that another compute kind is one more row in kindTable.
type KindSupport struct {
	Kind string
	// Runs are the harness × execution mode combinations the kind runs
	// (HM1, SS1), in the order refusals list them.
	Runs []HarnessMode
	// AuthMethods are the auth methods an Agent's credential source may use
	// on the kind, and a credential source living in it may have (AU5, SS1).
	AuthMethods []string
	// SecretBindings is true when the kind projects a Configuration's
	// secret bindings (Kubernetes Secrets) into the gateway (AU6).
	SecretBindings bool
	// SandboxDriver is true when a compute of the kind may have a sandbox
	// driver (ND4): with it come the driver's transform (AD2), the
	// Sandbox of a dedicated harness, checked live before the first write
	// (ND5), and the paired OpenShell sandbox of a credential_source
	// binding (AU3).
	SandboxDriver bool
	// StartupProbe is true when the platform runs the native model probe
	// before serving, so the primary provider's transport settings must be
	// literal (PR1, PR11). An SSH host is checked for readiness only (SS2).
	StartupProbe bool
	// DriverLogging is true when the kind's compute driver is one the
	// platform trusts to declare driver-managed runtime logging (AD5): the
	// bundled Kubernetes compute, whose runtime Pods the cluster's own
	// collection reads and whose operator sets logging.ownership on the
	// compute (never an Agent or a Configuration). Elsewhere the platform
	// owns logging and a declaration of driver ownership is refused.
	DriverLogging bool
	// Settings is what a revision freezes of a compute of the kind (AD3).
	Settings func(Compute) ComputeSettings
	// PlatformKeys is the wiring render writes into the gateway document
	// of a revision on the kind running harness in mode, and admission
	// refuses other values of (AD3).
	PlatformKeys func(harness, mode string) []PlatformKey
	// UserGatewayPort is true when gateway.port is the user's on the kind
	// (agents sharing an SSH host need distinct ports): admission checks
	// it is a port and writes OpenClaw's default where the document has
	// none.
	UserGatewayPort bool
	// Words name the kind in refusals.
	Words KindWords
}

// HarnessMode is one harness in one execution mode (HM1).
type HarnessMode struct {
	Harness string
	Mode    string
}

// KindWords are the phrases refusals name a kind with.
type KindWords struct {
	Title string // "Kubernetes"
	Noun  string // "a Kubernetes compute"
	// Is completes `compute "x" is …`: "Kubernetes", "an SSH host".
	Is string
	// CredentialNote says how a kind with a single auth method receives
	// the credential ("systemd loads the operator's credentials file").
	CredentialNote string
	// BindingsInstead says where channel credentials go on a kind that
	// takes no secret bindings.
	BindingsInstead string
}

// kindTable is every compute kind and what it supports (RULES.md HM1, AU5,
// AU6, ND4, PR1, SS1, SS2).
var kindTable = []KindSupport{
	{
		Kind: KindKubernetes,
		Runs: []HarnessMode{
			{HarnessOpenClaw, ModeEmbedded},
			{HarnessCodex, ModeDedicated},
			{HarnessOpenClaw, ModeDedicated}, // native worker: the kind runs it, ND6 refuses it (CheckNativeOpenClaw)
		},
		AuthMethods:    []string{MethodAPIKey, MethodCodexPAT, MethodCredentialSource},
		SecretBindings: true,
		SandboxDriver:  true,
		StartupProbe:   true,
		DriverLogging:  true,
		Settings:       kubernetesSettings,
		PlatformKeys:   kubernetesPlatformKeys,
		Words:          KindWords{Title: "Kubernetes", Noun: "a Kubernetes compute", Is: "Kubernetes"},
	},
	{
		Kind:            KindSSH,
		Runs:            []HarnessMode{{HarnessOpenClaw, ModeEmbedded}},
		AuthMethods:     []string{MethodRuntime},
		Settings:        sshSettings,
		PlatformKeys:    sshPlatformKeys,
		UserGatewayPort: true,
		Words: KindWords{Title: "SSH", Noun: "an SSH compute", Is: "an SSH host",
			CredentialNote: "systemd loads the operator's credentials file",
			BindingsInstead: "add each as a NAME=value line to the environment_file of the agent's runtime credential source, " +
				"which systemd loads at every start of the unit (outside version immutability, like the model credential); " +
				"the document keeps referring to it as ${NAME}"},
	},
}

// RegisterKind adds a compute kind's row to the table: what another kind
// (one outside this package, or one only tests run) needs admission to
// know. It is meant for package initialisation (not safe beside running
// admissions) and refuses a row without a kind, its settings or its
// words, and a kind already registered.
func RegisterKind(k KindSupport) error {
	switch {
	case k.Kind == "" || k.Settings == nil || k.Words.Title == "" || k.Words.Noun == "" || k.Words.Is == "":
		return fmt.Errorf("admission: compute kind %q: a row needs its kind, its Settings and its Words", k.Kind)
	case slices.ContainsFunc(kindTable, func(r KindSupport) bool { return r.Kind == k.Kind }):
		return fmt.Errorf("admission: compute kind %q is registered already", k.Kind)
	}
	kindTable = append(kindTable, k)
	return nil
}

// Kinds returns the table's rows, in order.
func Kinds() []KindSupport { return slices.Clone(kindTable) }

// KindOf returns the row of a compute kind.
func KindOf(kind string) (KindSupport, bool) {
	for _, k := range kindTable {
		if k.Kind == kind {
			return k, true
		}
	}
	return KindSupport{}, false
}

// kindRow is the row of a compute kind; an unknown kind (which HM1 refuses
// before anything reads its row) supports nothing.
func kindRow(kind string) KindSupport {
	if k, ok := KindOf(kind); ok {
		return k
	}
	return KindSupport{Kind: kind, Words: KindWords{Title: kind, Noun: fmt.Sprintf("a %q compute", kind), Is: fmt.Sprintf("of kind %q", kind)}}
}

// RunsHarness reports whether the kind runs harness in mode (HM1).
func (k KindSupport) RunsHarness(harness, mode string) bool {
	return slices.Contains(k.Runs, HarnessMode{harness, mode})
}

// AcceptsMethod reports whether the kind takes auth method m (AU5).
func (k KindSupport) AcceptsMethod(m string) bool { return slices.Contains(k.AuthMethods, m) }

// kindsWhere are the rows for which ok holds, in table order.
func kindsWhere(ok func(KindSupport) bool) []KindSupport {
	var out []KindSupport
	for _, k := range kindTable {
		if ok(k) {
			out = append(out, k)
		}
	}
	return out
}

func kindNames() []string {
	out := make([]string, len(kindTable))
	for i, k := range kindTable {
		out[i] = k.Kind
	}
	return out
}

// titles and nouns of rows, for refusals.
func titles(ks []KindSupport) string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.Words.Title
	}
	return orList(out)
}

func nouns(ks []KindSupport) string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.Words.Noun
	}
	return orList(out)
}

// harnessTitles name the harnesses in prose.
var harnessTitles = map[string]string{HarnessOpenClaw: "OpenClaw", HarnessCodex: "Codex"}

// modeNotes say what a harness in a mode is, for HM1's advice.
var modeNotes = map[HarnessMode]string{
	{HarnessOpenClaw, ModeEmbedded}:  "one gateway with the built-in harness",
	{HarnessCodex, ModeDedicated}:    "a gateway beside a separate Codex app server",
	{HarnessOpenClaw, ModeDedicated}: "a gateway beside a native OpenClaw node host",
}

// describe is a combination as a refusal advises it.
func (hm HarnessMode) describe() string {
	return fmt.Sprintf("%s %s (harness = %q, execution_mode = %q)", hm.Mode, harnessTitles[hm.Harness], hm.Harness, hm.Mode)
}

// orList joins items as prose: "a", "a or b", "a, b or c".
func orList(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}

func kubernetesSettings(c Compute) ComputeSettings {
	k := c.Kubernetes()
	return ComputeSettings{Kind: c.Kind, Name: c.Name, Settings: KubernetesSettings{
		Namespace:    k.Namespace,
		RuntimeImage: firstNonEmpty(k.RuntimeImage, PinnedRuntimeImage), CodexImage: firstNonEmpty(k.CodexImage, PinnedCodexImage),
		CPUMillis: k.CPUMillis, MemoryLimit: k.MemoryLimit, NativeWorkerSupport: k.NativeWorkerSupport,
		PodAnnotations: k.PodAnnotations, State: k.State.Claim(),
		NodeSelector: k.NodeSelector, Tolerations: slices.Clone(k.Tolerations), PriorityClassName: k.PriorityClassName,
		PodLabels:        k.PodLabels,
		CPURequestMillis: cpuRequest(k), MemoryRequest: memoryRequest(k),
		ImagePullSecrets: slices.Clone(k.ImagePullSecrets), ImagePullPolicy: k.ImagePullPolicy,
		EphemeralStorageLimit: ephemeralStorage(k),
	}}
}

// ephemeralStorage is the frozen ephemeral-storage limit: "" while it is
// unset or the default quantity, however spelled ("2Gi", "2048Mi").
func ephemeralStorage(c KubernetesCompute) string {
	if c.EphemeralStorageLimit == "" {
		return ""
	}
	q, err := resource.ParseQuantity(c.EphemeralStorageLimit)
	if err == nil && q.Cmp(resource.MustParse(DefaultEphemeralStorageLimit)) == 0 {
		return ""
	}
	return c.EphemeralStorageLimit
}

// cpuRequest is the frozen CPU request: 0 (the limit) when it is unset or
// spelled out equal to the limit, so that neither changes a revision id.
func cpuRequest(c KubernetesCompute) int64 {
	if c.CPURequestMillis == c.CPUMillis {
		return 0
	}
	return c.CPURequestMillis
}

// memoryRequest is the frozen memory request: "" (the limit) when it is
// unset or the same quantity as the limit, however spelled ("4Gi", "4096Mi").
func memoryRequest(c KubernetesCompute) string {
	if c.MemoryRequest == "" {
		return ""
	}
	req, err := resource.ParseQuantity(c.MemoryRequest)
	limit, lerr := resource.ParseQuantity(c.MemoryLimit)
	if err == nil && lerr == nil && req.Cmp(limit) == 0 {
		return ""
	}
	return c.MemoryRequest
}

func sshSettings(c Compute) ComputeSettings {
	s := c.SSH()
	return ComputeSettings{Kind: c.Kind, Name: c.Name, Settings: SSHSettings{Host: s.Host, Port: s.Port, OpenClawPath: s.OpenClawPath, ConfigDir: s.ConfigDir}}
}
