# worldbackup: see README.md. Every target is a thin wrapper over a script or
# a go command, so what CI runs is what you run.
SHELL := /bin/bash
GO ?= go
BIN := bin

.PHONY: demo build test bench image image-push tools cluster-tools doctor schema sdks dist lint monitoring

## demo: build what is needed and perform one backup run with `pulumi up` (render mode) on a sample world.
demo:
	scripts/demo.sh

## build: the archiver and the component-provider plugin into ./bin (the plugin stamped with scripts/version.sh's version).
build:
	$(GO) build -o $(BIN)/archiver ./archiver/cmd/archiver
	$(GO) build -ldflags "-X main.version=$$(scripts/version.sh)" -o $(BIN)/pulumi-resource-worldbackup ./provider/cmd/pulumi-resource-worldbackup

## test: every test tier (unit, component, catalog on a real PostgreSQL, stack through the real Pulumi CLI).
test:
	scripts/test.sh

## bench: archiver backup vs tar|zstd -1 -T0 on synthetic worlds (BENCH_SIZES, BENCH_PAIRS): alternated pairs, medians, ratio, peak RSS; then side by side with restic and kopia (built on demand into the tool cache): first backup, a day of play, second backup, restore (BENCH_PEERS, BENCH_CACHE); encryption's cost (BENCH_CRYPT_PAIRS); verify --world-check against the backup (BENCH_VERIFY). BENCH_FLEET=1: the fleet in render mode instead (scripts/bench-fleet.sh).
bench:
	scripts/bench.sh

## image: the archiver's OCI image, built without a Docker daemon, into ./dist.
image:
	scripts/image.sh

## image-push: push the image built by `make image` to $(REGISTRY).
image-push:
	scripts/image.sh push "$(REGISTRY)"

## tools: the Pulumi CLI, Kubernetes provider plugin and YAML language host, built from the Go module proxy into the tool cache (~/.cache/worldbackup/tools), linked from .tools/bin.
tools:
	scripts/tools.sh

## cluster-tools: the single-node Kubernetes cluster of the tier-5 tests (kube-apiserver, controller-manager, scheduler, kubelet, etcd, containerd, runc, CNI plugins), built from the Go module proxy into the tool cache, linked from .tools/cluster. `scripts/cluster-tools.sh check` says what is missing.
cluster-tools:
	scripts/cluster-tools.sh

## doctor: what this machine has and lacks for the demo and the tests, with the command that installs each missing piece.
doctor:
	scripts/doctor.sh test

## schema: regenerate provider/cmd/pulumi-resource-worldbackup/schema.json.
schema:
	$(GO) run ./provider/cmd/pulumi-resource-worldbackup -schema > provider/cmd/pulumi-resource-worldbackup/schema.json.tmp
	mv provider/cmd/pulumi-resource-worldbackup/schema.json.tmp provider/cmd/pulumi-resource-worldbackup/schema.json

## monitoring: regenerate deploy/monitoring's alert rules file, PrometheusRule, ServiceMonitor and Grafana dashboard from its Go (TestGeneratedFilesUpToDate checks them).
monitoring:
	$(GO) run ./deploy/monitoring/gen -dir deploy/monitoring

## sdks: the TypeScript and Python SDKs, generated from schema.json with Pulumi's code generators into sdk/nodejs and sdk/python (not checked in; see README "The SDKs").
sdks:
	scripts/sdks.sh

## dist: the release into ./dist: the plugin archives (linux, darwin, windows × amd64, arm64), the npm and Python SDK packages and a checksums file, versioned from the git tag (see README "Installing").
dist:
	scripts/dist.sh

## lint: gofmt and go vet.
lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
