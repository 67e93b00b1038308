package kube

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/executor"
)

// replicaFailureNext says what to fix about a Pod the API server refuses,
// by what refused it.
func replicaFailureNext(msg string) string {
	if strings.Contains(msg, "PriorityClass") {
		return "Create the PriorityClass the compute's priority_class_name names (a cluster-wide object the provider never creates), or change or remove priority_class_name, then apply again."
	}
	return "Fix what refuses the Pod (the namespace's ResourceQuota or LimitRange, an admission policy) or lower the compute's cpu_limit/memory_limit, then apply again."
}

// checkStalled looks, only while a workload still has no Pod, at its
// Deployment's ReplicaFailure condition, so that a Pod the API server
// refuses to create fails the apply with the reason instead of at the
// deadline. The Pod watch sees every Pod that exists; a Pod that is never
// created leaves no event there, hence these few reads, spaced out (3 s,
// then doubling to 30 s) and never made in the common case.
func (e *Executor) checkStalled(ctx context.Context, ns string, workloads map[string]string, st *gateState) {
	wait := 3 * time.Second
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		unseen := st.unseen(workloads)
		if len(unseen) == 0 {
			return
		}
		for _, c := range unseen {
			d, err := e.Client.AppsV1().Deployments(ns).Get(ctx, workloads[c], metav1.GetOptions{})
			if err != nil {
				continue
			}
			for _, cond := range d.Status.Conditions {
				if cond.Type == appsv1.DeploymentReplicaFailure && cond.Status == corev1.ConditionTrue {
					st.fail(&Failure{Code: executor.ReplicaFailure, Component: c, Phase: "pod creation",
						Reason: fmt.Sprintf("Deployment %s cannot create its Pod: %s: %s", d.Name, cond.Reason, cond.Message),
						Next:   replicaFailureNext(cond.Message)})
					return
				}
			}
		}
		wait = min(2*wait, 30*time.Second)
	}
}
