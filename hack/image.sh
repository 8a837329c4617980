#!/usr/bin/env bash
# hack/image.sh: builds the operator's image from the repository's Dockerfile and loads it into a local cluster
# or pushes it to a registry, then prints the kustomize `images:` override and the Helm values that point an
# install at it. `make image ARGS='...'` runs it.
#
#   hack/image.sh [build] [OPTIONS]          build; print the image's name and the archive it is saved to
#   hack/image.sh load kind [--name CLUSTER] [OPTIONS]
#                                            build, then `kind load image-archive` (CLUSTER: $KIND_CLUSTER_NAME or kind)
#   hack/image.sh load k3s [OPTIONS]         build, then `k3s ctr images import` (through sudo when not root)
#   hack/image.sh load minikube [--name PROFILE] [OPTIONS]
#                                            build, then `minikube image load`
#   hack/image.sh push REF [OPTIONS]         build as REF (REPOSITORY[:TAG]; TAG defaults to the version), push it
#
# OPTIONS:
#   --tag REF        the image's name (default: the Deployment's repository, ghcr.io/sampledb/sampledb-operator,
#                    tagged with the operator's version, pyproject.toml's `version`)
#   --base IMAGE     the Dockerfile's ARG BASE (default: the Dockerfile's own, python:3.11-slim); a short name is
#                    Docker Hub's, as docker reads it (passed as docker.io/library/python:3.11-slim)
#   --builder NAME   docker, podman or buildah (default: the first found of them; docker only if its daemon answers)
#   --local-base     no registry needed for the base: build the image as the project's local cluster does,
#                    with buildah on a Python base bootstrapped from Debian's packages (hack/build-images.sh; root,
#                    buildah and mmdebstrap). Its name is localhost/sampledb/sampledb-operator:KEY (KEY: a hash
#                    of its inputs), so --tag and --base do not apply.
#
# The archive is a docker archive (an OCI archive with --local-base) under
# ${SAMPLEDB_CACHE:-~/.cache/sampledb-operator}/images/archives (--local-base: the one hack/build-images.sh
# lists in images/images.list). The build context is a temporary copy of the files the image needs (git's
# tracked and unignored Dockerfile, pyproject.toml, README.md and operator/), never the whole work tree.
# A push goes through the builder that built the image (and so its registry login); the --local-base archive is
# pushed with skopeo when it is installed, otherwise with buildah.
#
# Environment:
#   SAMPLEDB_CACHE          the cache folder (default ~/.cache/sampledb-operator)
#   SAMPLEDB_IMAGE_BUILDER  as --builder
#   SAMPLEDB_BUILD_IMAGES   the script --local-base runs (default hack/build-images.sh)
#   KIND_CLUSTER_NAME       kind's cluster when --name is not given (default kind)
set -euo pipefail
shopt -s inherit_errexit

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
cache_root=${SAMPLEDB_CACHE:-$HOME/.cache/sampledb-operator}
build_images=${SAMPLEDB_BUILD_IMAGES:-$here/build-images.sh}

log() { echo "image: $*" >&2; }
die() { echo "image: $*" >&2; exit 1; }
usage() {
  cat <<'EOF'
usage: hack/image.sh [build] [--tag REF] [--base IMAGE] [--builder docker|podman|buildah] [--local-base]
       hack/image.sh load kind [--name CLUSTER] [build options]
       hack/image.sh load k3s [build options]
       hack/image.sh load minikube [--name PROFILE] [build options]
       hack/image.sh push REF [build options]
(make image ARGS='load kind'; see the header of hack/image.sh)
EOF
}
bad_usage() { echo "image: $*" >&2; usage >&2; exit 2; }
have() { command -v "$1" >/dev/null 2>&1; }

# The operator's version: pyproject.toml's [project] version, its single source (the package reads its
# __version__ from the installed metadata, which comes from there).
read_version() {
  local v
  v=$(sed -nE '/^\[project\]/,/^\[/ s/^version[[:space:]]*=[[:space:]]*"([^"]+)".*/\1/p' "$repo/pyproject.toml" \
    | sed -n 1p)
  [[ -n $v ]] || die "cannot read the operator's version from pyproject.toml"
  echo "$v"
}

# The repository of the image the kustomize Deployment names (what a kustomize `images:` entry matches).
deployment_repository() {
  local image
  image=$(sed -nE 's/^[[:space:]]*image:[[:space:]]*"?([^"[:space:]]+)"?.*/\1/p' \
    "$repo/manifests/operator/deployment.yaml" 2>/dev/null | sed -n 1p)
  image=${image:-ghcr.io/sampledb/sampledb-operator}
  repository_of "$image"
}

# repository_of REF / tag_of REF: REF split at the tag's colon (a colon after the last slash; not a port's).
repository_of() { local last=${1##*/}; if [[ $last == *:* ]]; then echo "${1%:*}"; else echo "$1"; fi; }
tag_of() { local last=${1##*/}; if [[ $last == *:* ]]; then echo "${last##*:}"; fi; }

# normalize_ref REF: REF with the version as its tag when it has none; refuses digests and odd names.
normalize_ref() {
  local ref=$1
  [[ $ref != *@* ]] || die "'$ref': give the image a tag, not a digest"
  [[ $ref =~ ^[A-Za-z0-9][A-Za-z0-9._/:-]*$ && $ref != */ && $ref != *: ]] \
    || die "'$ref' is not an image name (REPOSITORY[:TAG], e.g. registry.example.com/sampledb/sampledb-operator:$version)"
  [[ -n $(tag_of "$ref") ]] || ref="$ref:$version"
  echo "$ref"
}

# qualify IMAGE: a short name read as docker reads it, on Docker Hub (python:3.11-slim ->
# docker.io/library/python:3.11-slim), so that podman and buildah need no short-name configuration.
qualify() {
  local first=${1%%/*}
  if [[ $1 != */* ]]; then echo "docker.io/library/$1"
  elif [[ $first == *.* || $first == *:* || $first == localhost ]]; then echo "$1"
  else echo "docker.io/$1"; fi
}

# The builder: --builder / SAMPLEDB_IMAGE_BUILDER, or the first of docker (with a daemon that answers), podman,
# buildah.
pick_builder() {
  local wanted=$1
  case $wanted in
    "") ;;
    docker|podman|buildah)
      have "$wanted" || die "$wanted is not installed (--builder $wanted); install it or leave --builder out"
      if [[ $wanted == docker ]] && ! docker info >/dev/null 2>&1; then
        die "docker is installed but its daemon does not answer (docker info failed): start it, or use" \
          "--builder podman or buildah"
      fi
      echo "$wanted"; return ;;
    *) bad_usage "unknown builder '$wanted' (docker, podman or buildah)" ;;
  esac
  if have docker; then
    if docker info >/dev/null 2>&1; then echo docker; return; fi
    log "docker is installed but its daemon does not answer (docker info failed); trying podman and buildah"
  fi
  have podman && { echo podman; return; }
  have buildah && { echo buildah; return; }
  die "no image builder found: install docker (https://docs.docker.com/engine/install/, with its daemon running)," \
    "podman or buildah (e.g. apt-get install podman / apt-get install buildah)"
}

# The build context: a temporary copy of what the Dockerfile copies in.
make_context() {
  local ctx=$1
  local -a files=(Dockerfile pyproject.toml README.md operator)
  if have git && git -C "$repo" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    (cd "$repo" && git ls-files -co --exclude-standard -- "${files[@]}" | tar -cf - -T - | tar -C "$ctx" -xf -)
  else
    (cd "$repo" && tar --exclude=__pycache__ --exclude='*.egg-info' -cf - "${files[@]}" | tar -C "$ctx" -xf -)
  fi
  [[ -f $ctx/Dockerfile && -d $ctx/operator ]] || die "the build context has no Dockerfile or operator/ (from $repo)"
}

# build_with BUILDER TAG BASE: builds TAG with BUILDER and saves it as a docker archive; sets archive, image and
# archive_transport.
build_with() {
  local builder=$1 tag=$2 base=$3 ctx
  local dir="$cache_root/images/archives"
  mkdir -p "$dir"
  archive="$dir/${tag//[\/:]/_}.tar"
  rm -f "$archive"
  ctx=$(mktemp -d "${TMPDIR:-/tmp}/sampledb-image.XXXXXX")
  # shellcheck disable=SC2064 # the path is fixed now
  trap "rm -rf '$ctx'" EXIT
  make_context "$ctx"
  local -a build=(build -f "$ctx/Dockerfile" --build-arg "BASE=$base" -t "$tag")
  log "building $tag with $builder (BASE=$base)"
  [[ $builder != buildah ]] || build+=(--layers)
  local rc=0
  "$builder" "${build[@]}" "$ctx" >&2 || rc=$?
  if ((rc != 0)); then
    log "$builder build failed (exit $rc). If the base image or the Python packages cannot be fetched (no" \
      "network, no access to the registry or to PyPI), --base IMAGE names another base, and --local-base" \
      "builds on the local cluster's Debian base, as hack/build-images.sh does."
    exit "$rc"
  fi
  case $builder in
    docker) docker save -o "$archive" "$tag" >&2 ;;
    podman) podman save --format docker-archive -o "$archive" "$tag" >&2 ;;
    buildah) buildah push "$tag" "docker-archive:$archive:$tag" >&2 ;;
  esac
  rm -rf "$ctx"
  trap - EXIT
  [[ -s $archive ]] || die "$builder built $tag but wrote no archive at $archive"
  image=$tag
  archive_transport=docker-archive
}

# build_local: hack/build-images.sh's operator image (buildah on the local Python base); sets archive, image and
# archive_transport from the images.list it writes.
build_local() {
  [[ -x $build_images ]] || die "cannot run $build_images (SAMPLEDB_BUILD_IMAGES)"
  log "building the operator image on the local Python base ($build_images)"
  local out line
  out=$(SAMPLEDB_IMAGES="python operator" "$build_images" | tail -n 1)
  [[ -n $out && -d $out ]] || out="$cache_root/images"
  [[ -f $out/images.list ]] || die "$build_images wrote no $out/images.list"
  line=$(awk '{ n = split($1, p, "/") } p[n] ~ /^operator-/ { print; exit }' "$out/images.list")
  [[ -n $line ]] || die "$out/images.list has no operator image (a line whose archive is operator-KEY.tar)"
  archive=${line%% *}
  image=$(awk '{ print $2 }' <<<"$line")
  [[ -s $archive ]] || die "$out/images.list names $archive, which does not exist"
  [[ -n $image ]] || die "$out/images.list names no image for $archive"
  archive_transport=oci-archive
}

# overrides IMAGE: what points the kustomize install and the Helm chart at IMAGE.
overrides() {
  local repository tag default
  repository=$(repository_of "$1")
  tag=$(tag_of "$1")
  default="$(deployment_repository):$version"
  echo
  if [[ $1 == "$default" ]]; then
    echo "This is the install's default image: manifests/default and the chart need no override."
  fi
  cat <<EOF
kustomize: in a kustomization.yaml whose resources include manifests/default (docs/user-guide.md#the-image):
images:
- name: $(deployment_repository)
  newName: $repository
  newTag: "$tag"

Helm: with helm install or helm upgrade of charts/sampledb-operator:
--set image.repository=$repository --set image.tag=$tag
EOF
  if [[ $tag == latest && $command == load ]]; then
    echo "(tag latest: the kustomize Deployment, which sets no imagePullPolicy, pulls it Always instead of" \
      "using the loaded one; give it another tag)"
  fi
}

# ---- the command line
command=build
if [[ $# -gt 0 && $1 != -* ]]; then command=$1; shift; fi
target="" push_ref="" tag="" base="" local_base=0 cluster_name=""
builder=${SAMPLEDB_IMAGE_BUILDER:-}
case $command in
  help) usage; exit 0 ;;
  build) ;;
  load)
    [[ $# -gt 0 && $1 != -* ]] || bad_usage "load needs a target: kind, k3s or minikube"
    target=$1; shift
    case $target in
      kind|k3s|minikube) ;;
      *) bad_usage "unknown load target '$target' (kind, k3s or minikube)" ;;
    esac ;;
  push)
    [[ $# -gt 0 && $1 != -* ]] || bad_usage "push needs the image's name: push REGISTRY/REPOSITORY[:TAG]"
    push_ref=$1; shift ;;
  *) bad_usage "unknown command '$command' (build, load or push)" ;;
esac
while [[ $# -gt 0 ]]; do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --tag|--base|--builder|--name)
      [[ $# -ge 2 && -n $2 ]] || bad_usage "$1 needs a value"
      case $1 in
        --tag) tag=$2 ;;
        --base) base=$2 ;;
        --builder) builder=$2 ;;
        --name) cluster_name=$2 ;;
      esac
      shift 2 ;;
    --tag=*) tag=${1#*=}; shift ;;
    --base=*) base=${1#*=}; shift ;;
    --builder=*) builder=${1#*=}; shift ;;
    --name=*) cluster_name=${1#*=}; shift ;;
    --local-base) local_base=1; shift ;;
    *) bad_usage "unknown argument '$1'" ;;
  esac
done
if [[ -n $cluster_name && $target != kind && $target != minikube ]]; then
  bad_usage "--name is for load kind (the cluster) and load minikube (the profile)"
fi
if [[ -n $push_ref && -n $tag ]]; then bad_usage "push REF names the image: leave --tag out"; fi
if ((local_base)) && [[ -n $tag || -n $base || -n $builder ]]; then
  bad_usage "--local-base names its own image (localhost/sampledb/sampledb-operator:KEY) and builds with buildah" \
    "on the local Python base: leave --tag, --base and --builder out"
fi

version=$(read_version)
[[ -z $push_ref ]] || push_ref=$(normalize_ref "$push_ref")
if [[ -n $tag ]]; then tag=$(normalize_ref "$tag"); fi
tag=${tag:-${push_ref:-$(deployment_repository):$version}}
if [[ -z $base ]]; then
  base=$(sed -nE 's/^ARG[[:space:]]+BASE=([^[:space:]]+).*/\1/p' "$repo/Dockerfile" | sed -n 1p)
  base=${base:-python:3.11-slim}
fi
base=$(qualify "$base")

# Every tool is checked before the build, which can take minutes.
case $target in
  kind) have kind || die "kind is not installed: it is needed to load the image into a kind cluster" \
          "(https://kind.sigs.k8s.io/docs/user/quick-start/#installation)" ;;
  k3s) have k3s || die "k3s is not installed: run this on a k3s server or agent node (https://k3s.io)," \
         "or push the image to a registry the cluster pulls from (hack/image.sh push REF)" ;;
  minikube) have minikube || die "minikube is not installed: it is needed to load the image into minikube" \
              "(https://minikube.sigs.k8s.io/docs/start/)" ;;
esac
if ((local_base)); then
  have buildah || die "buildah is not installed: --local-base builds with it (apt-get install buildah)"
else
  builder=$(pick_builder "$builder")
fi

archive="" image="" archive_transport=""
if ((local_base)); then build_local; else build_with "$builder" "$tag" "$base"; fi
echo "image: $image"
echo "archive: $archive"

case $command in
  build) exit 0 ;;
  load)
    log "loading $archive into $target"
    case $target in
      kind) kind load image-archive "$archive" --name "${cluster_name:-${KIND_CLUSTER_NAME:-kind}}" >&2 ;;
      k3s)
        sudo=()
        if ((EUID != 0)) && have sudo; then sudo=(sudo); fi
        "${sudo[@]}" k3s ctr images import "$archive" >&2
        log "k3s: imported on this node only; every node that may run the operator needs it (or push it)" ;;
      minikube)
        profile=()
        if [[ -n $cluster_name ]]; then profile=(-p "$cluster_name"); fi
        minikube image load "$archive" "${profile[@]}" >&2 ;;
    esac
    overrides "$image" ;;
  push)
    log "pushing $push_ref"
    if ((!local_base)); then
      case $builder in
        docker) docker push "$push_ref" >&2 ;;
        podman) podman push "$push_ref" >&2 ;;
        buildah) buildah push "$push_ref" "docker://$push_ref" >&2 ;;
      esac
    elif have skopeo; then
      skopeo copy "$archive_transport:$archive" "docker://$push_ref" >&2
    else
      buildah pull -q "$archive_transport:$archive" >/dev/null
      buildah tag "$image" "$push_ref"
      buildah push "$push_ref" "docker://$push_ref" >&2
    fi
    echo "pushed: $push_ref"
    overrides "$push_ref" ;;
esac
