# ax — build and test. `make test` is the one test command (README, .ci/run).
GO      ?= go
RACE    := ./queue/... ./lease/... ./region/... ./worker/... ./federation/...
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# What `ax version` reports (internal/buildinfo); deploy/docker/Dockerfile stamps the same three.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
DATE    ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
# helm for deploy/helm_test.go, built from its module (no go.mod change): $(go env GOPATH)/bin/helm.
HELM    := helm.sh/helm/v3/cmd/helm@v3.22.0
LDFLAGS ?= -X github.com/ax-sched/ax/internal/buildinfo.version=$(VERSION) -X github.com/ax-sched/ax/internal/buildinfo.commit=$(COMMIT) -X github.com/ax-sched/ax/internal/buildinfo.date=$(DATE)

.PHONY: test deps vet unit cluster race fuzz build bench clean

test: deps vet build unit cluster race fuzz

# Installs what a fresh Debian machine with only Go lacks.
deps:
	@command -v redis-server >/dev/null 2>&1 || { \
		echo "redis-server missing: installing with apt-get"; \
		$(SUDO) apt-get install -y redis-server >/dev/null 2>&1 || \
		{ $(SUDO) apt-get update >/dev/null && $(SUDO) apt-get install -y redis-server; }; }
	@command -v redis-server >/dev/null 2>&1 || { echo "FATAL: redis-server still missing"; exit 1; }
	@redis-server --version
	@command -v redis-cli >/dev/null 2>&1 || { \
		echo "redis-cli missing (testenv forms Redis Clusters with it): installing redis-tools with apt-get"; \
		$(SUDO) apt-get install -y redis-tools >/dev/null 2>&1 || \
		{ $(SUDO) apt-get update >/dev/null && $(SUDO) apt-get install -y redis-tools; }; }
	@command -v redis-cli >/dev/null 2>&1 || { echo "FATAL: redis-cli still missing"; exit 1; }
	@command -v helm >/dev/null 2>&1 || test -x "$$($(GO) env GOPATH)/bin/helm" || { echo "helm missing (deploy/helm_test.go renders the chart): go install $(HELM)"; $(GO) install $(HELM); }
	@command -v promtool >/dev/null 2>&1 || { \
		echo "promtool missing (metrics, dashboard and alert-rule tests): apt-get install prometheus"; \
		$(SUDO) apt-get install -y --no-install-recommends prometheus >/dev/null 2>&1 || \
		{ $(SUDO) apt-get update >/dev/null && $(SUDO) apt-get install -y --no-install-recommends prometheus; }; }
	@command -v promtool >/dev/null 2>&1 || { echo "FATAL: promtool still missing (apt package prometheus)"; exit 1; }

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { gofmt -l .; echo "gofmt needed"; exit 1; }

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/ax ./cmd/ax

unit:
	$(GO) test -count=1 -timeout 20m ./...

# The queue and worker suites once more on a real 3-master Redis Cluster
# (internal/testenv: redis-server --cluster-enabled, redis-cli --cluster create).
cluster:
	AX_TEST_REDIS=cluster $(GO) test -count=1 -timeout 5m ./queue/ ./worker/

race:
	$(GO) test -count=1 -race -timeout 20m $(RACE)

# Short fuzz runs of the committed targets (seed corpus always runs in `unit`).
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeSpec$$' -fuzztime 10s ./task/
	$(GO) test -run '^$$' -fuzz '^FuzzSubmitDecode$$' -fuzztime 10s ./httpapi/
	$(GO) test -run '^$$' -fuzz '^FuzzRequestDecoders$$' -fuzztime=20000x ./httpapi/

bench:
	$(GO) test -run '^$$' -bench . -benchtime 2s ./queue/ ./placement/

clean:
	rm -rf bin .ax-dev
