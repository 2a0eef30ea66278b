# paymentsd — every target here is exercised by CI (.ci/run).
#
#   make run      a local Postgres and the Stripe emulator when none is
#                 configured, migrations, a demo user, and the API
#   make test     the whole suite against real Postgres
#   make bench    throughput and latency against Postgres's own ceiling
#   make chaos    the fault run: kills, restarts, processor faults
#   make chaos-failover  the fault run through a Postgres failover, to a
#                 synchronous standby and then to an asynchronous one
#   make generate regenerate sqlc code; make check-generated fails if stale
#   make clean    stop the throwaway Postgres clusters; remove .tmp/ and bin/

SHELL := bash
GO    ?= go
SQLC  := $(GO) tool -modfile=tools/go.mod sqlc

.PHONY: build run test generate check-generated lint fuzz bench bench-go chaos chaos-failover clean

build:
	$(GO) build -o bin/paymentsd ./cmd/paymentsd

run: build
	scripts/run.sh

# A cold run compiles everything with the race detector first (minutes on
# two cores), so it says what it is doing before each stage: compiling (the
# test binaries are linked and cached, not run), Postgres, the tests.
test:
	@echo "make test: compiling the packages and their tests with the race detector (a cold build takes a few minutes)" >&2
	@start=$$(date +%s); out=$$($(GO) test -race -count=1 -exec true ./... 2>&1) || { echo "$$out"; exit 1; }; \
	  echo "make test: compiled in $$(( $$(date +%s) - start ))s; testing against Postgres (a line per package as it finishes)" >&2
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

# BENCH_DURATION=2s is the quick form CI runs; the committed BENCHMARKS.md
# comes from a longer run (see its header for the command).
bench: build
	scripts/bench.sh

# Go micro-benchmarks: compare runs with benchstat.
BENCHTIME ?= 1s
bench-go:
	scripts/with-postgres.sh $(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./internal/idempotency ./internal/api

# CHAOS_DURATION=45s is the short form; CHAOS_DURATION=10m the long one.
chaos: build
	scripts/chaos.sh

# Both failover variants, each a fault run of CHAOS_DURATION.
chaos-failover: build
	CHAOS_FAILOVER=sync scripts/chaos.sh
	CHAOS_FAILOVER=async scripts/chaos.sh

# Stops the throwaway clusters (make run leaves its own running) and removes
# .tmp/ and bin/.
clean:
	scripts/clean.sh

# CI (.ci/run) runs every target above, the slow ones in their short forms.
