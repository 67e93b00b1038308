package kube

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

// The Pod verdict: what one Pod of a revision says about the revision's
// progress. Judging only, from the Pod and what it is given: no lock, no
// channel, no request, no clock. The gate (gateState.observe) keeps the
// books.

// podVerdict is the judgement of one Pod of a revision.
type podVerdict struct {
	// Component is the Pod's component (its render.LabelComponent label).
	Component string
	// Ready is the Pod's Ready condition being True.
	Ready bool
	// Phase is the gate's phase after this Pod: "startup" once one of its
	// containers runs while the gate was still "scheduling", otherwise the
	// phase judgePod was given.
	Phase string
	// Started is the container whose start moved the phase from
	// "scheduling" to "startup"; "" when this Pod did not move it.
	Started string
	// Failure is what fails the revision at once (UNSCHEDULABLE,
	// CRASH_LOOP, CONTAINER_CONFIG_FAILED, IMAGE_PULL_FAILED); nil while the
	// Pod merely progresses.
	Failure *Failure
	// WaitsForClaim is the scheduler's word when the Pod waits for a
	// volume claim to bind: not a failure of the Pod (the claim's own
	// Events say whether it can bind, watchClaim), "" otherwise.
	WaitsForClaim string
}

// judgePod judges one Pod of revision n of agent. phase is the gate's
// phase before this Pod; a crash loop is reported in the phase the Pod
// reached. The first failure found ends the judgement: what was judged
// before it (Ready, Started) is kept in the verdict.
func judgePod(pod *corev1.Pod, agent string, n int64, phase string) podVerdict {
	v := podVerdict{Component: pod.Labels[render.LabelComponent], Phase: phase}
	held := func(code executor.Code, container, phase, reason, next string) podVerdict {
		v.Failure = &Failure{Code: code, Agent: agent, Revision: n, Component: container, Phase: phase, Reason: reason, Next: next}
		return v
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			if waitsForClaim(c.Message) {
				// A claim being provisioned is not yet bound: the scheduler
				// retries once it is (and the claim's Events tell a claim
				// that never will).
				v.WaitsForClaim = c.Message
				continue
			}
			return held(executor.Unschedulable, v.Component, "scheduling", c.Message,
				"The cluster cannot place the Pod: lower the compute's cpu_limit or memory_limit, or add capacity, then apply again.")
		}
		// A terminating Pod never serves a revision: it is on its way out.
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && pod.DeletionTimestamp == nil {
			v.Ready = true
		}
	}
	for _, c := range pod.Status.ContainerStatuses {
		if w := c.State.Waiting; w != nil {
			switch w.Reason {
			case "CrashLoopBackOff":
				return held(executor.CrashLoop, c.Name, v.Phase,
					fmt.Sprintf("the container keeps exiting (%d restarts)%s", c.RestartCount, lastExit(c)),
					"Read the log lines below; fix the image or the configuration and apply again.")
			case "CreateContainerConfigError":
				// The kubelet would retry; a Secret or key that is not there
				// now rarely appears by itself, so say so at once.
				return held(executor.ContainerConfig, c.Name, "container configuration",
					fmt.Sprintf("%s: %s", w.Reason, w.Message),
					"A Secret or key the container needs is missing: check the credential source's Secret (secret_ref) and the configuration's secret_bindings in this namespace, create what is missing, then apply again.")
			case "ImagePullBackOff", "ErrImagePull", "InvalidImageName":
				return held(executor.ImagePull, c.Name, "image pull",
					fmt.Sprintf("%s: %s", w.Reason, w.Message),
					"Check the compute's runtime_image/codex_image and the namespace's image pull access, then apply again.")
			}
		}
		if c.State.Running != nil && v.Phase == "scheduling" {
			v.Phase, v.Started = "startup", c.Name
		}
	}
	return v
}

// waitsForClaim reports whether the scheduler's message says the Pod
// waits for a volume claim to bind or be provisioned.
func waitsForClaim(msg string) bool {
	return strings.Contains(msg, "unbound immediate PersistentVolumeClaims") ||
		strings.Contains(msg, "VolumeBinding") ||
		(strings.Contains(msg, "persistentvolumeclaim") && strings.Contains(msg, "not found"))
}

func lastExit(c corev1.ContainerStatus) string {
	if t := c.LastTerminationState.Terminated; t != nil {
		return fmt.Sprintf("; last exit code %d (%s)", t.ExitCode, t.Reason)
	}
	return ""
}
