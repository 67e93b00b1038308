package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/turn"
)

// TurnRules are what the provider needs in a tenant namespace, beside
// RequiredRules, to send a turn to an agent (the occ_agent_turn action):
// a port-forward to the gateway Pod the agent's Service selects, over
// websocket (get) or, from an API server that does not upgrade to it,
// SPDY (create). Only the action needs it; docs render it from here.
var TurnRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"pods/portforward"}, Verbs: []string{"get", "create"}},
}

// Turn sends one message to the agent's activated revision through its
// gateway: a port-forward (through the API server and the kubelet, as
// kubectl port-forward does) to a ready gateway Pod the agent's Service
// selects, and the gateway's chat completions endpoint with the agent's
// gateway token. Nothing is written to the cluster.
func (e *Executor) Turn(ctx context.Context, t executor.Turn) (turn.Answer, error) {
	gw, err := e.openGateway(ctx, t.Agent, executor.OpTurn, "send the turn")
	if err != nil {
		return turn.Answer{}, err
	}
	defer gw.Close()
	t.Log.Print("turn: port-forward ready", map[string]any{"agent": t.Agent.Name, "where": gw.Where})
	return executor.SendTurn(ctx, &http.Client{}, t.Agent.Name, gw.Where,
		turn.Request{BaseURL: gw.URL(), Token: gw.Token, Message: t.Message})
}

// OpenGateway is a port-forward from a loopback port of the provider's
// machine to a ready gateway Pod the agent's Service selects, open until
// Close or until ctx ends, with the agent's gateway token.
func (e *Executor) OpenGateway(ctx context.Context, a executor.Agent) (*executor.Gateway, error) {
	return e.openGateway(ctx, a, executor.OpGateway, "open the gateway")
}

// GatewayToken reads the agent's gateway token from its Secret, once its
// Service (written at activation) is the provider's.
func (e *Executor) GatewayToken(ctx context.Context, a executor.Agent) (string, error) {
	svc, fail, err := e.agentService(ctx, a, executor.OpGateway, "read its gateway token")
	if err != nil {
		return "", err
	}
	return e.gatewayToken(ctx, svc.Namespace, a.Name, fail)
}

type failFunc func(code executor.Code, reason, next string, err error) error

// agentService is the agent's Service, the provider's, and how to word a
// failure of op.
func (e *Executor) agentService(ctx context.Context, a executor.Agent, op executor.Op, what string) (*corev1.Service, failFunc, error) {
	if a.Compute == nil {
		return nil, nil, &executor.Failure{Code: executor.NotFound, Op: op, Agent: a.Name, Reason: "the agent's compute is not known", Next: "apply the agent first"}
	}
	ns := a.Compute.Kubernetes().Namespace
	fail := func(code executor.Code, reason, next string, err error) error {
		return &executor.Failure{Code: code, Op: op, Agent: a.Name, Where: "namespace " + ns, Reason: reason, Next: next, Err: err}
	}
	svc, err := e.Client.CoreV1().Services(ns).Get(ctx, render.ServiceName(a.Name), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil, fail(executor.NotFound, fmt.Sprintf("agent %s has no Service in namespace %s: no revision is activated", a.Name, ns), "apply the agent, then "+what, err)
	case err != nil:
		return nil, nil, fail(executor.Unavailable, "reading the agent's Service: "+err.Error(), "", err)
	case !ownedBy(svc, a.Name):
		return nil, nil, fail(executor.ResourceConflict, fmt.Sprintf("Service %s/%s is not the provider's", ns, svc.Name), "", nil)
	}
	return svc, fail, nil
}

// gatewayToken is the token in the agent's gateway token Secret.
func (e *Executor) gatewayToken(ctx context.Context, ns, agent string, fail failFunc) (string, error) {
	name := render.GatewayTokenSecret(agent)
	sec, err := e.Client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case err != nil:
		return "", fail(executor.Unavailable, "reading the agent's gateway token Secret "+name+": "+err.Error(), "", err)
	case !ownedBy(sec, agent):
		return "", fail(executor.ResourceConflict, fmt.Sprintf("Secret %s/%s is not the provider's", ns, name), "", nil)
	case len(sec.Data[render.GatewayTokenKey]) == 0:
		return "", fail(executor.Unavailable, fmt.Sprintf("Secret %s/%s holds no %s", ns, name, render.GatewayTokenKey), "apply the agent again: the deploy writes its gateway token", nil)
	}
	return string(sec.Data[render.GatewayTokenKey]), nil
}

// openGateway is OpenGateway as op (a turn, or the gateway's own).
func (e *Executor) openGateway(ctx context.Context, a executor.Agent, op executor.Op, what string) (*executor.Gateway, error) {
	svc, fail, err := e.agentService(ctx, a, op, what)
	if err != nil {
		return nil, err
	}
	ns := svc.Namespace
	if e.cfg == nil {
		return nil, fail(executor.Unavailable, "the executor has no connection to port-forward through", "", nil)
	}
	pod, err := e.servingPod(ctx, svc)
	if err != nil {
		return nil, fail(executor.Unavailable, err.Error(), "check the agent's status with terraform plan (a refresh reads it), and its gateway Pod's events", err)
	}
	token, err := e.gatewayToken(ctx, ns, a.Name, fail)
	if err != nil {
		return nil, err
	}
	local, stop, err := e.forward(ctx, ns, pod, render.GatewayPort)
	if err != nil {
		if errors.Is(err, errForbidden) {
			return nil, fail(executor.ResourceConflict, fmt.Sprintf("the provider's identity may not port-forward to Pod %s: %v", pod, err),
				fmt.Sprintf("grant the provider's identity get and create on pods/portforward in namespace %s (the turn's Role rule in the Kubernetes permissions guide), then %s again", ns, what), err)
		}
		return nil, fail(executor.Unavailable, fmt.Sprintf("port-forward to Pod %s: %v", pod, err), "", err)
	}
	return executor.NewGateway("127.0.0.1:"+strconv.Itoa(int(local)), token, "Pod "+pod, stop), nil
}

// servingPod is a ready gateway Pod the Service selects.
func (e *Executor) servingPod(ctx context.Context, svc *corev1.Service) (string, error) {
	if len(svc.Spec.Selector) == 0 {
		return "", fmt.Errorf("Service %s selects no Pods", svc.Name)
	}
	pods, err := e.Client.CoreV1().Pods(svc.Namespace).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(svc.Spec.Selector).String()})
	if err != nil {
		return "", fmt.Errorf("listing the gateway Pods: %w", err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return p.Name, nil
			}
		}
	}
	return "", fmt.Errorf("no ready gateway Pod behind Service %s (%d Pods selected)", svc.Name, len(pods.Items))
}

var errForbidden = errors.New("forbidden")

// forward opens a port-forward to port of pod on a free loopback port and
// returns it; stop ends the forward. The websocket protocol comes first,
// SPDY when the API server does not upgrade to it (kubectl's order).
func (e *Executor) forward(ctx context.Context, ns, pod string, port int) (uint16, func(), error) {
	u, err := url.Parse(e.cfg.Host)
	if err != nil {
		return 0, nil, err
	}
	u = u.JoinPath("api", "v1", "namespaces", ns, "pods", pod, "portforward")
	rt, upgrader, err := spdy.RoundTripperFor(e.cfg)
	if err != nil {
		return 0, nil, err
	}
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: rt}, http.MethodPost, u)
	if ws, err := portforward.NewSPDYOverWebsocketDialer(u, e.cfg); err == nil {
		dialer = portforward.NewFallbackDialer(ws, dialer, func(err error) bool {
			return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
		})
	}
	fctx, cancel := context.WithCancel(ctx)
	ready := make(chan struct{})
	pf, err := portforward.NewOnAddressesWithContext(fctx, dialer, []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(port)}, ready, io.Discard, io.Discard)
	if err != nil {
		cancel()
		return 0, nil, err
	}
	done := make(chan error, 1)
	go func() { done <- pf.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		if err == nil {
			err = errors.New("the port-forward ended before it was ready")
		}
		return 0, nil, forwardErr(err)
	case <-ctx.Done():
		cancel()
		return 0, nil, ctx.Err()
	}
	ports, err := pf.GetPorts()
	if err != nil || len(ports) != 1 {
		cancel()
		return 0, nil, fmt.Errorf("the port-forward has no local port: %v", err)
	}
	stop := func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
	}
	return ports[0].Local, stop, nil
}

// forwardErr marks an upgrade the API server refused for want of a
// permission: a 403 status, or, as client-go reports a refused streaming
// upgrade, its message (RBAC's "… is forbidden: User … cannot …").
func forwardErr(err error) error {
	var se interface{ Status() metav1.Status }
	if (errors.As(err, &se) && se.Status().Code == http.StatusForbidden) || apierrors.IsForbidden(err) ||
		strings.Contains(err.Error(), " is forbidden: ") {
		return fmt.Errorf("%w: %v", errForbidden, err)
	}
	return err
}
