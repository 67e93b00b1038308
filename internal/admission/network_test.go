package admission

import (
	"fmt"
	"strings"
	"testing"
)

// The model endpoints a document names: every provider's literal http(s)
// baseUrl (default port by scheme), and the primary model's built-in
// default; loopback, environment references and unparsable URLs are left
// out.
func TestModelEndpoints(t *testing.T) {
	for _, c := range []struct {
		name, doc, primary string
		want               string
	}{
		{"built-in default", `{}`, anthropicModel, `anthropic@:443`},
		{"custom port", `{models: {providers: {local: {baseUrl: "http://10.1.2.3:8080/v1"}}}}`, "local/m", `local@10.1.2.3:8080`},
		{"http default port", `{models: {providers: {local: {baseUrl: "http://llm.internal/v1"}}}}`, "local/m", `local@llm.internal:80`},
		{"https default port", `{models: {providers: {anthropic: {baseUrl: "https://proxy.example.com"}}}}`, anthropicModel, `anthropic@proxy.example.com:443`},
		{"every provider, sorted", `{models: {providers: {b: {baseUrl: "http://b:81"}, a: {baseUrl: "https://[2001:db8::1]:8443"}}}}`, "b/m", `a@2001:db8::1:8443 b@b:81`},
		{"loopback", `{models: {providers: {local: {baseUrl: "http://127.0.0.1:9000"}, l2: {baseUrl: "http://localhost:9"}}}}`, "local/m", ``},
		{"environment reference", `{models: {providers: {local: {baseUrl: "${BASE}"}}}}`, "local/m", ``},
		{"not a URL", `{models: {providers: {local: {baseUrl: "ftp://x:21"}, o: {baseUrl: "http://x:0"}}}}`, "local/m", ``},
	} {
		t.Run(c.name, func(t *testing.T) {
			ref, err := ParseModelRef(c.primary)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range ModelEndpoints(parseDoc(t, c.doc), &ref) {
				got = append(got, fmt.Sprintf("%s@%s:%d", e.Provider, e.Host, e.Port))
			}
			if strings.Join(got, " ") != c.want {
				t.Errorf("endpoints %q, want %q", strings.Join(got, " "), c.want)
			}
		})
	}
}

// With HTTPS egress on, an endpoint on another port gets its own rule (to
// its address when the host is an IP literal); with it off, only an
// extra_egress rule reaches an endpoint, and the plan refuses one that none
// reaches, naming the endpoint, the compute and the fix.
func TestNetworkPolicy_ModelEndpointEgress(t *testing.T) {
	eps := []ModelEndpoint{
		{Provider: "a", Host: "10.1.2.3", Port: 8080},
		{Provider: "b", Host: "llm.internal", Port: 8080},
		{Provider: "c", Host: "api.example.com", Port: 443},
		{Provider: "d", Host: "10.1.2.3", Port: 8080},
	}
	var got []string
	for _, r := range (NetworkPolicy{}).EndpointEgress(eps) {
		to := "anywhere"
		if len(r.To) > 0 {
			to = r.To[0].IPBlock.CIDR
		}
		got = append(got, fmt.Sprintf("%s:%s/%d", to, r.Ports[0].Protocol, r.Ports[0].Port))
	}
	if s := strings.Join(got, " "); s != "10.1.2.3/32:TCP/8080 anywhere:TCP/8080" {
		t.Errorf("endpoint egress %q", s)
	}
	if r := (NetworkPolicy{NoHTTPSEgress: true}).EndpointEgress(eps); r != nil {
		t.Errorf("with HTTPS egress off the provider added %v", r)
	}
	if r := (NetworkPolicy{Disabled: true}).EndpointEgress(eps); r != nil {
		t.Errorf("with policies disabled the provider added %v", r)
	}

	ip := ModelEndpoint{Provider: "a", Host: "10.1.2.3", Port: 8080}
	name := ModelEndpoint{Provider: "b", Host: "llm.internal", Port: 8080}
	rule := func(cidr string, except []string, ports ...NetworkPort) EgressRule {
		r := EgressRule{Ports: ports}
		if cidr != "" {
			r.To = []NetworkPeer{{IPBlock: &IPBlock{CIDR: cidr, Except: except}}}
		}
		return r
	}
	for _, c := range []struct {
		name    string
		np      NetworkPolicy
		ep      ModelEndpoint
		reaches bool
	}{
		{"HTTPS egress on", NetworkPolicy{}, ip, true},
		{"disabled", NetworkPolicy{Disabled: true, NoHTTPSEgress: true}, ip, true},
		{"off, no rule", NetworkPolicy{NoHTTPSEgress: true}, ip, false},
		{"off, rule on its port", NetworkPolicy{NoHTTPSEgress: true, ExtraEgress: []EgressRule{rule("", nil, NetworkPort{Port: 8080})}}, ip, true},
		{"off, rule on every port", NetworkPolicy{NoHTTPSEgress: true, ExtraEgress: []EgressRule{rule("10.0.0.0/8", nil)}}, ip, true},
		{"off, rule on another port", NetworkPolicy{NoHTTPSEgress: true, ExtraEgress: []EgressRule{rule("", nil, NetworkPort{Port: 8443})}}, ip, false},
		{"off, UDP only", NetworkPolicy{NoHTTPSEgress: true, ExtraEgress: []EgressRule{rule("", nil, NetworkPort{Port: 8080, Protocol: "UDP"})}}, ip, false},
		{"off, block without it", NetworkPolicy{NoHTTPSEgress: true, ExtraEgress: []EgressRule{rule("192.0.2.0/24", nil, NetworkPort{Port: 8080})}}, ip, false},
		{"off, block excepting it", NetworkPolicy{NoHTTPSEgress: true, ExtraEgress: []EgressRule{rule("10.0.0.0/8", []string{"10.1.0.0/16"}, NetworkPort{Port: 8080})}}, ip, false},
		{"off, host name, a block may hold it", NetworkPolicy{NoHTTPSEgress: true, ExtraEgress: []EgressRule{rule("192.0.2.0/24", nil, NetworkPort{Port: 8080})}}, name, true},
	} {
		if got := c.np.Reaches(c.ep); got != c.reaches {
			t.Errorf("%s: Reaches = %v, want %v", c.name, got, c.reaches)
		}
	}

	in := k8sEmbeddedInput()
	in.Agent.Harness = HarnessOpenClaw
	in.Configuration = configuration(mustDoc(`{agents: {defaults: {model: "openai/m"}}, models: {providers: {openai: {baseUrl: "http://10.1.2.3:8080/v1", api: "openai-completions", models: [{id: "m", name: "m"}]}}}}`))
	if _, errs := Admit(in); len(errs) != 0 {
		t.Fatalf("HTTPS egress on: refused %v", errs)
	}
	in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.NetworkPolicy = NetworkPolicy{NoHTTPSEgress: true} })
	_, errs := Admit(in)
	if len(errs) != 1 || errs[0].Class != InvalidRequest || errs[0].Attribute[0] != "compute" ||
		!strings.Contains(errs[0].Message, `provider "openai"'s endpoint 10.1.2.3:8080`) ||
		!strings.Contains(errs[0].Message, "extra_egress rule with port 8080") || errs[0].DocPath.String() != "models.providers.openai.baseUrl" {
		t.Fatalf("HTTPS egress off, endpoint unreached: %v", errs)
	}
	if strings.Contains(errs[0].Error(), "(rule") {
		t.Errorf("a check of the provider's own cites a rule: %s", errs[0].Error())
	}
	in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) {
		k.NetworkPolicy.ExtraEgress = []EgressRule{rule("10.1.2.3/32", nil, NetworkPort{Port: 8080})}
	})
	if _, errs := Admit(in); len(errs) != 0 {
		t.Fatalf("HTTPS egress off, endpoint in extra_egress: refused %v", errs)
	}
	in.Compute = sshCompute()
	in.Source = runtimeSource(sshComputeID)
	if errs := checkEgress(in.Configuration.Document, &ModelRef{Provider: "openai", Model: "m"}, in.Compute); len(errs) != 0 {
		t.Fatalf("SSH compute: %v", errs)
	}
}
