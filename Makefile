# Rayito's build entry points. `make help` lists them.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

# Modules of the workspace (go.work) and the libraries outsiders import,
# which must also build and test without the workspace.
MODULES := proto rayd sdk localvm cli tests bench
LIBRARIES := proto
TMP := $(CURDIR)/.tmp
BIN := $(TMP)/bin
export PATH := $(BIN):$(PATH)
FUZZTIME ?= 20000x

.PHONY: help
help: ## List the targets.
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 18

.PHONY: tools
tools: $(BIN)/buf ## Build the pinned tools (tools/go.mod) into .tmp/bin.

$(BIN)/buf: tools/go.mod tools/go.sum
	@mkdir -p $(BIN)
	cd tools && GOWORK=off go build -o $(BIN)/ github.com/bufbuild/buf/cmd/buf google.golang.org/protobuf/cmd/protoc-gen-go connectrpc.com/connect/cmd/protoc-gen-connect-go \
		github.com/rhysd/actionlint/cmd/actionlint github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod
	@touch $@

.PHONY: generate
generate: tools ## Regenerate Go and Connect code from the .proto files.
	buf generate

.PHONY: check-generate
check-generate: generate ## Fail when the committed generated code is stale.
	@git add -N proto/gen
	@if ! git diff --quiet --exit-code -- proto/gen || [ -n "$$(git status --porcelain -- proto/gen)" ]; then \
		git status --short -- proto/gen; echo "generated code is stale: run make generate and commit"; exit 1; fi

.PHONY: lint
lint: tools ## buf lint and format, gofmt, go vet (workspace and GOWORK=off for libraries).
	buf lint
	buf format --diff --exit-code
	@bad=$$(gofmt -l $(MODULES) | grep -v '/gen/' || true); if [ -n "$$bad" ]; then echo "gofmt needed:"; echo "$$bad"; exit 1; fi
	go vet $(addsuffix /...,$(addprefix ./,$(MODULES)))
	for m in $(LIBRARIES); do (cd $$m && GOWORK=off go vet ./...); done

.PHONY: breaking
breaking: tools ## buf breaking against the last proto/v* release tag, when there is one.
	@tag=$$(git describe --tags --match 'proto/v*' --abbrev=0 2>/dev/null || true); \
	if [ -z "$$tag" ]; then echo "breaking: no proto/v* release tag yet, nothing to compare"; \
	else buf breaking --against ".git#tag=$$tag"; fi

.PHONY: test
test: ## Run every test with -race (root-only tests skip with a reason when not root).
	go test -race -count=1 $(addsuffix /...,$(addprefix ./,$(MODULES)))
	for m in $(LIBRARIES); do (cd $$m && GOWORK=off go test -count=1 ./...); done

.PHONY: test-fuzz
test-fuzz: ## Run each fuzz target for FUZZTIME (default 20000x, a count: a deadline can flake on a busy machine).
	go test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./proto/runpayload
	go test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./proto/accesstoken
	go test -run '^$$' -fuzz '^FuzzParseTable$$' -fuzztime $(FUZZTIME) ./rayd/internal/peercred
	go test -run '^$$' -fuzz '^FuzzParseDiagReply$$' -fuzztime $(FUZZTIME) ./rayd/internal/peercred
	go test -run '^$$' -fuzz '^FuzzReadEnvelope$$' -fuzztime $(FUZZTIME) ./bench/internal/peer
	go test -run '^$$' -fuzz '^FuzzParsePasswd$$' -fuzztime $(FUZZTIME) ./rayd/internal/identity
	go test -run '^$$' -fuzz '^FuzzVerify$$' -fuzztime $(FUZZTIME) ./localvm/internal/authtoken
	go test -run '^$$' -fuzz '^FuzzPortHeader$$' -fuzztime $(FUZZTIME) ./localvm/internal/proxy
	go test -run '^$$' -fuzz '^FuzzResponseError$$' -fuzztime $(FUZZTIME) ./sdk/microvms
	go test -run '^$$' -fuzz '^FuzzRequest$$' -fuzztime $(FUZZTIME) ./localvm/internal/api
	go test -run '^$$' -fuzz '^FuzzEnvelope$$' -fuzztime $(FUZZTIME) ./rayd/internal/hooks
	go test -run '^$$' -fuzz '^FuzzResolve$$' -fuzztime $(FUZZTIME) ./rayd/internal/safefs

.PHONY: build
build: ## Build rayd into .tmp/bin.
	go build -o $(BIN)/rayd ./rayd/cmd/rayd

.PHONY: ci
ci: check-generate lint breaking test test-fuzz ## Everything CI runs: the README's test command.
	@echo "ci: all checks passed"
