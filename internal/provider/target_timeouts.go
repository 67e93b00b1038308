package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
)

// defaultTargetTimeout is the default of every operation of occ_compute
// and occ_credential_source: each reaches its target once or a few times.
const defaultTargetTimeout = 5 * time.Minute

// targetTimeouts is the timeouts attribute of a resource other than the
// Agent that reaches a cluster or host: what is the resource, where its
// create and update go, what its refresh reads and what its destroy does.
func targetTimeouts(what, writes, reads, deletes string) schema.Attribute {
	d := durationText(defaultTargetTimeout)
	a := timeouts.Attributes(context.Background(), timeouts.Opts{Create: true, Read: true, Update: true, Delete: true,
		CreateDescription: "How long a create may wait for " + writes + ", as a Go duration (\"30s\", \"10m\"). Default " + d + "; past it the create fails with `DEADLINE_EXCEEDED` or `UNAVAILABLE` and nothing enters state.",
		ReadDescription:   "How long a refresh may wait to read " + reads + ", as a Go duration. Default " + d + ".",
		UpdateDescription: "How long an update may wait for " + writes + ", as a Go duration. Default " + d + "; past it the update fails and the state keeps what it was.",
		DeleteDescription: "How long a destroy may take " + deletes + ", as a Go duration. Default " + d + "; past it the destroy fails and the " + what + " stays in state.",
	}).(schema.SingleNestedAttribute)
	a.MarkdownDescription = "How long each operation may wait for the " + what + "'s cluster or host, per operation; every default is " + d + "."
	return a
}

// withTimeout bounds ctx by the timeout an operation's timeouts block sets
// (get is timeouts.Value's Create, Read, Update or Delete), or the default.
func withTimeout(ctx context.Context, get func(context.Context, time.Duration) (time.Duration, diag.Diagnostics), diags *diag.Diagnostics) (context.Context, context.CancelFunc) {
	d, ds := get(ctx, defaultTargetTimeout)
	diags.Append(ds...)
	if d <= 0 {
		d = defaultTargetTimeout
	}
	return context.WithTimeout(ctx, d)
}
