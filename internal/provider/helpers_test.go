package provider

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/hashicorp/terraform-plugin-testing/terraform"
)

// mustRegexp compiles an expected-error pattern; a space matches any run of
// white space, since Terraform wraps diagnostic text.
func mustRegexp(s string) *regexp.Regexp {
	return regexp.MustCompile(strings.ReplaceAll(s, " ", `\s+`))
}

// expectAttrs checks imported attributes.
func expectAttrs(states []*terraform.InstanceState, want map[string]string) error {
	if len(states) != 1 {
		return fmt.Errorf("expected one imported instance, got %d", len(states))
	}
	for k, v := range want {
		if got := states[0].Attributes[k]; got != v {
			return fmt.Errorf("imported %s = %q, want %q", k, got, v)
		}
	}
	return nil
}

func itoa(i int) string { return fmt.Sprint(i) }

// writeOnlyKeySource is credential source "s" (method api_key) named name,
// whose write-only value is var.key: a sensitive variable the tests set
// through TF_VAR_key, as a CI pipeline would, so that no configuration the
// framework logs holds it.
func writeOnlyKeySource(name string) string {
	return fmt.Sprintf(`
variable "key" {
  type      = string
  sensitive = true
}
resource "occ_credential_source" "s" {
  name             = %q
  compute          = occ_compute.k
  method           = "api_key"
  value_wo         = var.key
  value_wo_version = 1
}
`, name)
}
