# Retry broker. `make run` starts the broker on its embedded default;
# `make test` installs everything the tests need, then runs them all.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
GO ?= go
BIN := $(CURDIR)/bin
export PATH := $(BIN):$(PATH)
export GOFLAGS := -buildvcs=false

ARGS ?=
LISTEN ?= 127.0.0.1:50051
ADMIN_LISTEN ?= 127.0.0.1:9091
# make run keeps deferred calls (tasks) in a SQLite file here; TASKS= turns
# them off, TASKS='--tasks-postgres URL' moves them.
STATE_DIR ?= $(if $(XDG_STATE_HOME),$(XDG_STATE_HOME),$(HOME)/.local/state)/retrybroker
TASKS ?= --tasks-sqlite $(STATE_DIR)/tasks.db
GO_TEST_FLAGS ?= -race -count=1 -timeout 25m
FUZZTIME ?= 10s
BENCHTIME ?= 1s

# VERSION and REVISION are linked into the binary (broker version) and set
# the image's OCI labels.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.revision=$(REVISION)
IMAGE ?= localhost/retrybroker:dev

.PHONY: all tools devtools deps redis postgresql versitygw hydra chromium run build image image-test generate check-generate lint fmt complexity test test-go test-stack-pgo test-clients fuzz bench pgo clean

all: build

## tools: install the pinned Go tools (buf, protoc plugins, staticcheck, gofumpt, grpcurl, gocyclo,
## and helm and promtool, each in its own module for its large dependency tree) into ./bin
tools: devtools $(BIN)/.helm-stamp $(BIN)/.promtool-stamp

## devtools: only the quick ones (buf, protoc plugins, staticcheck, gofumpt, grpcurl, gocyclo): what
## lint, generate and the README's quickstart need, without helm and promtool's long first build
devtools: $(BIN)/.tools-stamp
$(BIN)/.tools-stamp: tools/go.mod tools/go.sum
	@mkdir -p $(BIN)
	cd tools && GOBIN=$(BIN) $(GO) install tool
	@touch $@
$(BIN)/.helm-stamp: tools/helm/go.mod tools/helm/go.sum
	@mkdir -p $(BIN)
	cd tools/helm && GOBIN=$(BIN) $(GO) install tool
	@touch $@
$(BIN)/.promtool-stamp: tools/promtool/go.mod tools/promtool/go.sum
	@mkdir -p $(BIN)
	cd tools/promtool && GOBIN=$(BIN) $(GO) install tool
	@touch $@

## redis: install redis-server from Debian's packages when it is missing
redis:
	@if ! command -v redis-server >/dev/null 2>&1; then \
	  echo "installing redis-server from Debian's packages"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq redis-server >/dev/null; \
	fi
	@redis-server --version

## postgresql: install postgres and initdb from Debian's packages when they are missing (the task store
## tests start their own server from /usr/lib/postgresql/*/bin, internal/tasks/pgtest)
postgresql:
	@if ! ls /usr/lib/postgresql/*/bin/initdb /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 && \
	    ! { command -v initdb && command -v postgres; } >/dev/null 2>&1; then \
	  echo "installing postgresql from Debian's packages"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq postgresql >/dev/null; \
	fi
	@"$$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || dirname "$$(command -v postgres)")/postgres" --version

## versitygw: build versitygw (the S3 server the aws_sigv4 tests verify signatures with) into ./bin, pinned in tools/versitygw
versitygw: $(BIN)/versitygw
$(BIN)/versitygw: tools/versitygw/go.mod tools/versitygw/go.sum
	@mkdir -p $(BIN)
	cd tools/versitygw && GOBIN=$(BIN) $(GO) install tool


## hydra: build ory/hydra (pinned in tools/hydra/go.mod, with SQLite) into ./bin/hydra, the real OAuth2 server of the credential tests
hydra: $(BIN)/hydra
$(BIN)/hydra: tools/hydra/go.mod tools/hydra/go.sum
	@mkdir -p $(BIN)
	cd tools/hydra && CGO_ENABLED=1 $(GO) build -tags sqlite,sqlite_omit_load_extension -o $(BIN)/hydra github.com/ory/hydra/v2

## chromium: install Debian's chromium (the admin page's browser test) when it is missing
chromium:
	@if ! command -v chromium >/dev/null 2>&1; then \
	  echo "installing chromium from Debian's packages"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; \
	fi
	@chromium --version

## deps: everything the tests need
deps: tools redis postgresql versitygw hydra chromium

## build: build the broker binary into ./bin/broker
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/broker ./cmd/broker

## image: build the container image $(IMAGE) with podman or docker (podman from Debian when neither
## is installed). The binary is built here and copied into a FROM scratch image (deploy/image/Dockerfile.prebuilt),
## so no base image is pulled; the root Dockerfile builds the same image anywhere from source.
image:
	VERSION=$(VERSION) REVISION=$(REVISION) IMAGE=$(IMAGE) deploy/image/build.sh

## image-test: build the image, inspect it, extract its filesystem and serve health from its binary
image-test: image
	RETRYBROKER_IMAGE_TEST=$(IMAGE) $(GO) test -count=1 -run 'TestImage' ./deploy/

## run: start the broker on its embedded default (memory store, dev tenant, loopback only, tasks in $(STATE_DIR)/tasks.db), the admin view on $(ADMIN_LISTEN)
run:
	@mkdir -p $(STATE_DIR) && echo "make run: state directory $(STATE_DIR) (tasks: $(TASKS))"
	$(GO) run ./cmd/broker --listen $(LISTEN) --admin-listen $(ADMIN_LISTEN) --reflection $(TASKS) $(ARGS)

## generate: regenerate gen/ (Go), the Python and TypeScript stubs from proto/ with pinned local plugins,
## and docs/providers.md from the built-in provider catalog
generate: devtools
	$(BIN)/buf format -w
	$(BIN)/buf generate
	$(GO) run ./cmd/broker providers docs > docs/providers.md.tmp && mv docs/providers.md.tmp docs/providers.md
	$(MAKE) -C clients/python generate
	$(MAKE) -C clients/typescript generate
	$(MAKE) -C clients/typescript build   # dist/ is committed: installing the folder runs no build (clients/typescript/README.md)

## check-generate: fail when `make generate` changes any committed file
check-generate: generate
	@git diff --exit-code -- gen proto clients docs/providers.md || { echo "make generate changed committed files"; exit 1; }
	@test -z "$$(git status --porcelain -- gen clients | grep -v node_modules)" || { git status --porcelain -- gen clients; echo "make generate left untracked files"; exit 1; }

## fmt: format Go code with gofumpt
fmt: devtools
	$(BIN)/gofumpt -w $$(git ls-files '*.go' | grep -v '^gen/')

## complexity: the ten most complex production functions (gocyclo; tests, gen/ and bench/ left out)
complexity: devtools
	$(BIN)/gocyclo -top 10 $$(git ls-files '*.go' | grep -v '_test\.go$$' | grep -v '^gen/' | grep -v '^bench/')

## lint: gofumpt, go vet, staticcheck, buf lint and buf format; the clients' ruff, mypy, tsc and biome
lint: devtools
	@out=$$($(BIN)/gofumpt -l $$(git ls-files '*.go' | grep -v '^gen/')); if [ -n "$$out" ]; then echo "gofumpt would change:"; echo "$$out"; exit 1; fi
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^gen/')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(BIN)/staticcheck ./...
	$(BIN)/buf lint
	$(BIN)/buf format -d --exit-code
	$(MAKE) -C clients/python lint
	$(MAKE) -C clients/typescript lint

## test: install what the tests need, then run every suite
test: deps test-go test-clients

test-go:
	$(GO) test $(GO_TEST_FLAGS) ./...
	$(MAKE) test-stack-pgo

## test-stack-pgo: Execute's stack budget (TestExecuteStackDepth) as the broker is built, with its PGO
## profile: profile-guided inlining can deepen the path past the 8 KiB stack (issue 22)
test-stack-pgo:
	$(GO) test -count=1 -pgo=cmd/broker/default.pgo -run '^TestExecuteStackDepth$$' ./internal/server

## test-clients: the Python and TypeScript clients against a real broker process
test-clients: build
	$(MAKE) -C clients/python test BROKER_BIN=$(BIN)/broker
	$(MAKE) -C clients/typescript test BROKER_BIN=$(BIN)/broker

## fuzz: run every fuzz target for FUZZTIME (default 10s)
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

## bench: micro-benchmarks, then the suite (quota citizenship, overhead, credentials, parked calls, scale),
## which writes docs/benchmarks.md and docs/benchmarks/*.png
bench: redis
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./internal/... ./clients/...
	$(GO) run ./bench/cmd/benchsuite

## pgo: profile the suite's in-process scenarios (overhead, stream) and make that profile
## cmd/broker/default.pgo, which go build applies to the broker (bench/cmd/benchsuite links it)
## A profile whose inlining deepens Execute's stack past its budget is refused (TestExecuteStackDepth).
pgo: redis
	$(GO) run -pgo=off ./bench/cmd/benchsuite -only overhead,stream -doc "" -charts "" -cpuprofile cmd/broker/default.pgo.new
	$(GO) test -count=1 -pgo=cmd/broker/default.pgo.new -run '^TestExecuteStackDepth$$' ./internal/server || \
	  { rm -f cmd/broker/default.pgo.new; echo "pgo: the new profile deepens Execute's stack past its budget; cmd/broker/default.pgo kept" >&2; exit 1; }
	mv cmd/broker/default.pgo.new cmd/broker/default.pgo

clean:
	rm -rf $(BIN)
