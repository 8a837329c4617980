// Command coredns is CoreDNS with only the plugins the local cluster's DNS needs.
//
// It serves the cluster domain from the Kubernetes API (the kubernetes plugin) and refuses every
// other name: the local cluster has no upstream resolver, and nothing a pod asks may leave the
// machine. Building CoreDNS with a short plugin list (instead of its default of ~60, with cloud
// SDKs) keeps the cold build and the binary small; the plugin code is CoreDNS's own, unchanged.
package main

import (
	_ "github.com/coredns/coredns/core/dnsserver" // the "dns" server type
	"github.com/coredns/coredns/coremain"
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/template"
)

func main() {
	coremain.Run()
}
