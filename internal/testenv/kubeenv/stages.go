package kubeenv

import (
	"embed"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The kwok configuration this package owns: the Stages (kwok/stages.yaml,
// passed with -c) and the CRDs of kwok's Logs and ClusterLogs, installed
// before kwok starts so that logs can be set while the cluster runs.
//
//go:embed kwok/stages.yaml kwok/kwok.x-k8s.io_logs.yaml kwok/kwok.x-k8s.io_clusterlogs.yaml
var kwokFiles embed.FS

const (
	stagesFile = "kwok/stages.yaml"
)

var kwokCRDFiles = []string{"kwok/kwok.x-k8s.io_logs.yaml", "kwok/kwok.x-k8s.io_clusterlogs.yaml"}

// AnnotationBehavior selects a simulated runtime behaviour for a Pod (set it
// in the Pod template). Without it, a Pod becomes Running and Ready at once.
const AnnotationBehavior = "testenv.occ.dev/behavior"

// AnnotationDelay is a Go duration ("3s") for the behaviours that take one:
// the time to Ready for BehaviorReadyAfter (default 2s), the time between
// restarts for BehaviorCrashLoop (default 1s).
const AnnotationDelay = "testenv.occ.dev/delay"

// Values of AnnotationBehavior.
const (
	// BehaviorReadyAfter: Running with its containers started but not ready,
	// then Ready after AnnotationDelay.
	BehaviorReadyAfter = "ready-after"
	// BehaviorNeverReady: Running, containers started=true and ready=false,
	// for ever. Removing the annotation makes the Pod Ready.
	BehaviorNeverReady = "never-ready"
	// BehaviorCrashLoop: Running, every container waiting in
	// CrashLoopBackOff with lastState.terminated (exit code 1), its
	// restartCount growing by one every AnnotationDelay.
	BehaviorCrashLoop = "crash-loop"
	// BehaviorImagePullBackOff: Pending, every container waiting in
	// ImagePullBackOff.
	BehaviorImagePullBackOff = "image-pull-backoff"
	// BehaviorContainerConfigError: Pending, every container waiting in
	// CreateContainerConfigError (secret "missing-secret" not found), as a
	// kubelet reports a Secret an env or volume refers to that is missing.
	BehaviorContainerConfigError = "container-config-error"
)

// Behavior returns Pod annotations that select behavior, with the delay
// when it is not zero. Merge them into a Pod template's annotations.
func Behavior(behavior string, delay time.Duration) map[string]string {
	a := map[string]string{AnnotationBehavior: behavior}
	if delay > 0 {
		a[AnnotationDelay] = delay.String()
	}
	return a
}

// PodReady reports whether the Pod's Ready condition is True.
func PodReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
