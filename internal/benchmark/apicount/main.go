// Command apicount prints how many requests a Kubernetes API server has
// served, cluster-wide: the sum of its apiserver_request_total counters
// (every client: the providers under test, the controllers, kwok). Two
// readings around a terraform run give what that run cost the cluster;
// scripts/bench-apply.sh takes them. It reads /metrics with the
// kubeconfig's credentials (the local control plane's admin).
//
//	apicount KUBECONFIG
package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: apicount KUBECONFIG")
		os.Exit(2)
	}
	n, err := count(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "apicount:", err)
		os.Exit(1)
	}
	fmt.Println(n)
}

func count(kubeconfig string) (int64, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return 0, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading /metrics: %w", err)
	}
	return sumCounter(body, "apiserver_request_total")
}

// sumCounter adds up every sample of a counter in Prometheus text format.
func sumCounter(body []byte, name string) (int64, error) {
	var total float64
	seen := false
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		fields := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, fmt.Errorf("%q: %w", line, err)
		}
		total, seen = total+v, true
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if !seen {
		return 0, fmt.Errorf("no %s in the API server's metrics", name)
	}
	return int64(total), nil
}
