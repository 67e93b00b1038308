package startup

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"

	"github.com/occ-platform/terraform-provider-occ/internal/runtimerecord"
)

// MarkerHeaders are the response headers whose presence the upfront 401
// reports (names only, never values): they tell a provider's own answer
// from a proxy's or a CDN's.
var MarkerHeaders = []string{
	"www-authenticate", "x-request-id", "request-id", "openai-organization", "openai-processing-ms", "openai-version",
	"anthropic-organization-id", "x-should-retry", "cf-ray", "via", "x-envoy-upstream-service-time", "x-amzn-requestid", "proxy-authenticate",
}

// Upfront sends OpenClaw's first, empty request to a built-in provider's
// default endpoint: the probe's own URL and credential with an empty JSON
// body, which no provider bills. A 401 is AUTHENTICATION_FAILED with its
// closed-set details (PR7); anything else (including a transport failure,
// which the probe itself then meets and classifies) lets the probe go on.
func Upfront(ctx context.Context, ep Endpoint, rt http.RoundTripper) (Outcome, bool) {
	if rt == nil {
		rt = http.DefaultTransport
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.url(), bytes.NewReader([]byte("{}")))
	if err != nil {
		return Outcome{}, false
	}
	setHeaders(req.Header, ep)
	req.Header.Set("Accept", "application/json")
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		return Outcome{}, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return Outcome{}, false
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	o := failure(ClassAuth, "", "")
	o.ProviderCode = resp.StatusCode
	d := &UpfrontDetail{}
	for _, h := range MarkerHeaders {
		if _, ok := resp.Header[http.CanonicalHeaderKey(h)]; ok {
			d.HeaderMarker = append(d.HeaderMarker, h)
		}
	}
	d.BodyShape, d.ErrorCode, d.ErrorType = bodyShape(body)
	o.Upfront = d
	return o, true
}

// bodyShape sorts an error body into one of five shapes and reads
// error.code and error.type against the known set ("other" outside it,
// "" when missing). Nothing else of the body is kept.
func bodyShape(body []byte) (shape, code, typ string) {
	if len(bytes.TrimSpace(body)) == 0 {
		return "empty", "", ""
	}
	var v any
	if json.Unmarshal(body, &v) != nil {
		return "non-json", "", ""
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return "json-no-error", "", ""
	}
	e, ok := obj["error"]
	if !ok || e == nil {
		return "json-no-error", "", ""
	}
	eo, ok := e.(map[string]any)
	if !ok {
		return "json-error-no-code", "", ""
	}
	code, typ = known(eo["code"]), known(eo["type"])
	if code == "" {
		return "json-error-no-code", code, typ
	}
	return "json-error-code", code, typ
}

func known(v any) string {
	switch t := v.(type) {
	case nil:
		return ""
	case string:
		if t == "" {
			return ""
		}
		if t != "other" && slices.Contains(runtimerecord.ProviderErrorValues, t) {
			return t
		}
	}
	return "other"
}
