package admission

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// authCase is one admission of an auth binding: the delivery expected on
// success, or the refusal.
type authCase struct {
	name string
	in   Input
	want CredentialDelivery
	ref  *refusal
}

func runAuthCases(t *testing.T, cases []authCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rev, errs := Admit(tc.in)
			if tc.ref != nil {
				checkRefusal(t, errs, *tc.ref)
				return
			}
			if len(errs) > 0 {
				t.Fatalf("refused: %v", errs)
			}
			if rev.Credential != tc.want {
				t.Errorf("delivery = %+v, want %+v", rev.Credential, tc.want)
			}
		})
	}
}

func embeddedWithModel(model string) Input {
	in := k8sEmbeddedInput()
	in.Agent.Harness = HarnessOpenClaw // makes openai/codex admissible (MR5)
	in.Configuration.Document = modelDoc(model)
	return in
}

// rule AU1
func TestAU1_APIKeyEnvByProvider(t *testing.T) {
	unknownMethod := k8sEmbeddedInput()
	unknownMethod.Source.Method = "oauth"
	runAuthCases(t, []authCase{
		{"embedded anthropic", k8sEmbeddedInput(),
			CredentialDelivery{Method: MethodAPIKey, Consumer: ConsumerGateway, EnvVar: "ANTHROPIC_API_KEY"}, nil},
		{"embedded openai", embeddedWithModel(openaiModel),
			CredentialDelivery{Method: MethodAPIKey, Consumer: ConsumerGateway, EnvVar: "OPENAI_API_KEY"}, nil},
		{"dedicated codex: only codex, stdin login", dedicatedCodexInput(),
			CredentialDelivery{Method: MethodAPIKey, Consumer: ConsumerHarness, EnvVar: "OPENAI_API_KEY", LoginMode: "api_key_stdin"}, nil},
		{"embedded provider with neither variable", embeddedWithModel("google/gemini-2.5-pro"), CredentialDelivery{},
			&refusal{InvalidRequest, "AU1", attrSource, ""}},
		{"unknown method", unknownMethod, CredentialDelivery{},
			&refusal{InvalidRequest, "AU1", attrSource, ""}},
	})
	for p, want := range map[string]string{"openai": "OPENAI_API_KEY", "codex": "OPENAI_API_KEY", "openai-compatible": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "google": "", "": ""} {
		if got := ProviderKeyEnv(p); got != want {
			t.Errorf("ProviderKeyEnv(%q) = %q, want %q", p, got, want)
		}
	}
}

// rule AU2
func TestAU2_CodexPATDedicatedCodexOnly(t *testing.T) {
	pat := CredentialDelivery{Method: MethodCodexPAT, Consumer: ConsumerHarness, EnvVar: "CODEX_ACCESS_TOKEN", LoginMode: "codex_pat"}
	withSource := func(in Input, s CredentialSource) Input { in.Source = s; return in }
	runAuthCases(t, []authCase{
		{"dedicated codex, secret", withSource(dedicatedCodexInput(), patSource(k8sComputeID)), pat, nil},
		// Issue 26: a Kubernetes ServiceAccount token is not a Codex access
		// token; such a source could never log in, so it is refused.
		{"dedicated codex, managed service account", withSource(dedicatedCodexInput(), saPATSource(k8sComputeID)), CredentialDelivery{},
			&refusal{InvalidRequest, "AU2", attrSource, ""}},
		{"embedded openclaw", withSource(k8sEmbeddedInput(), patSource(k8sComputeID)), CredentialDelivery{},
			&refusal{InvalidRequest, "AU2", attrSource, ""}},
	})
	if e := CheckAccountSource("codex-account", attrSource); e == nil || !strings.Contains(e.Message, "is not a Codex access token") || !strings.Contains(e.Message, "secret_ref") {
		t.Errorf("the refusal of an account source does not say why and what to use: %v", e)
	}
	if e := CheckAccountSource("", attrSource); e != nil {
		t.Errorf("a source that names no account refused: %v", e)
	}
	// The source freezes its reference, never a value.
	rev := admitOK(t, withSource(dedicatedCodexInput(), patSource(k8sComputeID)))
	if rev.Source.SecretName != "codex-pat" || rev.Source.SecretKey != "token" {
		t.Errorf("frozen secret source = %+v", rev.Source)
	}
}

// rule AU3
func TestAU3_CredentialSourceRequirements(t *testing.T) {
	// The harness receives the OpenAI key's placeholder in OPENAI_API_KEY,
	// and Codex logs in with it; codex-oauth delivers no key at all.
	placeholder := CredentialDelivery{Method: MethodCredentialSource, Consumer: ConsumerProxy, Placeholder: true}
	codexPlaceholder := placeholder
	codexPlaceholder.EnvVar, codexPlaceholder.LoginMode = EnvOpenAIAPIKey, LoginAPIKeyStdin
	codexWith := func(st string) Input { in := credentialGatewayCodexInput(); in.Source = credSource(st); return in }
	noGateway := codexWith(SourceTypeOpenAIAPIKey)
	noGateway.Compute = noGateway.Compute.WithKubernetes(func(k *KubernetesCompute) { k.CredentialGateway = nil })
	noDriver := codexWith(SourceTypeOpenAIAPIKey)
	noDriver.Compute = noDriver.Compute.WithKubernetes(func(k *KubernetesCompute) { k.SandboxDriver = nil })
	otherDriver := codexWith(SourceTypeOpenAIAPIKey)
	otherDriver.Compute = otherDriver.Compute.WithKubernetes(func(k *KubernetesCompute) { k.SandboxDriver = &SandboxDriver{Name: "gvisor", Facets: Facets} })
	embedded := k8sEmbeddedInput()
	embedded.Agent.Harness = HarnessOpenClaw
	embedded.Compute = embedded.Compute.WithKubernetes(func(k *KubernetesCompute) { k.SandboxDriver = fullDriver() })
	embedded.Compute = embedded.Compute.WithKubernetes(func(k *KubernetesCompute) { k.CredentialGateway = gateway() })
	embedded.Source = credSource(SourceTypeOpenAIAPIKey)
	runAuthCases(t, []authCase{
		{"dedicated codex, openai api key", codexWith(SourceTypeOpenAIAPIKey), codexPlaceholder, nil},
		// The platform's experimental codex-oauth source cannot pass the
		// Codex probe as this provider renders it: refused (rule AU3, PR2).
		{"dedicated codex, codex-oauth", codexWith(SourceTypeCodexOAuth), CredentialDelivery{},
			&refusal{InvalidRequest, "AU3", attrSource, ""}},
		{"embedded openclaw", embedded, CredentialDelivery{},
			&refusal{InvalidRequest, "AU3", attrSource, ""}},
		{"no credential gateway", noGateway, CredentialDelivery{},
			&refusal{ResourceConflict, "AU3", attrSource, ""}},
		{"no sandbox driver", noDriver, CredentialDelivery{},
			&refusal{ResourceConflict, "AU3", attrSource, ""}},
		{"unknown source type", codexWith("anthropic_api_key"), CredentialDelivery{},
			&refusal{InvalidRequest, "AU3", attrSource, ""}},
		{"missing source type", codexWith(""), CredentialDelivery{},
			&refusal{InvalidRequest, "AU3", attrSource, ""}},
	})
	// A driver that is not OpenShell is not the paired sandbox (and is unknown, OS1).
	_, errs := Admit(otherDriver)
	if !errs.Has("AU3") || !errs.Has("OS1") {
		t.Errorf("non-OpenShell driver: %v, want AU3 and OS1", errs)
	}
	// No model Secret is projected: the frozen binding names none.
	rev := admitOK(t, codexWith(SourceTypeOpenAIAPIKey))
	if rev.Source.SecretName != "" || rev.Source.SecretKey != "" || rev.Source.SourceType != SourceTypeOpenAIAPIKey {
		t.Errorf("frozen source = %+v", rev.Source)
	}
	if rev.Sandbox == nil || rev.Sandbox.Driver != DriverOpenShell || rev.Sandbox.CredentialGateway != "cg-main" {
		t.Errorf("sandbox binding = %+v", rev.Sandbox)
	}
}

// rule AU4
func TestAU4_CredentialGatewayRejectsSecretMethods(t *testing.T) {
	gw := func(in Input) Input {
		in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.SandboxDriver = fullDriver() })
		in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.CredentialGateway = gateway() })
		return in
	}
	withSource := func(in Input, s CredentialSource) Input { in.Source = s; return in }
	cases := []authCase{
		{"credential_source behind the gateway", credentialGatewayCodexInput(),
			CredentialDelivery{Method: MethodCredentialSource, Consumer: ConsumerProxy, EnvVar: EnvOpenAIAPIKey, LoginMode: LoginAPIKeyStdin, Placeholder: true}, nil},
		{"api_key without a gateway", withSource(dedicatedCodexInput(), apiKeySource(k8sComputeID)),
			CredentialDelivery{Method: MethodAPIKey, Consumer: ConsumerHarness, EnvVar: "OPENAI_API_KEY", LoginMode: "api_key_stdin"}, nil},
		{"api_key, dedicated codex", gw(dedicatedCodexInput()), CredentialDelivery{}, &refusal{ResourceConflict, "AU4", attrSource, ""}},
		{"api_key, embedded openclaw", gw(k8sEmbeddedInput()), CredentialDelivery{}, &refusal{ResourceConflict, "AU4", attrSource, ""}},
		{"codex_pat secret", gw(withSource(dedicatedCodexInput(), patSource(k8sComputeID))), CredentialDelivery{}, &refusal{ResourceConflict, "AU4", attrSource, ""}},
		{"codex_pat service account", gw(withSource(dedicatedCodexInput(), saPATSource(k8sComputeID))), CredentialDelivery{}, &refusal{ResourceConflict, "AU4", attrSource, ""}},
		// On SSH the gateway cannot serve the agent; host credentials would bypass it.
		{"runtime on ssh with a gateway", func() Input {
			in := sshInput()
			in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.CredentialGateway = gateway() })
			return in
		}(), CredentialDelivery{}, &refusal{ResourceConflict, "AU4", attrSource, ""}},
	}
	runAuthCases(t, cases)
	_, errs := Admit(gw(dedicatedCodexInput()))
	if len(errs) != 1 || !strings.Contains(errs[0].Message, "cg-main") {
		t.Errorf("AU4 refusal should name the gateway: %v", errs)
	}
}

// rule AU5
func TestAU5_SSHRuntimeOnly(t *testing.T) {
	withSource := func(in Input, s CredentialSource) Input { in.Source = s; return in }
	runAuthCases(t, []authCase{
		{"ssh runtime", sshInput(), CredentialDelivery{Method: MethodRuntime, Consumer: ConsumerHost}, nil},
		{"ssh api_key", withSource(sshInput(), apiKeySource(sshComputeID)), CredentialDelivery{}, &refusal{ResourceConflict, "AU5", attrSource, ""}},
		{"ssh codex_pat", withSource(sshInput(), patSource(sshComputeID)), CredentialDelivery{}, &refusal{ResourceConflict, "AU5", attrSource, ""}},
		{"ssh credential_source", withSource(sshInput(), credSource(SourceTypeOpenAIAPIKey)), CredentialDelivery{}, &refusal{ResourceConflict, "AU5", attrSource, ""}},
		{"kubernetes runtime, embedded", withSource(k8sEmbeddedInput(), runtimeSource(k8sComputeID)), CredentialDelivery{}, &refusal{ResourceConflict, "AU5", attrSource, ""}},
		{"kubernetes runtime, dedicated codex", withSource(dedicatedCodexInput(), runtimeSource(k8sComputeID)), CredentialDelivery{}, &refusal{ResourceConflict, "AU5", attrSource, ""}},
	})
	// SSH readiness does not validate model auth, and the env file is a reference.
	rev := admitOK(t, sshInput())
	if rev.Source.EnvironmentFile != "/etc/openclaw/model.env" || rev.Credential.EnvVar != "" {
		t.Errorf("ssh revision source %+v delivery %+v", rev.Source, rev.Credential)
	}
	if rev.ComputeSettings.SSH().Host != "edge.example.com" || rev.ComputeSettings.SSH().ConfigDir != "/etc/openclaw" {
		t.Errorf("ssh compute settings = %v", rev.ComputeSettings)
	}
}

// rule AU6: a Configuration's secret bindings become the gateway's
// environment variables (upper case, '-' as '_'), sorted, frozen in the
// revision; names the platform sets or that carry the model credential,
// ambiguous names and bad keys are refused; an SSH compute refuses them.
func TestAU6_SecretBindings(t *testing.T) {
	ref := func(name, key string) SecretRef { return SecretRef{Name: name, Key: key} }
	for _, tc := range []struct {
		name     string
		bindings map[string]SecretRef
		want     []SecretBindingEnv
		refused  string // the binding named in the refusal
	}{
		{name: "none"},
		{name: "channel and embeddings", bindings: map[string]SecretRef{"telegram": ref("tg-bot", "token"), "memory-embeddings": ref("emb", "api.key")},
			want: []SecretBindingEnv{{"memory-embeddings", "MEMORY_EMBEDDINGS", ref("emb", "api.key")}, {"telegram", "TELEGRAM", ref("tg-bot", "token")}}},
		{name: "already upper case", bindings: map[string]SecretRef{"SLACK_BOT_TOKEN": ref("slack", "token")},
			want: []SecretBindingEnv{{"SLACK_BOT_TOKEN", "SLACK_BOT_TOKEN", ref("slack", "token")}}},
		{name: "model credential alias", bindings: map[string]SecretRef{"openai_api_key": ref("k", "v")}, refused: "OPENAI_API_KEY"},
		{name: "anthropic alias with dashes", bindings: map[string]SecretRef{"anthropic-api-key": ref("k", "v")}, refused: "ANTHROPIC_API_KEY"},
		{name: "platform prefix", bindings: map[string]SecretRef{"openclaw_config_path": ref("k", "v")}, refused: "OPENCLAW_CONFIG_PATH"},
		{name: "platform variable", bindings: map[string]SecretRef{"home": ref("k", "v")}, refused: "HOME"},
		{name: "not a variable", bindings: map[string]SecretRef{"9lives": ref("k", "v")}, refused: `"9lives"`},
		{name: "dot in name", bindings: map[string]SecretRef{"a.b": ref("k", "v")}, refused: `"a.b"`},
		{name: "ambiguous", bindings: map[string]SecretRef{"slack-token": ref("a", "v"), "slack_token": ref("b", "v")}, refused: "both become SLACK_TOKEN"},
		{name: "bad key", bindings: map[string]SecretRef{"telegram": ref("tg", "to ken")}, refused: `"to ken"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, errs := CheckSecretBindings(tc.bindings, []string{"secret_bindings"})
			if tc.refused != "" {
				if len(errs) != 1 || errs[0].Rule != "AU6" || errs[0].Class != InvalidRequest || !strings.Contains(errs[0].Message, tc.refused) ||
					len(errs[0].Attribute) != 2 || errs[0].Attribute[0] != "secret_bindings" {
					t.Fatalf("errs = %v, want one AU6 INVALID_REQUEST naming %s at secret_bindings[name]", errs, tc.refused)
				}
				in := k8sEmbeddedInput()
				in.Configuration.SecretBindings = tc.bindings
				if _, errs := Admit(in); !errs.Has("AU6") || !slices.Equal(errs[0].Attribute, []string{"configuration"}) {
					t.Fatalf("Admit errs = %v, want AU6 on configuration", errs)
				}
				return
			}
			if len(errs) > 0 || !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, %v; want %v", got, errs, tc.want)
			}
			in := k8sEmbeddedInput()
			in.Configuration.SecretBindings = tc.bindings
			rev := admitOK(t, in)
			if !slices.Equal(rev.SecretBindings, tc.want) {
				t.Fatalf("revision bindings %v, want %v", rev.SecretBindings, tc.want)
			}
		})
	}

	// The revision freezes them: another Secret is another revision.
	a, b := k8sEmbeddedInput(), k8sEmbeddedInput()
	a.Configuration.SecretBindings = map[string]SecretRef{"telegram": ref("tg-bot", "token")}
	b.Configuration.SecretBindings = map[string]SecretRef{"telegram": ref("tg-bot-2", "token")}
	if admitOK(t, a).ID() == admitOK(t, b).ID() {
		t.Error("a binding to another Secret kept the revision id")
	}
	if admitOK(t, k8sEmbeddedInput()).ID() != admitOK(t, func() Input {
		in := k8sEmbeddedInput()
		in.Configuration.SecretBindings = map[string]SecretRef{}
		return in
	}()).ID() {
		t.Error("an empty bindings map changed the revision id")
	}

	// SSH hosts have no Kubernetes Secrets to project.
	in := sshInput()
	in.Configuration.SecretBindings = map[string]SecretRef{"telegram": ref("tg-bot", "token")}
	if _, errs := Admit(in); len(errs) != 1 || errs[0].Rule != "AU6" || errs[0].Class != ResourceConflict {
		t.Fatalf("ssh with bindings: errs = %v, want one AU6 RESOURCE_CONFLICT", errs)
	}
}

// rule AU5: a credential source lives in a compute whose kind takes its
// method (CheckSourceCompute, which occ_credential_source calls): an SSH
// host holds only runtime credentials, Kubernetes rejects runtime; both
// 409, at the source's compute. A method that is not known is left to the
// method's validation.
func TestAU5_SourceComputeHoldsItsMethod(t *testing.T) {
	k8s, ssh := k8sCompute(), sshCompute()
	for _, tc := range []struct {
		name    string
		method  string
		c       Compute
		summary string // the message's first clause: the diagnostic's summary
	}{
		{"kubernetes api_key", MethodAPIKey, k8s, ""},
		{"kubernetes codex_pat", MethodCodexPAT, k8s, ""},
		{"kubernetes credential_source", MethodCredentialSource, k8s, ""},
		{"kubernetes runtime", MethodRuntime, k8s, "Kubernetes rejects the runtime method"},
		{"ssh runtime", MethodRuntime, ssh, ""},
		{"ssh api_key", MethodAPIKey, ssh, "an SSH compute holds only runtime credentials"},
		{"ssh codex_pat", MethodCodexPAT, ssh, "an SSH compute holds only runtime credentials"},
		{"ssh credential_source", MethodCredentialSource, ssh, "an SSH compute holds only runtime credentials"},
		{"unknown method", "oauth", ssh, ""},
		{"method not known yet", "", ssh, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := CheckSourceCompute(tc.method, tc.c)
			if tc.summary == "" {
				if e != nil {
					t.Fatalf("refused: %v", e)
				}
				return
			}
			if e == nil || e.Class != ResourceConflict || e.Rule != "AU5" || !slices.Equal(e.Attribute, attrCompute) {
				t.Fatalf("got %+v, want RESOURCE_CONFLICT AU5 at compute", e)
			}
			if !strings.HasPrefix(e.Message, tc.summary+": ") || !strings.Contains(e.Message, `"`+tc.c.Name+`"`) || !strings.Contains(e.Message, tc.method) {
				t.Errorf("message %q: want %q first, naming the compute and the method", e.Message, tc.summary)
			}
		})
	}
	// The words, as the provider has always answered them.
	if e := CheckSourceCompute(MethodRuntime, k8s); e.Message != `Kubernetes rejects the runtime method: compute "prod" is Kubernetes; method "runtime" exists only on SSH computes. Use api_key, codex_pat or credential_source` {
		t.Errorf("kubernetes runtime: %s", e.Message)
	}
	if e := CheckSourceCompute(MethodAPIKey, ssh); e.Message != `an SSH compute holds only runtime credentials: compute "edge" is an SSH host, where systemd loads the operator's credentials file; method "api_key" needs a Kubernetes compute` {
		t.Errorf("ssh api_key: %s", e.Message)
	}
	// The Agent's admission and the source's check agree, both from the kind table.
	for _, c := range []Compute{k8s, ssh} {
		for _, m := range AuthMethods {
			_, errs := CheckAuth(HarnessOpenClaw, ModeEmbedded, "anthropic", c, CredentialSource{Name: "s", Method: m, SourceType: SourceTypeOpenAIAPIKey})
			if (CheckSourceCompute(m, c) != nil) != errs.Has("AU5") {
				t.Errorf("%s on %s: source check %v, agent admission %v", m, c.Kind, CheckSourceCompute(m, c), errs)
			}
		}
	}
}

// rules AU1, AU2, AU3: the delivery names the variable and login mode the
// workloads get (render reads them); a placeholder delivery encodes as it
// always has, so that its revision keeps its content address.
func TestAU3_PlaceholderDeliveryEncoding(t *testing.T) {
	for _, tc := range []struct {
		d    CredentialDelivery
		want string
	}{
		{CredentialDelivery{Method: MethodCredentialSource, Consumer: ConsumerProxy, EnvVar: EnvOpenAIAPIKey, LoginMode: LoginAPIKeyStdin, Placeholder: true},
			`{"method":"credential_source","consumer":"sandbox-egress-proxy","placeholder":true}`},
		{CredentialDelivery{Method: MethodCredentialSource, Consumer: ConsumerProxy, Placeholder: true},
			`{"method":"credential_source","consumer":"sandbox-egress-proxy","placeholder":true}`},
		{CredentialDelivery{Method: MethodAPIKey, Consumer: ConsumerHarness, EnvVar: EnvOpenAIAPIKey, LoginMode: LoginAPIKeyStdin},
			`{"method":"api_key","consumer":"harness","env_var":"OPENAI_API_KEY","login_mode":"api_key_stdin"}`},
		{CredentialDelivery{Method: MethodRuntime, Consumer: ConsumerHost}, `{"method":"runtime","consumer":"host"}`},
	} {
		b, err := json.Marshal(tc.d)
		if err != nil || string(b) != tc.want {
			t.Errorf("encoding of %+v = %s, %v; want %s", tc.d, b, err, tc.want)
		}
	}
}

// rules AU3, PR2: the codex_oauth credential source is refused at plan with
// INVALID_REQUEST at harness_auth.source, naming the source type, why, and
// what to use instead (dedicated Codex is the one harness a credential
// gateway serves: dedicated OpenClaw is refused before, ND6);
// openai_api_key is admitted.
func TestAU3_CodexOAuthIsRefused(t *testing.T) {
	codex := credentialGatewayCodexInput()
	codex.Source = credSource(SourceTypeCodexOAuth)
	_, errs := Admit(codex)
	checkRefusal(t, errs, refusal{InvalidRequest, "AU3", attrSource, ""})
	for _, want := range []string{`"codex_oauth"`, "PR2", `source_type = "openai_api_key"`} {
		if !strings.Contains(errs[0].Message, want) {
			t.Errorf("refusal %q does not say %s", errs[0].Message, want)
		}
	}
	admitOK(t, credentialGatewayCodexInput())
}
