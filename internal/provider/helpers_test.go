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
