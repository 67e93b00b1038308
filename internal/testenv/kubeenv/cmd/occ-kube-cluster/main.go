// Command occ-kube-cluster starts the test environment's Kubernetes cluster
// (package testenv/kube) for people who want to look at it with kubectl,
// and keeps it up until SIGINT or SIGTERM. `make cluster-up` runs it in the
// background and `make cluster-down` stops it.
//
//	occ-kube-cluster -dir .dev/cluster
//
// It writes DIR/kubeconfig (admin, client certificate) and DIR/cluster.env
// (KUBECONFIG, the API server URL, the admin token) once the cluster is
// ready, and removes them and the cluster's data when it stops.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/occ-platform/terraform-provider-occ/internal/testenv/fakemodel"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/kubeenv"
)

func main() {
	dir := flag.String("dir", ".dev/cluster", "directory for the kubeconfig, the environment file and the cluster's data")
	nodes := flag.Int("nodes", 1, "number of kwok Nodes")
	realNode := flag.Bool("real-node", false, "also start the real node (containerd, kubelet, kube-proxy, CoreDNS in a network namespace; needs root and make testenv)")
	placement := flag.String("placement", kubeenv.PlacementKwok, "where Pods of a namespace without placement annotations run: kwok or real")
	keep := flag.Bool("keep", false, "keep the cluster's data directory after it stops (logs, for debugging)")
	modelKey := flag.String("model-key", "", "with -real-node: serve a local fake model endpoint inside the node's network namespace that accepts only this key (its URL goes to DIR/cluster.env as OCC_TESTENV_MODEL_URL)")
	kcmQPS := flag.Int("controller-manager-qps", 0, "the kube-controller-manager's client rate per second (burst twice it); 0 keeps its default of 20 (burst 30) per controller")
	flag.Parse()
	if err := run(*dir, *nodes, *realNode, *placement, *keep, *modelKey, *kcmQPS); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(dir string, nodes int, realNode bool, placement string, keep bool, modelKey string, kcmQPS int) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	c, err := kubeenv.Start(ctx, kubeenv.Options{
		Dir:                  dir,
		Nodes:                nodes,
		RealNode:             realNode,
		Placement:            placement,
		KeepDir:              keep,
		ControllerManagerQPS: kcmQPS,
		Logf:                 func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) },
	})
	if err != nil {
		return err
	}
	defer c.Stop()

	kubeconfig := filepath.Join(dir, "kubeconfig")
	envFile := filepath.Join(dir, "cluster.env")
	defer os.Remove(kubeconfig)
	defer os.Remove(envFile)
	data, err := c.Kubeconfig()
	if err != nil {
		return err
	}
	if err := os.WriteFile(kubeconfig, data, 0o600); err != nil {
		return err
	}
	env := fmt.Sprintf("KUBECONFIG=%s\nOCC_TESTENV_KUBE_HOST=%s\nOCC_TESTENV_KUBE_TOKEN=%s\n", kubeconfig, c.Host, c.Token)
	if modelKey != "" && c.Node != nil {
		// The model is local: a fake provider endpoint (OpenAI Responses
		// and chat completions, Anthropic Messages) that answers every call
		// with "ok" for modelKey and 401 for any other key. Nothing is billed.
		l, err := c.Node.ListenInNode("tcp", c.Node.NodeIP+":0")
		if err != nil {
			return fmt.Errorf("model endpoint in the node: %w", err)
		}
		srv := fakemodel.NewOn(l, fakemodel.Step{Kind: fakemodel.OK})
		srv.Accept = modelKey
		defer srv.Close()
		env += "OCC_TESTENV_MODEL_URL=" + srv.URL + "\n"
		fmt.Printf("  local model endpoint %s (inside the node's network namespace; nothing is billed)\n", srv.URL)
	}
	if err := os.WriteFile(envFile, []byte(env), 0o600); err != nil {
		return err
	}
	fmt.Printf("cluster up: Kubernetes %s at %s, kwok node(s) %v\n", c.ServerVersion, c.Host, c.Nodes)
	if c.Node != nil {
		fmt.Printf("  real node %s at %s (network namespace %s; Pods of namespaces without placement annotations run on %s)\n",
			c.Node.Name, c.Node.NodeIP, c.Node.NetNS, placement)
	}
	fmt.Printf("  export KUBECONFIG=%s\n", kubeconfig)
	if kubectl := filepath.Join(kubeenv.BinDir(), "kubectl"); fileExists(kubectl) {
		fmt.Printf("  %s get nodes   (kubectl from make testenv-kubectl)\n", kubectl)
	}
	fmt.Printf("  server logs: %s\n", filepath.Join(c.Dir, "logs"))
	fmt.Printf("stop with Ctrl-C (or make cluster-down)\n")

	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "stopping the cluster…")
	return nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
