package executor

import (
	"testing"
	"time"
)

// A listed agent carries what Read observed of its activated revision, and
// a status in the words of occ_agent's status attribute: "active" while
// the activated revision runs, "drifted: " and why otherwise.
func TestListedOf(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	o := Observed{Exists: true, Revision: 3, RevisionID: "abc", ActivatedAt: at, Endpoint: "http://support.occ-acme.svc:18789"}
	want := Listed{Name: "support", ID: "occ-acme/support", Revision: 3, RevisionID: "abc", ActivatedAt: at, Endpoint: o.Endpoint, Status: "active"}
	if got := ListedOf("support", "occ-acme/support", o); got != want {
		t.Errorf("ListedOf = %+v, want %+v", got, want)
	}
	o.Drift, o.DriftDetail = DriftWorkload, "Deployment support-gateway was deleted"
	if got := ListedOf("support", "occ-acme/support", o); got.Status != "drifted: Deployment support-gateway was deleted" || got.Revision != 3 {
		t.Errorf("ListedOf a drifted agent = %+v", got)
	}
}
