package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
)

// rule ND6: native_worker_support admits nothing any more: it stays in the
// schema (configurations that set it keep working) with a deprecation
// warning that says why, and the installation's native_workers_support
// says it is always null.
func TestND6_NativeWorkerSupportIsDeprecated(t *testing.T) {
	resp := &resource.SchemaResponse{}
	NewComputeResource().Schema(context.Background(), resource.SchemaRequest{}, resp)
	k8s := resp.Schema.Attributes["kubernetes"].(schema.SingleNestedAttribute)
	attr, ok := k8s.Attributes["native_worker_support"].(schema.BoolAttribute)
	if !ok {
		t.Fatal("kubernetes.native_worker_support is gone from the schema: configurations that set it would break")
	}
	for _, want := range []string{"no longer admits anything", "ND6", admission.NativeInferenceCheckedVersion, "inference on the node", "Remove it"} {
		if !strings.Contains(attr.DeprecationMessage, want) {
			t.Errorf("deprecation message %q does not say %q", attr.DeprecationMessage, want)
		}
	}
	if !strings.HasPrefix(attr.MarkdownDescription, "Deprecated: it no longer admits anything.") {
		t.Errorf("description %q", attr.MarkdownDescription)
	}
	inst := resp.Schema.Attributes["installation"].(schema.SingleNestedAttribute)
	if d := inst.Attributes["native_workers_support"].GetMarkdownDescription(); !strings.HasPrefix(d, "Always null") {
		t.Errorf("installation.native_workers_support description %q", d)
	}
}
