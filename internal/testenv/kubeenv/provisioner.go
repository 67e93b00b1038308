package kubeenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// The test environment's storage: a default StorageClass whose claims a
// small provisioner in the test process binds to hostPath volumes under
// the cluster's data directory, as the local-path provisioner of kind and
// k3s does. On the real node the kubelet mounts the directory into the
// Pod (the node shares the host's filesystem; only its network is its
// own), so a file written in a Pod is on disk across Pod restarts and new
// Pods; on kwok nothing mounts it, but the claim binds the same way.
// Claims of any other class are left alone, so a class that does not
// exist stays unbound, with the persistent volume controller's Events.
const (
	// StorageClass is the default StorageClass of every test cluster.
	StorageClass = "occ-testenv-local"
	// Provisioner names the provisioner of StorageClass.
	Provisioner = "testenv.occ-platform.io/hostpath"

	annotationProvisionedBy = "pv.kubernetes.io/provisioned-by"
	annotationDefaultClass  = "storageclass.kubernetes.io/is-default-class"
)

// VolumeDir is where the volume bound to a claim keeps its files, by the
// volume's name.
func (c *Cluster) VolumeDir(volume string) string {
	return filepath.Join(c.Dir, "volumes", volume)
}

// startProvisioner creates the default StorageClass and runs the
// provisioner until ctx ends: each Pending claim of the class gets a
// volume sized as it asks; a larger request grows the volume and the
// claim's capacity (the class allows expansion: a directory has no size);
// a released volume is deleted with its directory (reclaim policy Delete).
func (c *Cluster) startProvisioner(ctx context.Context) error {
	expand, bind, reclaim := true, storagev1.VolumeBindingImmediate, corev1.PersistentVolumeReclaimDelete
	sc := &storagev1.StorageClass{
		ObjectMeta:           metav1.ObjectMeta{Name: StorageClass, Annotations: map[string]string{annotationDefaultClass: "true"}},
		Provisioner:          Provisioner,
		AllowVolumeExpansion: &expand,
		VolumeBindingMode:    &bind,
		ReclaimPolicy:        &reclaim,
	}
	if _, err := c.Clientset.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create StorageClass %s: %w", StorageClass, err)
	}
	f := informers.NewSharedInformerFactory(c.Clientset, 10*time.Minute)
	claims, volumes := f.Core().V1().PersistentVolumeClaims().Informer(), f.Core().V1().PersistentVolumes().Informer()
	onClaim := func(obj any) {
		if pvc, ok := obj.(*corev1.PersistentVolumeClaim); ok {
			c.provision(ctx, pvc)
		}
	}
	if _, err := claims.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onClaim, UpdateFunc: func(_, obj any) { onClaim(obj) }}); err != nil {
		return err
	}
	onVolume := func(obj any) {
		if pv, ok := obj.(*corev1.PersistentVolume); ok {
			c.reclaim(ctx, pv)
		}
	}
	if _, err := volumes.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onVolume, UpdateFunc: func(_, obj any) { onVolume(obj) }}); err != nil {
		return err
	}
	f.Start(ctx.Done())
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("the provisioner's %v informer did not sync", typ)
		}
	}
	return nil
}

// provision gives a Pending claim of the class its volume, or grows the
// volume of a bound claim that asks for more.
func (c *Cluster) provision(ctx context.Context, pvc *corev1.PersistentVolumeClaim) {
	if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != StorageClass || pvc.DeletionTimestamp != nil {
		return
	}
	want := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	name := "pvc-" + string(pvc.UID)
	if pvc.Spec.VolumeName != "" {
		have := pvc.Status.Capacity[corev1.ResourceStorage]
		if pvc.Status.Phase != corev1.ClaimBound || want.Cmp(have) <= 0 {
			return
		}
		// Grow: the volume, then the claim's status, as a resizer does.
		pv, err := c.Clientset.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			return
		}
		pv.Spec.Capacity[corev1.ResourceStorage] = want
		if _, err := c.Clientset.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
			return
		}
		pvc = pvc.DeepCopy()
		pvc.Status.Capacity[corev1.ResourceStorage] = want
		_, _ = c.Clientset.CoreV1().PersistentVolumeClaims(pvc.Namespace).UpdateStatus(ctx, pvc, metav1.UpdateOptions{})
		return
	}
	if pvc.Status.Phase != corev1.ClaimPending {
		return
	}
	dir := c.VolumeDir(name)
	// World-writable, as the local-path provisioner makes its directories:
	// a hostPath volume is not chowned to the Pod's fsGroup.
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return
	}
	_ = os.Chmod(dir, 0o777)
	hostPath := corev1.HostPathDirectoryOrCreate
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{annotationProvisionedBy: Provisioner}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: want},
			AccessModes:                   pvc.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              StorageClass,
			ClaimRef:                      &corev1.ObjectReference{APIVersion: "v1", Kind: "PersistentVolumeClaim", Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &hostPath}},
		},
	}
	if _, err := c.Clientset.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) && c.opts.Logf != nil {
		c.opts.Logf("testenv/kubeenv: provisioner: create %s for %s/%s: %v", name, pvc.Namespace, pvc.Name, err)
	}
}

// reclaim deletes a released volume of the class and its directory.
func (c *Cluster) reclaim(ctx context.Context, pv *corev1.PersistentVolume) {
	if pv.Annotations[annotationProvisionedBy] != Provisioner || pv.Status.Phase != corev1.VolumeReleased || pv.DeletionTimestamp != nil {
		return
	}
	if err := c.Clientset.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{}); err == nil || apierrors.IsNotFound(err) {
		_ = os.RemoveAll(c.VolumeDir(pv.Name))
	}
}
