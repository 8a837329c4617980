#!/usr/bin/env bash
# Validates an OLM bundle directory (default: bundle/) like `operator-sdk bundle validate
# --select-optional suite=operatorframework` would: hack/bundle-validate, built once and cached by
# hack/build-bundle-validate.sh, runs operator-framework/api's default bundle validators and the
# OperatorHub, capabilities, categories, good-practices and deprecated-API ones (against the
# Kubernetes version of the local control plane), and checks metadata/annotations.yaml and, for
# bundle/, that bundle.Dockerfile's LABELs match it.
# Usage: hack/validate-bundle.sh [-strict] [-dockerfile FILE] [BUNDLE_DIR]
# Exit status: the validator's (1 when the bundle is invalid).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
args=("$@")
dir=$repo/bundle
if [[ $# -gt 0 && -d ${!#} ]]; then   # the last argument, when it is a directory, is the bundle
  dir=${!#}
  args=("${args[@]:0:$#-1}")
fi
validator=$("$here/build-bundle-validate.sh")
k8s=$(awk '$1=="k8s.io/kubernetes"{print $2; exit}' "$repo/hack/testcluster/go.mod" | sed -E 's/^v([0-9]+\.[0-9]+).*/\1/')
if [[ $(cd "$dir" && pwd) == "$repo/bundle" && " ${args[*]-} " != *" -dockerfile "* ]]; then
  args+=(-dockerfile "$repo/bundle.Dockerfile")
fi
exec "$validator" -k8s-version "$k8s" ${args[@]+"${args[@]}"} "$dir"
