package provider

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/testenv/fakemodel"
)

// Held startup codes on the real node: the real wrapper meets a model that
// refuses the key, or never answers, holds the code (PR5, PR7), and the
// apply fails with it at once, with the fields the wrapper recorded, never
// with the provider's raw answer or the key (PR8, AU7). Nothing is
// activated: the Service is never created (AC3).
func TestAccAgent_RealNodeHeldCodes(t *testing.T) {
	for _, tc := range []struct {
		name string
		step fakemodel.Step
		want *regexp.Regexp
	}{
		{
			name: "wrong key",
			step: fakemodel.Step{Kind: fakemodel.Status, Status: 401, Shape: fakemodel.ShapeErrorCode, Code: "invalid_api_key", Type: "authentication_error"},
			// The probe's own 401 carries providerCode; bodyShape and
			// responseHeaderMarker come only with the upfront empty request,
			// which PR7 sends only to a default OpenAI or Anthropic endpoint
			// (public hosts, unreachable here; cmd/occ-runtime's tests cover
			// it with the wrapper's endpoint override).
			want: regexp.MustCompile(`AUTHENTICATION_FAILED: agent "support" revision 1 did not activate[\s\S]*container gateway` +
				`[\s\S]*Startup record: openclaw.model_probe[\s\S]*code AUTHENTICATION_FAILED[\s\S]*failureClass auth[\s\S]*providerCode 401` +
				`[\s\S]*Next: The model provider rejected the credential`),
		},
		{
			name: "stalled endpoint",
			step: fakemodel.Step{Kind: fakemodel.Hang},
			want: regexp.MustCompile(`MODEL_PROBE_TIMEOUT: agent "support" revision 1 did not activate[\s\S]*container gateway` +
				`[\s\S]*Startup record: openclaw.model_probe`),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newRealEnv(t)
			srv := env.model(t, tc.step)
			dir := traceLogDir(t)
			t.Setenv("TF_VAR_key", testSentinel)
			start := time.Now()
			resource.Test(t, resource.TestCase{
				PreCheck:                 func() { testAccPreCheck(t) },
				ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
				Steps: []resource.TestStep{{
					Config:      realAgentConfig(env, srv.URL, "6m"),
					ExpectError: tc.want,
				}},
				CheckDestroy: func(*terraform.State) error { return nil },
			})
			took := time.Since(start)
			if _, err := env.cluster.Clientset.CoreV1().Services(env.ns).Get(context.Background(), "support", metav1.GetOptions{}); err == nil {
				t.Error("the Service exists: a held revision was activated")
			}
			if n := len(srv.ProbeRequests()); n != 1 {
				t.Errorf("%d model calls; a held code is final, the probe must not retry (PR7)", n)
			}
			// The provider's diagnostics are in its TRACE log (the plugin
			// SDK logs each one whole), so a secret-free log is a secret-free
			// diagnostic: the key, and the provider's raw answer, which
			// carries srv.Secret, appear in neither.
			logs := readTraceLogs(t, dir)
			if !strings.Contains(logs, strings.Fields(tc.want.String())[0]) {
				t.Fatalf("the TRACE log does not hold the diagnostic: the check below would prove nothing")
			}
			for _, s := range []string{testSentinel, srv.Secret} {
				if strings.Contains(logs, s) {
					t.Errorf("the TRACE log (and so the diagnostic or the runtime output it quotes) holds a secret of %d bytes", len(s))
				}
			}
			t.Logf("%s surfaced %s after the test began", tc.name, took.Round(time.Second))
		})
	}
}
