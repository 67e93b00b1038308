package runtimerecord

// Advice says what a held code means and what the operator does next; the
// executors put it into the apply diagnostic (PR8). It names no secret and
// no provider output.
func Advice(c Code) string {
	switch c {
	case CodeAuthenticationFailed:
		return "The model provider rejected the credential. Fix the credential source (a new value: bump value_wo_version; an existing Secret: update it) and apply again. A changed credential takes effect only through a new deployment whose model call succeeds."
	case CodeModelProbeTimeout:
		return "The model did not answer within the startup probe's budget. Check egress from the namespace to the model endpoint (for dedicated Codex a proxy must allow the WebSocket upgrade), then apply again to redeploy: nothing retries by itself and there is no automatic rollback."
	case CodeModelProbeFailed:
		return "The startup model call failed; causeKind and causeDetail say how. Fix the cause (model name, endpoint, quota) and apply again."
	case CodeModelProbeCPUStarved:
		return "The probe was starved of CPU by its limit. Raise kubernetes.cpu_limit on the compute and apply again."
	case CodeLoginFailed:
		return "Codex could not log in (failureClass says how). Check the credential source and egress to the provider, then apply again."
	case CodeUnavailable:
		return "The model provider was unavailable (overloaded or failing) after the one retry. When it recovers, apply again to redeploy."
	default:
		return ""
	}
}
