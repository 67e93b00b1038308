package kubeenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
)

// Container logs come through the API server as for a real kubelet:
// `GET /api/v1/namespaces/NS/pods/POD/log?container=C` is proxied to kwok's
// kubelet API on the Pod's Node (127.0.0.1:PORT, certificate checked
// against the cluster CA), and kwok reads the file that a Logs object of
// kwok.x-k8s.io/v1alpha1 (named after the Pod, in its namespace) maps the
// container to. The files are in CRI log format, which kwok requires:
//
//	2026-11-29T10:13:38.360367512Z stdout F {"event":"codex.model_probe",...}

var logsGVR = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "logs"}

// criTimeFormat is the timestamp of a CRI log record (always 9 digits).
const criTimeFormat = "2006-01-02T15:04:05.000000000Z07:00"

// SetPodLogs makes lines the log of a container: what
// Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container})
// returns, one line each (a line must not contain a newline; one that does
// is split). It replaces earlier lines. The Pod need not exist yet; when it
// exists and is on a Node, SetPodLogs returns once the API server serves the
// new content.
func (c *Cluster) SetPodLogs(ctx context.Context, namespace, pod, container string, lines []string) error {
	return c.writePodLogs(ctx, namespace, pod, container, lines, false, false)
}

// AppendPodLogs adds lines to a container's log, as a running process
// would; a client following the log (Follow: true) receives them.
func (c *Cluster) AppendPodLogs(ctx context.Context, namespace, pod, container string, lines []string) error {
	return c.writePodLogs(ctx, namespace, pod, container, lines, false, true)
}

// SetPreviousPodLogs sets what PodLogOptions{Previous: true} returns: the log
// of the container's previous run (a crash-looping container).
func (c *Cluster) SetPreviousPodLogs(ctx context.Context, namespace, pod, container string, lines []string) error {
	return c.writePodLogs(ctx, namespace, pod, container, lines, true, false)
}

// CRILogLines formats lines as CRI log records on stdout, timestamps
// starting at t and one microsecond apart.
func CRILogLines(t time.Time, lines []string) []byte {
	var b bytes.Buffer
	for _, line := range splitLines(lines) {
		b.WriteString(t.UTC().Format(criTimeFormat))
		b.WriteString(" stdout F ")
		b.WriteString(line)
		b.WriteByte('\n')
		t = t.Add(time.Microsecond)
	}
	return b.Bytes()
}

func splitLines(lines []string) []string {
	var out []string
	for _, l := range lines {
		out = append(out, strings.Split(strings.TrimSuffix(l, "\n"), "\n")...)
	}
	return out
}

func (c *Cluster) podLogDir(namespace, pod string) string {
	return filepath.Join(c.Dir, "pod-logs", namespace, pod)
}

func (c *Cluster) writePodLogs(ctx context.Context, namespace, pod, container string, lines []string, previous, appendTo bool) error {
	if namespace == "" || pod == "" || container == "" {
		return errors.New("testenv/kubeenv: SetPodLogs needs a namespace, a pod and a container")
	}
	if strings.ContainsAny(container, "/\\") || container == "." || container == ".." {
		return fmt.Errorf("testenv/kubeenv: invalid container name %q", container)
	}
	c.logsMu.Lock()
	defer c.logsMu.Unlock()

	dir := c.podLogDir(namespace, pod)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	current := filepath.Join(dir, container+".log")
	prev := filepath.Join(dir, container+".previous.log")
	target := current
	if previous {
		target = prev
	}
	// Both files always exist (kwok refuses a missing file, not an empty one).
	for _, f := range []string{current, prev} {
		if _, err := os.Stat(f); errors.Is(err, os.ErrNotExist) {
			if err := os.WriteFile(f, nil, 0o644); err != nil {
				return err
			}
		}
	}
	records := CRILogLines(time.Now(), lines)
	if appendTo {
		fh, err := os.OpenFile(target, os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		_, err = fh.Write(records)
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	} else {
		// Write then rename, so that a reader never sees half a file.
		tmp := target + ".tmp"
		if err := os.WriteFile(tmp, records, 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, target); err != nil {
			return err
		}
	}
	if err := c.upsertLogsObject(ctx, namespace, pod, dir); err != nil {
		return err
	}
	if len(lines) == 0 {
		return nil
	}
	want := splitLines(lines)
	return c.waitLogsServed(ctx, namespace, pod, container, previous, want[len(want)-1])
}

// upsertLogsObject writes the Logs object of the Pod from the files in dir:
// one entry per container.
func (c *Cluster) upsertLogsObject(ctx context.Context, namespace, pod, dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var containers []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, ".previous.log") || !strings.HasSuffix(name, ".log") {
			continue
		}
		containers = append(containers, strings.TrimSuffix(name, ".log"))
	}
	sort.Strings(containers)
	logs := make([]any, 0, len(containers))
	for _, ctr := range containers {
		logs = append(logs, map[string]any{
			"containers":       []any{ctr},
			"logsFile":         filepath.Join(dir, ctr+".log"),
			"previousLogsFile": filepath.Join(dir, ctr+".previous.log"),
		})
	}
	client := c.Dynamic.Resource(logsGVR).Namespace(namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, err := client.Get(ctx, pod, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			obj = &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "kwok.x-k8s.io/v1alpha1",
				"kind":       "Logs",
				"metadata":   map[string]any{"name": pod, "namespace": namespace},
				"spec":       map[string]any{"logs": logs},
			}}
			_, err = client.Create(ctx, obj, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		if err := unstructured.SetNestedSlice(obj.Object, logs, "spec", "logs"); err != nil {
			return err
		}
		_, err = client.Update(ctx, obj, metav1.UpdateOptions{})
		return err
	})
}

// waitLogsServed waits, when the Pod is on a Node, until GetLogs returns
// content that ends with lastLine (kwok applies a changed Logs object in
// about 0.2 s).
func (c *Cluster) waitLogsServed(ctx context.Context, namespace, pod, container string, previous bool, lastLine string) error {
	p, err := c.Clientset.CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || (err == nil && p.Spec.NodeName == "") {
		return nil // nothing to ask yet
	}
	if err != nil {
		return err
	}
	deadline := time.Now().Add(15 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		got, err := c.Clientset.CoreV1().Pods(namespace).
			GetLogs(pod, &corev1.PodLogOptions{Container: container, Previous: previous}).DoRaw(ctx)
		switch {
		case err != nil:
			last = err
		case strings.HasSuffix(strings.TrimRight(string(got), "\n"), lastLine):
			return nil
		default:
			last = fmt.Errorf("log does not end with the new line yet: %q", tailString(string(got), 200))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("testenv/kubeenv: logs of %s/%s container %s not served: %v\n--- kwok log ---\n%s",
		namespace, pod, container, last, c.LogTail(BinKwok, 20))
}

func tailString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// ReadPodLogs is GetLogs as a string, for tests.
func (c *Cluster) ReadPodLogs(ctx context.Context, namespace, pod string, opts *corev1.PodLogOptions) (string, error) {
	rc, err := c.Clientset.CoreV1().Pods(namespace).GetLogs(pod, opts).Stream(ctx)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	return string(data), err
}
