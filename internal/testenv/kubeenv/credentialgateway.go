package kubeenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/occ-platform/terraform-provider-occ/internal/sandboxapi"
)

// The test driver's Credential Gateway: an egress proxy that implements the
// egress part of the OCC sandbox driver extension (sandboxapi.Extension,
// sandboxapi.Placeholder) for the Sandboxes of this driver. Like OpenShell's, it is
// transparent to the harness: the test redirects the Pods' connections to
// the upstreams in the node's network namespace (RealNode.RedirectInNode),
// so every process of the Sandbox goes through it whatever its environment
// (the Codex probe's keeps only the TLS trust variables, rule PR2). It is a
// stand-in: it swaps placeholders in plain HTTP only (a placeholder inside
// TLS cannot be swapped without a CA the harness trusts), and forwards only
// to the upstreams the test names, so that traffic stays inside the test
// environment.

// CredentialGatewayOptions configure ServeCredentialGateway.
type CredentialGatewayOptions struct {
	// Listener is where the egress proxy serves; the test redirects the
	// Pods' connections to the upstreams there (on the real node:
	// RealNode.ListenInNode and RealNode.RedirectInNode).
	Listener net.Listener
	// Dial reaches an upstream (on the real node: RealNode.DialInNode).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Upstreams are the host:port the proxy forwards to (a request's Host);
	// a request for any other is refused (403).
	Upstreams []string
}

// EgressRecord is one request the egress proxy handled.
type EgressRecord struct {
	// Sandbox is "namespace/name" of the Sandbox whose Pod sent it, empty
	// when no Sandbox of this driver has the caller's address.
	Sandbox string
	// Remote is the caller's IP address.
	Remote string
	// Method and URL are the request's.
	Method, URL string
	// Swapped is true when the proxy replaced the placeholder with a held key.
	Swapped bool
	// Status is the status the proxy itself answered with, 0 when it
	// forwarded the request.
	Status int
}

type credentialGateway struct {
	upstreams []string
	proxy     *httputil.ReverseProxy
	srv       *http.Server

	mu      sync.Mutex
	held    map[heldKey]string
	records []EgressRecord
}

// heldKey names a credential the gateway holds: the Credential Gateway's
// name and the attachment's (the credential source's).
type heldKey struct{ gateway, attachment string }

// ServeCredentialGateway starts the driver's Credential Gateway egress
// proxy on opts.Listener until the test ends. From then on the driver
// reports an attachment True only while the gateway holds a credential for
// it (HoldCredential), False with reason CredentialNotHeld otherwise.
func (d *SandboxDriver) ServeCredentialGateway(opts CredentialGatewayOptions) {
	d.t.Helper()
	if opts.Listener == nil || opts.Dial == nil || len(opts.Upstreams) == 0 {
		d.t.Fatalf("testenv/kubeenv: ServeCredentialGateway needs a listener, a dialer and at least one upstream")
	}
	g := &credentialGateway{
		upstreams: slices.Clone(opts.Upstreams),
		held:      map[heldKey]string{},
	}
	g.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// A redirected connection's request names its target in Host.
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", pr.In.Host
		},
		Transport:     &http.Transport{DialContext: opts.Dial, ResponseHeaderTimeout: 2 * time.Minute},
		FlushInterval: -1, // model answers stream (server-sent events)
	}
	g.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { d.egress(g, w, r) }),
		ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = g.srv.Serve(opts.Listener) }()
	d.t.Cleanup(func() { _ = g.srv.Close() })
	d.mu.Lock()
	d.gateway = g
	d.mu.Unlock()
	d.enqueueAll()
}

// HoldCredential makes the Credential Gateway named gateway hold key for
// the attachment named attachment (the credential source's name): the
// attachment turns True and the proxy swaps the placeholder for key in the
// requests of the Sandboxes that carry it. It needs ServeCredentialGateway.
func (d *SandboxDriver) HoldCredential(gateway, attachment, key string) {
	d.mu.Lock()
	g := d.gateway
	d.mu.Unlock()
	if g == nil {
		d.t.Fatalf("testenv/kubeenv: HoldCredential before ServeCredentialGateway")
	}
	g.mu.Lock()
	g.held[heldKey{gateway, attachment}] = key
	g.mu.Unlock()
	d.enqueueAll()
}

// Egress returns the requests the egress proxy handled, in order.
func (d *SandboxDriver) Egress() []EgressRecord {
	d.mu.Lock()
	g := d.gateway
	d.mu.Unlock()
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.records)
}

// ReasonCredentialNotHeld is the attachment condition's reason while the
// Credential Gateway holds no credential for it.
const ReasonCredentialNotHeld = "CredentialNotHeld"

// attachmentHeld reports whether the gateway holds a credential for a; with
// no Credential Gateway served every attachment counts as held.
func (d *SandboxDriver) attachmentHeld(a sandboxapi.Attachment) bool {
	g := d.gateway // d.mu is held by the caller
	if g == nil {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.held[heldKey{a.Gateway, a.Name}]
	return ok
}

// credentialHeaders are the headers a placeholder is swapped in: OpenAI's
// bearer token and Anthropic's key header.
var credentialHeaders = []string{"Authorization", "X-Api-Key"}

// egress handles one proxied request.
func (d *SandboxDriver) egress(g *credentialGateway, w http.ResponseWriter, r *http.Request) {
	remote, _, _ := net.SplitHostPort(r.RemoteAddr)
	rec := EgressRecord{Remote: remote, Method: r.Method}
	refuse := func(status int, format string, args ...any) {
		rec.Status = status
		g.record(rec)
		http.Error(w, "occ test credential gateway: "+fmt.Sprintf(format, args...), status)
	}
	rec.URL = "http://" + r.Host + r.URL.RequestURI()
	if !slices.Contains(g.upstreams, r.Host) {
		refuse(http.StatusForbidden, "%s is not an upstream of this test gateway", r.Host)
		return
	}
	sb, attachments, err := d.sandboxAt(r.Context(), remote)
	rec.Sandbox = sb
	if err != nil {
		refuse(http.StatusForbidden, "%v", err)
		return
	}
	if carriesPlaceholder(r.Header) {
		key, err := g.keyFor(attachments)
		if err != nil {
			refuse(http.StatusBadGateway, "Sandbox %s: %v", sb, err)
			return
		}
		for _, h := range credentialHeaders {
			for i, v := range r.Header.Values(h) {
				r.Header[http.CanonicalHeaderKey(h)][i] = strings.ReplaceAll(v, sandboxapi.Placeholder, key)
			}
		}
		rec.Swapped = true
	}
	g.record(rec)
	g.proxy.ServeHTTP(w, r)
}

func carriesPlaceholder(h http.Header) bool {
	for _, name := range credentialHeaders {
		for _, v := range h.Values(name) {
			if strings.Contains(v, sandboxapi.Placeholder) {
				return true
			}
		}
	}
	return false
}

// keyFor is the one held key among a Sandbox's attachments.
func (g *credentialGateway) keyFor(attachments []sandboxapi.Attachment) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var keys []string
	for _, a := range attachments {
		if k, ok := g.held[heldKey{a.Gateway, a.Name}]; ok {
			keys = append(keys, k)
		}
	}
	switch len(keys) {
	case 1:
		return keys[0], nil
	case 0:
		return "", errors.New("the credential gateway holds no credential for any of its attachments")
	default:
		return "", fmt.Errorf("%d attachments hold a key and the placeholder does not say which", len(keys))
	}
}

func (g *credentialGateway) record(r EgressRecord) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.records = append(g.records, r)
}

// sandboxAt is the Sandbox ("namespace/name") of this driver whose Pod has
// the address ip, and its attachments.
func (d *SandboxDriver) sandboxAt(ctx context.Context, ip string) (string, []sandboxapi.Attachment, error) {
	for _, ns := range d.namespaces {
		pods, err := d.c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("status.podIP", ip).String()})
		if err != nil {
			return "", nil, fmt.Errorf("find the Pod at %s: %w", ip, err)
		}
		for i := range pods.Items {
			owner := sandboxOwner(&pods.Items[i])
			if owner == nil {
				continue
			}
			sb, err := d.c.Dynamic.Resource(sandboxapi.GVR).Namespace(ns).Get(ctx, owner.Name, metav1.GetOptions{})
			if err != nil {
				return "", nil, fmt.Errorf("the Sandbox of Pod %s/%s: %w", ns, pods.Items[i].Name, err)
			}
			if sb.GetUID() != owner.UID {
				continue
			}
			a, err := decodeAttachments(sb.GetAnnotations()[sandboxapi.AnnotationAttachments])
			return ns + "/" + sb.GetName(), a, err
		}
	}
	return "", nil, fmt.Errorf("no Sandbox of this driver has the address %s", ip)
}
