// Command testcluster is a multi-call binary for the project's local Kubernetes control plane.
//
// The first argument names the component; the rest are that component's own flags:
//
//	testcluster etcd --data-dir DIR --listen-client-url URL --listen-peer-url URL
//	testcluster kube-apiserver [flags]
//	testcluster kube-controller-manager [flags]
//	testcluster kube-scheduler [flags]
//	testcluster kubelet [flags]
//	testcluster kube-proxy [flags]
//	testcluster hostpath-provisioner --kubeconfig FILE --root DIR
//	testcluster kubectl [args]
//	testcluster version
//
// Each component runs as its own process (hack/cluster starts them), because the Kubernetes
// components register global flags and metrics that clash when two share a process.
package main

import (
	"context"
	"fmt"
	"os"
	_ "time/tzdata" // time zones for CronJob, as upstream's kube-apiserver and kube-controller-manager link

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/component-base/version"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

func usage() {
	fmt.Fprintln(os.Stderr, "usage: testcluster etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|kube-proxy|hostpath-provisioner|kubectl|version [args]")
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	component := os.Args[1]
	// Every component parses os.Args[1:]; drop the multi-call name so each sees its own flags.
	os.Args = append([]string{component}, os.Args[2:]...)
	switch component {
	case "etcd":
		os.Exit(runEtcd(os.Args[1:]))
	case "kube-apiserver":
		os.Exit(cli.Run(apiserver.NewAPIServerCommand()))
	case "kube-controller-manager":
		os.Exit(cli.Run(controllermanager.NewControllerManagerCommand()))
	case "kube-scheduler":
		os.Exit(cli.Run(scheduler.NewSchedulerCommand()))
	case "kubelet":
		os.Exit(cli.Run(kubelet.NewKubeletCommand(context.Background())))
	case "kube-proxy":
		os.Exit(cli.Run(proxy.NewProxyCommand()))
	case "hostpath-provisioner":
		os.Exit(runProvisioner(os.Args[1:]))
	case "kubectl":
		command := cmd.NewDefaultKubectlCommand()
		if err := cli.RunNoErrOutput(command); err != nil {
			util.CheckErr(err)
		}
	case "version":
		fmt.Println(version.Get().GitVersion)
	default:
		usage()
	}
}
