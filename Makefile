# kyvap Makefile (kubebuilder v4 layout). Every tool is pinned and installed
# into bin/; the test control plane is built from the Go module proxy.

# Versions. test/controlplane carries the same defaults (a test keeps them in step).
KUBE_VERSION ?= 1.37.1
ETCD_VERSION ?= 3.6.5
KYVERNO_VERSION ?= v1.19.1
CONTROLLER_TOOLS_VERSION ?= v0.23.0
GOLANGCI_LINT_VERSION ?= v2.15.0
KUSTOMIZE_VERSION ?= v5.8.2
export KUBE_VERSION ETCD_VERSION KYVERNO_VERSION

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMG ?= ghcr.io/kyvap/kyvap:$(VERSION)
LDFLAGS := -s -w -X github.com/kyvap/kyvap/internal/version.Version=$(VERSION)

LOCALBIN ?= $(CURDIR)/bin
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
GOLANGCI_LINT ?= $(LOCALBIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
KUSTOMIZE ?= $(LOCALBIN)/kustomize-$(KUSTOMIZE_VERSION)

# Tests run with the race detector; GOFLAGS may add more (e.g. -count=1).
# The timeout is a hang guard per package, not a goal. The corpus packages
# (CORPUS_PACKAGES) run without it, in their own go test beside the others:
# each replays whole corpora (Kyverno's tests, the conformance suites, their
# conversions, the Pod Security Admission fixtures) through kyvap's pure stages and a real API server, one suite
# at a time, and under the race detector they outgrew the guard (migrate at
# 80 minutes on 2026-11-28; test/conformance at 80 minutes in the next clean
# CI, its test process CPU-bound). The concurrent code they drive (the
# manager's controllers, the webhook's server, the shared CEL compilers) is
# race-tested in its own packages and in test/operator, test/kyverno and
# test/translate.
TEST_FLAGS ?= -race -timeout 80m
CORPUS_TEST_FLAGS ?= -timeout 80m
CORPUS_PACKAGES ?= github.com/kyvap/kyvap/migrate github.com/kyvap/kyvap/test/conformance github.com/kyvap/kyvap/test/classic github.com/kyvap/kyvap/test/podsecurity

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code for api/.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate RBAC from the +kubebuilder:rbac markers.
	$(CONTROLLER_GEN) rbac:roleName=manager-role paths="./controllers/..." paths="./webhook/..." paths="./operator/..." paths="./reporter/..." paths="./cmd/..." output:rbac:artifacts:config=config/rbac

.PHONY: fmt
fmt: ## Run gofmt and go mod tidy.
	gofmt -w $$(git ls-files '*.go')
	go mod tidy

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint (v2, pinned).
	$(GOLANGCI_LINT) run ./...

.PHONY: chart
chart: $(KUSTOMIZE) ## Generate the Helm chart charts/kyvap from config/ (hack/chartgen).
	go run ./hack/chartgen -kustomize $(KUSTOMIZE) -out charts/kyvap

.PHONY: verify
verify: generate manifests chart $(KUSTOMIZE) ## Regenerate everything and fail on a diff.
	go mod tidy
	for dir in config/default config/cert-manager; do $(KUSTOMIZE) build $$dir >/dev/null; done
	git diff --exit-code -- . || { echo "generated files are out of date: run 'make generate manifests' and commit"; exit 1; }
	test -z "$$(git status --porcelain --untracked-files=all -- api config charts go.mod go.sum)" || { git status --short; echo "untracked generated files"; exit 1; }

.PHONY: envtest-assets
envtest-assets: ## Build (or reuse) kube-apiserver, kube-controller-manager and etcd under bin/k8s/.
	@hack/build-control-plane.sh >/dev/null

.PHONY: kyverno-assets
kyverno-assets: ## Build (or reuse) Kyverno's admission and reports controllers under bin/kyverno/ (for test/kyverno), outside kyvap's module.
	@hack/build-kyverno.sh >/dev/null
	@hack/build-kyverno.sh reports-controller >/dev/null

.PHONY: release
release: $(KUSTOMIZE) ## Write the release into dist/: binaries, the image (OCI archive), install.yaml, the chart, SBOM, checksums: make release VERSION=vX.Y.Z [IMAGE=repository] (docs/install.md, Releases).
	@test -n "$(VERSION)" || { echo "make release VERSION=vX.Y.Z"; exit 2; }
	go run ./hack/release -version $(VERSION) -out dist -kustomize $(KUSTOMIZE) $(if $(IMAGE),-image $(IMAGE))

.PHONY: test
test: envtest-assets kyverno-assets $(KUSTOMIZE) ## Run unit and envtest suites against a real kube-apiserver (and a real Kyverno), then the verdict corpus.
	export KUSTOMIZE="$(abspath $(KUSTOMIZE))" KUBEBUILDER_ASSETS="$$(hack/build-control-plane.sh)"; \
	go test $(CORPUS_TEST_FLAGS) $(CORPUS_PACKAGES) & corpus=$$!; \
	status=0; go test $(TEST_FLAGS) $$(go list ./... | grep -vxF $(foreach p,$(CORPUS_PACKAGES),-e $(p))) || status=$$?; \
	wait $$corpus || status=1; exit $$status
	$(MAKE) conformance

.PHONY: conformance
conformance: ## Run the Kyverno CLI test corpus through the generated VAPs and the fallback engine (kyvap test).
	go run ./cmd/kyvap test test/conformance

.PHONY: differential
differential: ## Compare compiled classic rules (patterns, conditions, exceptions' conditions, messages, whole policies) and podSecurity rules (the Pod Security Admission fixtures at every level and version) with Kyverno's own code, with the counts and Kyverno's chainsaw tests of validate policies and PolicyExceptions (test/classic, test/podsecurity: the full sets; make test runs bounded slices).
	KYVAP_DIFFERENTIAL=full go test -count=1 -v -timeout 60m -run 'Agree|TestKyvernoChainsawValidate' ./test/classic ./test/podsecurity

##@ Benchmarks

BENCH_REPORT ?= $(LOCALBIN)/bench-report.txt

.PHONY: bench
bench: envtest-assets ## Run the translator and operator benchmarks; report in bin/bench-report.txt (see docs/performance.md).
	mkdir -p $(LOCALBIN)
	KUBEBUILDER_ASSETS="$$(hack/build-control-plane.sh)" go test -run '^$$' -bench . -benchmem ./translate/ | tee $(BENCH_REPORT)
	KUBEBUILDER_ASSETS="$$(hack/build-control-plane.sh)" go test -run '^$$' -bench BenchmarkDriftRevert -benchtime=200x -timeout 20m ./test/perf/ | tee -a $(BENCH_REPORT)
	KUBEBUILDER_ASSETS="$$(hack/build-control-plane.sh)" go test -run '^$$' -bench BenchmarkConvergence1000 -benchtime=1x -timeout 30m ./test/perf/ | tee -a $(BENCH_REPORT)
	KUBEBUILDER_ASSETS="$$(hack/build-control-plane.sh)" go test -run '^$$' -bench BenchmarkAPIServerCost -benchtime=500x -timeout 30m ./test/perf/ | tee -a $(BENCH_REPORT)

.PHONY: bench-compare
bench-compare: envtest-assets kyverno-assets ## kyvap side by side with Kyverno v1.19.1 on one API server (admission, CPU, memory, first denial, background scan); report in bin/bench-compare.txt and bin/bench-compare.svg (docs/performance.md).
	KUBEBUILDER_ASSETS="$$(hack/build-control-plane.sh)" go test -run '^$$' -bench BenchmarkCompare -benchtime=1x -timeout 60m ./test/perf/

##@ Build

.PHONY: build
build: ## Build the manager and the kyvap CLI into bin/.
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o $(LOCALBIN)/manager ./cmd/manager
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o $(LOCALBIN)/kyvap ./cmd/kyvap

.PHONY: run
run: ## Run the manager against the cluster in $KUBECONFIG.
	go run ./cmd/manager

# The demo is built and run, not "go run": go run exits 1 after Ctrl-C and
# leaves the demo (and the control plane) running when it gets SIGTERM.
.PHONY: demo
demo: build ## Start a local control plane, run the operator and show it at work (DEMO_KEEP=1: until Ctrl-C).
	go build -o $(LOCALBIN)/demo ./hack/demo
	$(LOCALBIN)/demo

.PHONY: docker-build
docker-build: ## Build the container image (needs a Docker engine).
	docker build --build-arg VERSION=$(VERSION) -t $(IMG) .

##@ Tools

$(LOCALBIN):
	mkdir -p $(LOCALBIN)

$(CONTROLLER_GEN): | $(LOCALBIN)
	GOBIN=$(LOCALBIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)
	mv $(LOCALBIN)/controller-gen $@

$(GOLANGCI_LINT): | $(LOCALBIN)
	GOBIN=$(LOCALBIN) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(LOCALBIN)/golangci-lint $@

$(KUSTOMIZE): | $(LOCALBIN)
	GOBIN=$(LOCALBIN) go install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION)
	mv $(LOCALBIN)/kustomize $@

.PHONY: kustomize
kustomize: $(KUSTOMIZE) ## Install kustomize into bin/.
