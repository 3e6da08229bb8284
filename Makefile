# ax — build and test. `make test` is the one test command (README, .ci/run).
GO      ?= go
# Packages tested without -race: the process-level suites (cmd/ax and internal/e2e run
# ax binaries, whose code the race detector does not see; internal/bench is a load
# generator; deploy drives external tools). Every other package, new ones included,
# is tested once, with -race.
NORACE  := /cmd/ax$$|/internal/e2e$$|/internal/bench|/deploy$$
PLAIN    = $(shell $(GO) list ./... | grep -E '$(NORACE)')
RACE     = $(shell $(GO) list ./... | grep -Ev '$(NORACE)')
# Fuzzing is budgeted in executions, not seconds: a time budget flakes on a loaded
# machine (golang/go#75804).
FUZZTIME ?= 20000x
# What the tests need, as command:apt-package pairs; a new tool is one more pair.
# redis-tools: redis-cli forms the Redis Clusters of `make cluster` (internal/testenv);
# prometheus: promtool checks metrics, the dashboard and the alert rules;
# chromium: internal/e2e drives the web dashboard in it (chromedp).
# python3: httpapi's tests run clients/python's tests against a real server;
# python3-venv (no command of its own: VENV checks it): internal/e2e installs the
# Python SDK into a venv with pip and runs its tests against ax dev.
# node, npm: internal/e2e runs clients/typescript's tests (npm ci && npm test, Node 20.19+).
APT     := redis-server:redis-server redis-cli:redis-tools promtool:prometheus chromium:chromium python3:python3 node:nodejs npm:npm
VENV    := python3 -c 'import ensurepip, venv'
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# What `ax version` reports (internal/buildinfo); deploy/docker/Dockerfile stamps the same three.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
DATE    ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
# helm for deploy/helm_test.go, built from its module (no go.mod change): $(go env GOPATH)/bin/helm.
HELM    := helm.sh/helm/v3/cmd/helm@v3.22.0
LDFLAGS ?= -X github.com/ax-sched/ax/internal/buildinfo.version=$(VERSION) -X github.com/ax-sched/ax/internal/buildinfo.commit=$(COMMIT) -X github.com/ax-sched/ax/internal/buildinfo.date=$(DATE)

.PHONY: test check deps vet unit cluster race short fuzz build bench clean cluster-fuzz

# Everything: the full unit and e2e suites (race-checked where it sees anything), the
# Redis Cluster runs, fuzzing.
test: deps vet build
	@# Three streams at once (docs/benchmarks.md, "make test"): the process-level
	@# suites (unit: e2e mostly waits on processes and timers), the -race run, and
	@# the Redis Cluster runs then the fuzzing. unit uses the bin/ax just built.
	$(MAKE) --no-print-directory -j3 unit race cluster-fuzz AX_TEST_BIN=$(CURDIR)/bin/ax

# The fast loop (< 2 min on 2 cores with a warm build cache): slow multi-process tests
# (testenv.Slow, e2e) skip under -short; vet and the build go alongside the tests.
check: deps
	$(MAKE) --no-print-directory -j3 vet build short

# Installs what a fresh Debian machine with only Go lacks; fails if a tool is still missing.
deps:
	@for d in $(APT); do c=$${d%%:*}; p=$${d#*:}; \
		command -v $$c >/dev/null 2>&1 && continue; \
		echo "$$c missing: apt-get install $$p"; \
		$(SUDO) apt-get install -y --no-install-recommends $$p >/dev/null 2>&1 || \
		{ $(SUDO) apt-get update >/dev/null && $(SUDO) apt-get install -y --no-install-recommends $$p; }; \
		command -v $$c >/dev/null 2>&1 || { echo "FATAL: $$c still missing (apt package $$p)"; exit 1; }; \
	done
	@$(VENV) 2>/dev/null || { echo "python3 -m venv unusable: apt-get install python3-venv"; \
		$(SUDO) apt-get install -y --no-install-recommends python3-venv >/dev/null 2>&1 || \
		{ $(SUDO) apt-get update >/dev/null && $(SUDO) apt-get install -y --no-install-recommends python3-venv; }; \
		$(VENV) || { echo "FATAL: python3 -m venv still unusable (apt package python3-venv)"; exit 1; }; }
	@redis-server --version
	@node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)' || { echo "FATAL: node $$(node --version) is older than 20.19 (clients/typescript needs Node 20+, its @hey-api/openapi-ts 20.19+)"; exit 1; }
	@command -v helm >/dev/null 2>&1 || test -x "$$($(GO) env GOPATH)/bin/helm" || { echo "helm missing (deploy/helm_test.go renders the chart): go install $(HELM)"; $(GO) install $(HELM); }

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { gofmt -l .; echo "gofmt needed"; exit 1; }
	@# The code's shape: package, type and function sizes, complexity, no issue numbers in
	@# comments (internal/tools/shapecheck; pending.txt lists what is still being worked off).
	$(GO) run ./internal/tools/shapecheck -pending internal/tools/shapecheck/pending.txt .

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/ax ./cmd/ax

# -p 4: every package at once, so internal/e2e (the longest) starts first thing instead
# of after cmd/ax. -parallel 4: internal/e2e's t.Parallel tests (they wait on processes
# and leases, a quarter of a core each) four at a time, not GOMAXPROCS (2); only e2e has
# any (docs/benchmarks.md). AX_TEST_BIN (make test: bin/ax) is the ax binary
# internal/e2e and deploy run; empty, they build their own.
unit:
	AX_TEST_BIN=$(AX_TEST_BIN) $(GO) test -count=1 -p 4 -parallel 4 -timeout 20m $(PLAIN)

cluster-fuzz:
	@$(MAKE) --no-print-directory cluster
	@$(MAKE) --no-print-directory fuzz

# The queue and worker suites once more on a real 3-master Redis Cluster
# (internal/testenv: redis-server --cluster-enabled, redis-cli --cluster create).
cluster:
	AX_TEST_REDIS=cluster $(GO) test -count=1 -timeout 10m ./queue/ ./worker/

race:
	$(GO) test -count=1 -race -timeout 20m $(RACE)

# -p 4: these tests mostly wait on Redis and etcd round trips and timers, not the CPU;
# four packages at once on 2 cores took 82 s instead of 122 s (load 14).
short:
	$(GO) test -count=1 -short -p 4 -timeout 10m ./...

# Every Fuzz target of the module, found in its test files, $(FUZZTIME) each (their seed
# corpora already ran as tests in `unit`/`race`). Each starts from its seeds and
# testdata/fuzz in a fresh cache directory: the shared cache's corpus grows with every
# run, and re-running it first took longer each time (134 inputs for FuzzSubmitDecode).
fuzz:
	@set -e; cache=$$(mktemp -d); trap 'rm -rf $$cache' EXIT; \
	for d in $$($(GO) list -f '{{.Dir}}' ./...); do \
		for f in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$d/*_test.go 2>/dev/null); do \
			echo "fuzz $$f ($${d#$$(pwd)/})"; \
			$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) $$d -test.fuzzcachedir=$$cache; \
		done; \
	done

bench:
	$(GO) test -run '^$$' -bench . -benchtime 2s ./queue/ ./placement/

clean:
	rm -rf bin .ax-dev
