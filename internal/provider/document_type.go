package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
)

// DocumentType is a string holding a JSON or JSON5 configuration document.
// Two documents that differ only in formatting, comments, key order or
// number spelling are semantically equal, so reformatting a file plans no
// change at all.
type DocumentType struct {
	basetypes.StringType
}

var (
	_ basetypes.StringTypable                    = DocumentType{}
	_ basetypes.StringValuableWithSemanticEquals = DocumentValue{}
)

func (t DocumentType) String() string { return "provider.DocumentType" }

func (t DocumentType) Equal(o attr.Type) bool {
	_, ok := o.(DocumentType)
	return ok
}

func (t DocumentType) ValueFromString(_ context.Context, in basetypes.StringValue) (basetypes.StringValuable, diag.Diagnostics) {
	return DocumentValue{StringValue: in}, nil
}

func (t DocumentType) ValueFromTerraform(ctx context.Context, in tftypes.Value) (attr.Value, error) {
	v, err := t.StringType.ValueFromTerraform(ctx, in)
	if err != nil {
		return nil, err
	}
	sv, ok := v.(basetypes.StringValue)
	if !ok {
		return nil, fmt.Errorf("unexpected value type %T", v)
	}
	return DocumentValue{StringValue: sv}, nil
}

func (t DocumentType) ValueType(context.Context) attr.Value { return DocumentValue{} }

// DocumentValue is a value of DocumentType.
type DocumentValue struct {
	basetypes.StringValue
}

// NewDocumentValue wraps a known document string.
func NewDocumentValue(s string) DocumentValue {
	return DocumentValue{StringValue: basetypes.NewStringValue(s)}
}

func (v DocumentValue) Type(context.Context) attr.Type { return DocumentType{} }

func (v DocumentValue) Equal(o attr.Value) bool {
	other, ok := o.(DocumentValue)
	return ok && v.StringValue.Equal(other.StringValue)
}

// StringSemanticEquals reports whether both documents parse to the same
// canonical form. A document that does not parse is only equal to itself.
func (v DocumentValue) StringSemanticEquals(_ context.Context, nv basetypes.StringValuable) (bool, diag.Diagnostics) {
	other, ok := nv.(DocumentValue)
	if !ok {
		return false, nil
	}
	if v.ValueString() == other.ValueString() {
		return true, nil
	}
	a, errA := occconfig.Parse(v.ValueString())
	b, errB := occconfig.Parse(other.ValueString())
	if errA != nil || errB != nil {
		return false, nil
	}
	return occconfig.Digest(a) == occconfig.Digest(b), nil
}
