# The two commands for a fresh machine are `make run` and `make test` (see README.md).
SHELL := /bin/bash
PY := .venv/bin/python
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: psql bootstrap run test unit integration e2e lint bench bench-scale chaos node-chaos cluster-up cluster-down cluster-env image plugin crd bundle docs clean

bootstrap:
	@hack/bootstrap.sh

## run: set everything up, start the local control plane, install the CRDs and an example
## database, and run the operator in the foreground against it (Ctrl-C stops the operator).
run:
	@hack/prereqs.sh run
	@hack/bootstrap.sh
	@hack/run-local.sh

## psql: psql on the example database of `make run` (DB=name NS=namespace for another one).
psql: bootstrap
	@hack/psql.sh $(ARGS)

## test: the whole suite (lint, unit, data plane, integration, end to end) - what CI runs.
test:
	@hack/prereqs.sh test
	@hack/bootstrap.sh
	@hack/test.sh

unit: bootstrap
	$(PY) -m pytest tests/unit -q

integration: bootstrap
	$(PY) -m pytest tests/integration -q

e2e: bootstrap
	$(PY) -m pytest tests/e2e -q

lint: bootstrap
	.venv/bin/ruff check operator tests bench hack
	.venv/bin/mypy

bench: bootstrap
	@hack/bench.sh

## bench-scale: issue #18's scale benchmark: N SampleDBs (default 300) on fresh kwok-only clusters under
## /tmp, the API server's floor and this operator interleaved (bench/scale/scale.py; ARGS for more flags).
N ?= 300
bench-scale: bootstrap
	$(PY) bench/scale/scale.py run --n $(N) $(ARGS)

## chaos: issue #14's chaos suite (tests/chaos/): 56 SampleDBs on a fresh kwok-only cluster in /tmp/chaos-cluster
## (2 operators behind a fault proxy, kube-apiserver restarts) and 3 on the local cluster's real node; 520+ faults,
## then the end-state checks. SEED=n reproduces a run; ARGS for more flags (python -m tests.chaos --help).
SEED ?= 14
chaos: bootstrap
	$(PY) -m tests.chaos --seed $(SEED) $(ARGS)

## node-chaos: repeated failures of the real nodes (stop, cut, freeze, crash) under a writer, on the running local
## cluster: never two primaries, no accepted write lost (tests/nodechaos). SEED=n ROUNDS=n; ARGS=--asynchronous.
ROUNDS ?= 8
node-chaos: bootstrap
	$(PY) -m tests.nodechaos --seed $(SEED) --rounds $(ROUNDS) $(ARGS)

cluster-up:
	@hack/cluster up

cluster-down:
	@hack/cluster down

cluster-env:
	@hack/cluster env

## image: build the operator's image and load it into a local cluster or push it to a registry, then print the
## kustomize and Helm overrides (hack/image.sh): ARGS='load kind', 'load k3s', 'load minikube', 'push REF'; none: build.
image:
	@hack/image.sh $(ARGS)

## plugin: the kubectl plugin alone (hack/build-plugin.sh): its wheel for pipx, and a krew archive with
## its manifest, in dist/ (OUT=folder for another one).
plugin: bootstrap
	@hack/build-plugin.sh $(OUT)

## crd: regenerate manifests/crd (and the chart's copies in charts/sampledb-operator/crds) and
## docs/reference.md from the models.
crd: bootstrap
	$(PY) hack/gen-crd.py

## bundle: regenerate the OLM bundle (bundle/, bundle.Dockerfile) from manifests/ and validate it
## with operator-framework/api's validators (docs/olm.md).
bundle: bootstrap
	$(PY) hack/gen-bundle.py
	hack/validate-bundle.sh

clean: cluster-down
	rm -rf .venv .cluster .mypy_cache .ruff_cache .pytest_cache
