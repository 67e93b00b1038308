// Package kubeenv starts a real Kubernetes control plane for tests: etcd,
// kube-apiserver, kube-controller-manager and kube-scheduler, with kwok
// simulating the Nodes and the lifecycle of Pods, all on loopback, on free
// ports, with a fresh CA and certificates per start and RBAC on.
//
// The binaries come from `make testenv` (testenv/build.sh), which builds
// them once from the Go module proxy into a cache outside the repository;
// see BinDir. One cluster per test binary:
//
//	func TestMain(m *testing.M) { os.Exit(kubeenv.Main(m)) }
//
//	func TestSomething(t *testing.T) {
//		c := kubeenv.Shared(t) // skips outside CI when the binaries are missing
//		ns := c.TestNamespace(t)
//		...
//	}
//
// Pods become Running and Ready at once unless their annotations select a
// runtime behaviour (Behavior, AnnotationBehavior): ready after a delay,
// never ready, crash-looping, image pull failure. Container logs are read
// through the API server as from a kubelet; SetPodLogs chooses them.
//
// Only tests and the `make cluster-up` tool use this package.
package kubeenv
