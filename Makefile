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
GO_TEST_FLAGS ?= -race -count=1 -timeout 15m
FUZZTIME ?= 10s
BENCHTIME ?= 1s

.PHONY: all tools deps redis chromium run build generate check-generate lint fmt complexity test test-go test-clients fuzz bench clean

all: build

## tools: install the pinned Go tools (buf, protoc plugins, staticcheck, gofumpt, grpcurl, gocyclo) into ./bin
tools: $(BIN)/.tools-stamp
$(BIN)/.tools-stamp: tools/go.mod tools/go.sum
	@mkdir -p $(BIN)
	cd tools && GOBIN=$(BIN) $(GO) install tool
	@touch $@

## redis: install redis-server from Debian's packages when it is missing
redis:
	@if ! command -v redis-server >/dev/null 2>&1; then \
	  echo "installing redis-server from Debian's packages"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq redis-server >/dev/null; \
	fi
	@redis-server --version

## chromium: install Debian's chromium (the admin page's browser test) when it is missing
chromium:
	@if ! command -v chromium >/dev/null 2>&1; then \
	  echo "installing chromium from Debian's packages"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; \
	fi
	@chromium --version

## deps: everything the tests need
deps: tools redis chromium

## build: build the broker binary into ./bin/broker
build:
	$(GO) build -o $(BIN)/broker ./cmd/broker

## run: start the broker on its embedded default (memory store, dev tenant, loopback only), the admin view on $(ADMIN_LISTEN)
run:
	$(GO) run ./cmd/broker --listen $(LISTEN) --admin-listen $(ADMIN_LISTEN) --reflection $(ARGS)

## generate: regenerate gen/ (Go), the Python and TypeScript stubs from proto/ with pinned local plugins,
## and docs/providers.md from the built-in provider catalog
generate: tools
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
fmt: tools
	$(BIN)/gofumpt -w $$(git ls-files '*.go' | grep -v '^gen/')

## complexity: the ten most complex production functions (gocyclo; tests, gen/ and bench/ left out)
complexity: tools
	$(BIN)/gocyclo -top 10 $$(git ls-files '*.go' | grep -v '_test\.go$$' | grep -v '^gen/' | grep -v '^bench/')

## lint: gofumpt, go vet, staticcheck, buf lint and buf format; the clients' ruff, mypy, tsc and biome
lint: tools
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

## bench: micro-benchmarks, then the suite (quota citizenship, overhead, parked calls, scale),
## which writes docs/benchmarks.md and docs/benchmarks/*.png
bench: redis
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./internal/... ./clients/...
	$(GO) run ./bench/cmd/benchsuite

clean:
	rm -rf $(BIN)
