package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
)

// The host-path provisioner provisions PersistentVolumes as directories under one root on this
// machine, as the local-path provisioners of kind and k3s do.
//
// Unlike kube-controller-manager's built-in host-path provisioner (directories 0750 under /tmp,
// left behind when the cluster stops), each volume is a directory of mode 0777 under the cluster's
// own state folder: a non-root database (PostgreSQL as uid 999) can write it, and `hack/cluster
// down` removes every volume with the cluster. A Released volume whose reclaim policy is Delete
// loses its directory and its PV. The capacity is recorded, not enforced (a host path has no quota),
// so growing a claim of a class that allows expansion completes at once (resize).
//
// It follows the external-provisioner protocol: the PV controller marks a claim of a class whose
// provisioner is ours with volume.kubernetes.io/storage-provisioner; we create a PV named
// pvc-<claim uid> pre-bound to the claim (so a retry finds it), and the PV controller binds them.
// Classes of a second provisioner name (--sized-name, sampledb.io/sized) get volumes whose size is
// enforced: each directory is a tmpfs mount of the claim's size (memory-backed, so only for tests
// of small volumes), grown in place by a resize (a remount with the new size), unmounted before it
// is removed. A full volume fails writes with ENOSPC as a real disk does, and a test may remount it
// read-only. `hack/cluster down` unmounts whatever is left under the root. With --sized-node, a
// sized class with the parameter `volume: local` gets `local` PVs bound to that node (the real
// node) instead of host paths: the kubelet then reports their statistics (kubelet_volume_stats_*,
// from statfs) as a CSI driver's volumes have them reported, where a host path reports none. (The
// kubelet's own bind mount of a local volume lives as long as the pod: a test that remounts the
// file system read-only and back uses a host path, which each container start mounts afresh.)
//
// A claim it cannot provision (a class with a parameter it does not take; block mode; the
// directory or the PV not made) gets a Warning Event ProvisioningFailed, as external-provisioner
// records, and is retried with backoff (at most 30 s apart) until it can.
const (
	provisionedByAnnotation = "pv.kubernetes.io/provisioned-by"
	provisionerAnnotation   = "volume.kubernetes.io/storage-provisioner"
	defaultClassAnnotation  = "storageclass.kubernetes.io/is-default-class"
)

type hostPathProvisioner struct {
	name    string
	sized   string // the provisioner name of size-enforcing classes ("" for none)
	node    string // the node sized volumes are local PVs of ("" for host paths)
	root    string
	client  kubernetes.Interface
	pvcs    cache.Indexer
	pvs     cache.Indexer
	classes cache.Indexer
	queue   workqueue.TypedRateLimitingInterface[string]
	events  record.EventRecorder
}

// failed records why a claim cannot be provisioned and returns it as the error to retry on.
func (p *hostPathProvisioner) failed(pvc *v1.PersistentVolumeClaim, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	p.events.Event(pvc, v1.EventTypeWarning, "ProvisioningFailed", err.Error())
	return err
}

func (p *hostPathProvisioner) className(pvc *v1.PersistentVolumeClaim) string {
	if pvc.Spec.StorageClassName != nil {
		return *pvc.Spec.StorageClassName
	}
	for _, obj := range p.classes.List() {
		if sc := obj.(*storagev1.StorageClass); sc.Annotations[defaultClassAnnotation] == "true" {
			return sc.Name
		}
	}
	return ""
}

// provision makes the directory and the PV of one pending claim; idempotent.
func (p *hostPathProvisioner) provision(ctx context.Context, key string) error {
	obj, exists, err := p.pvcs.GetByKey(key)
	if err != nil || !exists {
		return err
	}
	pvc := obj.(*v1.PersistentVolumeClaim)
	if pvc.Spec.VolumeName != "" && pvc.Status.Phase == v1.ClaimBound {
		return p.resize(ctx, pvc)
	}
	if pvc.Spec.VolumeName != "" || pvc.Status.Phase != v1.ClaimPending || pvc.DeletionTimestamp != nil {
		return nil
	}
	classObj, exists, err := p.classes.GetByKey(p.className(pvc))
	if err != nil || !exists {
		return err
	}
	sc := classObj.(*storagev1.StorageClass)
	if !p.ours(sc.Provisioner) {
		return nil
	}
	local := false
	for _, key := range slices.Sorted(maps.Keys(sc.Parameters)) {
		if sc.Provisioner == p.sized && key == "volume" && p.node != "" && (sc.Parameters[key] == "local" || sc.Parameters[key] == "hostPath") {
			local = sc.Parameters[key] == "local"
			continue
		}
		return p.failed(pvc, "storage class %q: unknown parameter %q (the provisioner %s takes none)", sc.Name, key, p.name)
	}
	if pvc.Spec.VolumeMode != nil && *pvc.Spec.VolumeMode == v1.PersistentVolumeBlock {
		return p.failed(pvc, "volume mode Block is not supported by the provisioner %s: only Filesystem", p.name)
	}
	pvName := "pvc-" + string(pvc.UID)
	if _, exists, _ := p.pvs.GetByKey(pvName); exists {
		return nil
	}
	dir := filepath.Join(p.root, fmt.Sprintf("%s_%s_%s", pvc.Namespace, pvc.Name, pvName))
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return p.failed(pvc, "cannot make the volume's directory: %v", err)
	}
	if err := os.Chmod(dir, 0o777); err != nil { // MkdirAll's mode is filtered by the umask
		return p.failed(pvc, "cannot make the volume's directory writable: %v", err)
	}
	if sc.Provisioner == p.sized {
		size := pvc.Spec.Resources.Requests[v1.ResourceStorage]
		if err := mountSized(dir, size.Value(), false); err != nil {
			return p.failed(pvc, "cannot mount a volume of %s: %v", size.String(), err)
		}
	}
	reclaim := v1.PersistentVolumeReclaimDelete
	if sc.ReclaimPolicy != nil {
		reclaim = *sc.ReclaimPolicy
	}
	dirType := v1.HostPathDirectory
	source := v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: dir, Type: &dirType}}
	var affinity *v1.VolumeNodeAffinity
	if local {
		source = v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: dir}}
		affinity = &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
			MatchExpressions: []v1.NodeSelectorRequirement{{
				Key: "kubernetes.io/hostname", Operator: v1.NodeSelectorOpIn, Values: []string{p.node}}}}}}}
	}
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:        pvName,
			Annotations: map[string]string{provisionedByAnnotation: sc.Provisioner},
		},
		Spec: v1.PersistentVolumeSpec{
			StorageClassName:              sc.Name,
			PersistentVolumeReclaimPolicy: reclaim,
			AccessModes:                   pvc.Spec.AccessModes,
			Capacity:                      v1.ResourceList{v1.ResourceStorage: pvc.Spec.Resources.Requests[v1.ResourceStorage]},
			ClaimRef: &v1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID},
			PersistentVolumeSource: source,
			NodeAffinity:           affinity,
		},
	}
	_, err = p.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return p.failed(pvc, "cannot create the PersistentVolume %s: %v", pvName, err)
	}
	return nil
}

// resize grows a bound volume of ours to what its claim now requests, as an external resizer
// would: the PV's capacity first, then the claim's status (a directory has no size to change).
// Only for classes that allow expansion; the API server refuses a request to shrink.
func (p *hostPathProvisioner) resize(ctx context.Context, pvc *v1.PersistentVolumeClaim) error {
	want, ok := pvc.Spec.Resources.Requests[v1.ResourceStorage]
	if !ok {
		return nil
	}
	have := pvc.Status.Capacity[v1.ResourceStorage]
	if want.Cmp(have) <= 0 {
		return nil
	}
	obj, exists, err := p.pvs.GetByKey(pvc.Spec.VolumeName)
	if err != nil || !exists {
		return err
	}
	pv := obj.(*v1.PersistentVolume)
	if !p.ours(pv.Annotations[provisionedByAnnotation]) {
		return nil
	}
	classObj, exists, err := p.classes.GetByKey(pv.Spec.StorageClassName)
	if err != nil || !exists {
		return err
	}
	if sc := classObj.(*storagev1.StorageClass); sc.AllowVolumeExpansion == nil || !*sc.AllowVolumeExpansion {
		return nil
	}
	if dir := volumeDir(pv); pv.Annotations[provisionedByAnnotation] == p.sized && dir != "" {
		if err := mountSized(dir, want.Value(), true); err != nil {
			return err
		}
	}
	if current := pv.Spec.Capacity[v1.ResourceStorage]; want.Cmp(current) > 0 {
		pv = pv.DeepCopy()
		pv.Spec.Capacity = v1.ResourceList{v1.ResourceStorage: want}
		if _, err := p.client.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	pvc = pvc.DeepCopy()
	pvc.Status.Capacity = v1.ResourceList{v1.ResourceStorage: want}
	pvc.Status.AllocatedResources = v1.ResourceList{v1.ResourceStorage: want}
	pvc.Status.AllocatedResourceStatuses = nil
	pvc.Status.Conditions = nil
	_, err = p.client.CoreV1().PersistentVolumeClaims(pvc.Namespace).UpdateStatus(ctx, pvc, metav1.UpdateOptions{})
	return err
}

// reclaim removes the directory and the PV of a Released volume of ours with policy Delete.
func (p *hostPathProvisioner) reclaim(ctx context.Context, name string) error {
	obj, exists, err := p.pvs.GetByKey(name)
	if err != nil || !exists {
		return err
	}
	pv := obj.(*v1.PersistentVolume)
	if !p.ours(pv.Annotations[provisionedByAnnotation]) || pv.Status.Phase != v1.VolumeReleased ||
		pv.Spec.PersistentVolumeReclaimPolicy != v1.PersistentVolumeReclaimDelete || volumeDir(pv) == "" {
		return nil
	}
	dir := filepath.Clean(volumeDir(pv))
	if !strings.HasPrefix(dir, p.root+string(filepath.Separator)) {
		return nil // not a directory of ours: never remove it
	}
	if mounted(dir) {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			return fmt.Errorf("unmounting %s: %w", dir, err)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	err = p.client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &pv.UID}})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// volumeDir: the directory of a PV of ours (a host path or a local volume), "" for another source.
func volumeDir(pv *v1.PersistentVolume) string {
	switch {
	case pv.Spec.HostPath != nil:
		return pv.Spec.HostPath.Path
	case pv.Spec.Local != nil:
		return pv.Spec.Local.Path
	}
	return ""
}

// ours: whether a provisioner name is one this process serves.
func (p *hostPathProvisioner) ours(name string) bool {
	return name == p.name || (p.sized != "" && name == p.sized)
}

// mounted: whether dir is a mount point (another device than its parent's).
func mounted(dir string) bool {
	var self, parent syscall.Stat_t
	if syscall.Stat(dir, &self) != nil || syscall.Stat(filepath.Dir(dir), &parent) != nil {
		return false
	}
	return self.Dev != parent.Dev
}

// mountSized makes dir a tmpfs of `bytes` (idempotent), or with grow, resizes the one there to
// `bytes` (the API server refuses a claim that shrinks).
func mountSized(dir string, bytes int64, grow bool) error {
	options := fmt.Sprintf("size=%d,mode=0777", bytes)
	if mounted(dir) {
		if !grow {
			return nil
		}
		return syscall.Mount("sampledb-volume", dir, "tmpfs", syscall.MS_REMOUNT, options)
	}
	return syscall.Mount("sampledb-volume", dir, "tmpfs", 0, options)
}

func (p *hostPathProvisioner) work(ctx context.Context) {
	for {
		key, shutdown := p.queue.Get()
		if shutdown {
			return
		}
		kind, rest, _ := strings.Cut(key, "/")
		var err error
		if kind == "pvc" {
			err = p.provision(ctx, rest)
		} else {
			err = p.reclaim(ctx, rest)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "hostpath-provisioner: %s: %v (retrying)\n", key, err)
			p.queue.AddRateLimited(key)
		} else {
			p.queue.Forget(key)
		}
		p.queue.Done(key)
	}
}

// runProvisioner: testcluster hostpath-provisioner --kubeconfig FILE --root DIR [--name NAME] [--sized-node NODE].
func runProvisioner(args []string) int {
	fs := flag.NewFlagSet("hostpath-provisioner", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the cluster (required)")
	root := fs.String("root", "", "directory that holds the volumes (required)")
	name := fs.String("name", "sampledb.io/hostpath", "provisioner name the StorageClasses use")
	sized := fs.String("sized-name", "sampledb.io/sized", "provisioner name of size-enforcing classes (\"\": none)")
	node := fs.String("sized-node", "", "node whose local PVs the size-enforcing volumes are (\"\": host paths)")
	workers := fs.Int("workers", 4, "concurrent provisioning workers")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *kubeconfig == "" || *root == "" {
		fmt.Fprintln(os.Stderr, "hostpath-provisioner: --kubeconfig and --root are required")
		return 2
	}
	absRoot, err := filepath.Abs(*root)
	if err == nil {
		err = os.MkdirAll(absRoot, 0o755)
	}
	var client kubernetes.Interface
	if err == nil {
		cfg, cfgErr := clientcmd.BuildConfigFromFlags("", *kubeconfig)
		if cfgErr == nil {
			cfg.QPS, cfg.Burst = 100, 200
			client, err = kubernetes.NewForConfig(cfg)
		} else {
			err = cfgErr
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "hostpath-provisioner:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	factory := informers.NewSharedInformerFactory(client, 10*time.Minute)
	pvcInformer := factory.Core().V1().PersistentVolumeClaims().Informer()
	pvInformer := factory.Core().V1().PersistentVolumes().Informer()
	classInformer := factory.Storage().V1().StorageClasses().Informer()
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	p := &hostPathProvisioner{
		events: broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: *name}),
		name:   *name, sized: *sized, node: *node, root: absRoot, client: client,
		pvcs: pvcInformer.GetIndexer(), pvs: pvInformer.GetIndexer(), classes: classInformer.GetIndexer(),
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](
			100*time.Millisecond, 30*time.Second)),
	}
	enqueue := func(prefix string) cache.ResourceEventHandlerFuncs {
		add := func(obj any) {
			if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
				p.queue.Add(prefix + "/" + key)
			}
		}
		return cache.ResourceEventHandlerFuncs{AddFunc: add, UpdateFunc: func(_, obj any) { add(obj) }}
	}
	if _, err := pvcInformer.AddEventHandler(enqueue("pvc")); err != nil {
		fmt.Fprintln(os.Stderr, "hostpath-provisioner:", err)
		return 1
	}
	if _, err := pvInformer.AddEventHandler(enqueue("pv")); err != nil {
		fmt.Fprintln(os.Stderr, "hostpath-provisioner:", err)
		return 1
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	for i := 0; i < *workers; i++ {
		go p.work(ctx)
	}
	<-ctx.Done()
	p.queue.ShutDown()
	factory.Shutdown()
	return 0
}
