# Conflux: a Kubernetes-native operator and C data plane for HPC workflows.
# `make help` lists the targets. Everything built or downloaded lands in .cache/ (git-ignored;
# set CONFLUX_CACHE to move it).

SHELL := /bin/bash
export CONFLUX_CACHE ?= $(CURDIR)/.cache
export PATH := $(CONFLUX_CACHE)/bin:$(PATH)
NAME ?= conflux
FUZZ_SECONDS ?= 30
A ?= conflux
B ?= conflux-b
DELAY ?= 20ms
LOSS ?= 1%

.DEFAULT_GOAL := help

##@ Setup

.PHONY: deps
deps: ## Install every dependency on a fresh Debian 12 machine (apt, Go tools, Kubernetes binaries)
	hack/install-deps.sh all

.PHONY: node-image
node-image: ## Build the kind node image and the control-plane images locally (no pulls)
	hack/kind/build-node-image.sh

.PHONY: cluster
cluster: node-image ## Bring up a kind cluster: 1 control plane + 3 workers (NAME=site-b for a second site)
	hack/cluster.sh up $(NAME)

.PHONY: cluster-down
cluster-down: ## Delete the kind cluster NAME (default conflux)
	hack/cluster.sh down $(NAME)

.PHONY: wan
wan: ## Join the kind clusters A and B over an emulated WAN link (A=conflux B=conflux-b DELAY=20ms LOSS=1%; hack/README.md)
	hack/wan.sh join $(A) $(B) --delay $(DELAY) --loss $(LOSS)

.PHONY: wan-down
wan-down: ## Remove the WAN link between A and B (every route, rule, device and process wan.sh added)
	hack/wan.sh leave $(A) $(B)

.PHONY: soft-roce
soft-roce: ## Add soft-RoCE (rxe) devices to the kind nodes where the kernel has rdma_rxe
	hack/soft-roce.sh $(NAME)

##@ Demo

.PHONY: demo
demo: cluster ## The sample workflow on kind: images, helm install, events and a pipe flowing (demo/README.md)
	demo/demo.sh up $(NAME)

.PHONY: demo-down
demo-down: ## Remove the demo: workflow, release, namespaces, volume (the cluster stays; make cluster-down)
	demo/demo.sh down $(NAME)

.PHONY: test-demo
test-demo: ## The demo's components as processes on this host against a real confluxd
	$(MAKE) -C demo test

##@ Build

.PHONY: build
build: build-dataplane build-operator ## Build the data plane and the operator

.PHONY: build-dataplane
build-dataplane: ## Build libconflux (dataplane/build)
	$(MAKE) -C dataplane -j2

.PHONY: build-operator
build-operator: ## Build the operator binary (operator/bin)
	$(MAKE) -C operator build

.PHONY: images
images: ## Build the conflux/operator and conflux/confluxd images locally, FROM scratch (nothing pulled)
	hack/build-images.sh

.PHONY: load-images
load-images: ## Build the images and load them into the kind cluster NAME (for a helm install by hand)
	hack/build-images.sh --load $(NAME)

##@ Packages

.PHONY: dist
dist: ## Debian packages (libconflux0, libconflux-dev, confluxd), the Python wheel and the Helm chart in dist/ (docs/install.md)
	$(MAKE) -C sdk lib
	packaging/deb.sh
	packaging/wheel.sh
	packaging/chart.sh

.PHONY: dist-images
dist-images: ## The images `make images` built, saved as OCI archives in dist/ (builds nothing)
	packaging/images.sh

##@ Test

.PHONY: test
test: test-fast test-e2e test-bench ## Run every suite: C, Go (unit + envtest), fuzz smoke, e2e on kind, the benchmarks' smoke run

.PHONY: test-fast
test-fast: test-dataplane test-sdk test-dist test-docs test-demo test-wan test-fuzz test-operator test-bench-report ## Every suite but e2e

.PHONY: test-dataplane
test-dataplane: ## C unit and conformance tests of the data plane
	$(MAKE) -C dataplane -j2 test

.PHONY: test-sdk
test-sdk: ## The SDK: C header test, Python (pytest) and Go (go test) bindings, examples, against a real confluxd
	$(MAKE) -C sdk test

.PHONY: test-docs
test-docs: ## The docs: README sizes, links, and every tagged example built, run and compared (docs/README.md)
	$(MAKE) -C sdk lib
	docs/check-examples.sh

.PHONY: test-dist
test-dist: ## make dist into a temporary folder, the packages extracted into a fresh root, a C, a Python and a Go program built and run against it only
	$(MAKE) -C sdk lib
	packaging/dist_test.sh

.PHONY: test-wan
test-wan: ## conflux-wanem (hack/wan): the delay line's delay, loss share and order, and its tun device
	cd hack/wan && go vet ./... && go test -count=1 ./...

.PHONY: test-asan
test-asan: ## The C tests again under AddressSanitizer and UBSan
	$(MAKE) -C dataplane -j2 asan

.PHONY: test-fuzz
test-fuzz: ## Every libFuzzer target for FUZZ_SECONDS each (a finding fails)
	$(MAKE) -C dataplane fuzz FUZZ_SECONDS=$(FUZZ_SECONDS)

.PHONY: test-operator
test-operator: ## Go unit tests and envtest suites (real kube-apiserver + etcd), chart lint
	$(MAKE) -C operator test lint-chart

.PHONY: test-e2e
test-e2e: cluster images ## e2e tests against the kind cluster (brings it up and builds the images first; the tests load them)
	cd e2e && KUBECONFIG=$(CONFLUX_CACHE)/kube/$(NAME).kubeconfig go test -count=1 -v -timeout 45m ./...

##@ Benchmarks

.PHONY: bench
bench: build-dataplane ## Benchmarks side by side with peers (full); JSON, plots and summary.md in bench/results
	bench/run.sh

.PHONY: bench-quick
bench-quick: build-dataplane ## The benchmarks as a smoke test (under 5 minutes): every one runs, numbers sane
	bench/run.sh --quick

.PHONY: bench-operator
bench-operator: ## The operator at N=100 and N=1000 (6N objects) on envtest; writes bench/operator/RESULTS.md
	bench/operator/run.sh

.PHONY: test-bench
test-bench: bench-quick ## The benchmarks' quick mode as a smoke test (part of make test; never a speed threshold)

.PHONY: test-bench-report
test-bench-report: ## bench/report self-check: index.md, its figures and summary.md over the fixture; --check fails where it should
	cd bench/report && /usr/bin/python3 -m pytest -q test_report.py

##@ Help

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} \
	  /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2 } \
	  /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)
