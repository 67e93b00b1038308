package provider

import (
	"context"
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/kube"
)

// TestAccCredentialSource_OwnSecretsOnly: credential Secrets are named
// after their source, so a second configuration's source of the same name
// in the namespace, or a Secret made by hand under such a name, derives
// the same names. Pass: the second source is refused with
// RESOURCE_CONFLICT before it changes anything (it never uses the first
// one's value); its destroy leaves the first one's Secrets; a rotation
// keeps the new and the previous version and deletes older ones; the
// first source's destroy deletes only its own. rule AU7
func TestAccCredentialSource_OwnSecretsOnly(t *testing.T) {
	env := newKubeEnv(t)
	cs := env.cluster.Clientset
	config := func(value string, version int) string {
		return env.provider + env.compute("") + fmt.Sprintf(`
resource "occ_credential_source" "s" {
  name             = "openai"
  compute          = occ_compute.k
  method           = "api_key"
  value_wo         = %q
  value_wo_version = %d
}`, value, version)
	}
	holds := func(name, value string) error {
		s, err := cs.CoreV1().Secrets(env.ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if string(s.Data[kube.SecretKey]) != value {
			return fmt.Errorf("Secret %s holds another value", name)
		}
		return nil
	}
	secrets := func(want ...string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			list, err := cs.CoreV1().Secrets(env.ns).List(context.Background(), metav1.ListOptions{LabelSelector: kube.LabelCredentialSource + "=openai"})
			if err != nil {
				return err
			}
			got := map[string]bool{}
			for _, s := range list.Items {
				got[s.Name] = true
			}
			if len(got) != len(want) {
				return fmt.Errorf("credential Secrets %v, want %v", got, want)
			}
			for _, w := range want {
				if !got[w] {
					return fmt.Errorf("credential Secrets %v, want %v", got, want)
				}
			}
			return nil
		}
	}
	// The second configuration: its own state, the same source name.
	second := func() {
		resource.Test(t, resource.TestCase{
			PreCheck:                 func() { testAccPreCheck(t) },
			ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
			Steps: []resource.TestStep{{
				Config:      config("second-value-0002", 1),
				ExpectError: mustRegexp(`RESOURCE_CONFLICT: credential Secret occ-cred-openai-v1 already exists`),
			}},
		})
		if err := holds("occ-cred-openai-v1", "first-value-0001"); err != nil {
			t.Fatalf("after the second configuration's apply and destroy: %v", err)
		}
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: config("first-value-0001", 1), Check: secrets("occ-cred-openai-v1")},
			{PreConfig: second, Config: config("first-value-0001", 1), PlanOnly: true},
			{Config: config("first-value-0002", 2), Check: secrets("occ-cred-openai-v1", "occ-cred-openai-v2")},
			{Config: config("first-value-0003", 3), Check: secrets("occ-cred-openai-v2", "occ-cred-openai-v3")},
		},
		CheckDestroy: secrets(),
	})

	// A Secret made by hand under a derived name is never adopted.
	if _, err := cs.CoreV1().Secrets(env.ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "occ-cred-openai-v1"}, Data: map[string][]byte{kube.SecretKey: []byte("by-hand-value-1")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config:      config("first-value-0001", 1),
			ExpectError: mustRegexp(`RESOURCE_CONFLICT: credential Secret occ-cred-openai-v1 already exists`),
		}},
	})
	if err := holds("occ-cred-openai-v1", "by-hand-value-1"); err != nil {
		t.Fatalf("the Secret made by hand: %v", err)
	}
}
