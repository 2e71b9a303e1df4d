# The developer commands. Each target does its own set-up (libpq-dev, PostgreSQL) and prints one
# line per step; the work is in scripts/*.sh. `make help` lists the targets and settings.

SHELL := bash
.DEFAULT_GOAL := help

# Package selection for the Rust tests: `make test CARGO_TEST_ARGS='-p domain'`.
CARGO_TEST_ARGS ?= --workspace
# The steps `make test` runs, in order; each is a function step_NAME in scripts/test.sh.
# rust: the Rust tests; deploy: render deploy/ and deploy/monitoring/ and validate them offline,
# and check and unit-test the Prometheus rules with promtool; openapi: validate
# /v1/openapi.json and lint it with Spectral; client:
# generate a Python client from it and drive a lifecycle (tests/client); refusals: every body the
# Rust black-box tests saw refused with 422 is refused by the document too; docs: the /docs
# reference in headless Chromium (tests/docs); console: the web console driven in headless
# Chromium as a super_admin and a member, with an axe-core scan (tests/console); schemathesis:
# a bounded schema-fuzzing run against `server --dev` (schemathesis.toml); mcp: the assistant's
# /mcp endpoint driven by the official MCP Python SDK against `server --dev` (tests/mcp). `make fuzz` runs the long one,
# then gateway_fuzz: the gateway's HTTP/1.1 client against hyper's under cargo-fuzz (FUZZ_SECONDS).
TEST_STEPS ?= rust deploy openapi client refusals docs console schemathesis mcp

export CARGO_TEST_ARGS TEST_STEPS

.PHONY: help run test fuzz soak bench scale db clean-local

help: ## this list
	@echo 'Targets:'
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z-]+):.*## (.*)/  make \1\t\2/' | expand -t 20
	@echo
	@echo 'Settings (environment or make VAR=value):'
	@echo '  DATABASE_URL        make run: the database to use as is (default: kubesvc_dev, created when missing)'
	@echo '  BIND_ADDR           make run: the address the server listens on (default 127.0.0.1:8080)'
	@echo '  SECRETS_KEY         make run: the key (default: kept in .local/secrets.key, made once)'
	@echo '  TEST_DATABASE_URL   make test: an admin URL to a postgres database, used as is'
	@echo '  KUBESVC_LOCAL_PG=1  use the project-local PostgreSQL even when 127.0.0.1:5432 answers'
	@echo '  CARGO_TEST_ARGS     make test: package selection (default --workspace)'
	@echo '  TEST_STEPS          make test: the steps to run (default: $(TEST_STEPS))'
	@echo '  FUZZ_SECONDS        make fuzz: how long the gateway'"'"'s fuzz target runs (default 300)'
	@echo '  SOAK_SECONDS        make soak: how long each long run lasts (default 300)'
	@echo '  SOAK_TESTS          make soak: the test name filters (default: replicas failover patroni key_rotation)'

run: ## the server in development mode (PostgreSQL, database kubesvc_dev, SECRETS_KEY set up first)
	@bash scripts/run.sh

test: ## every test (libpq-dev and PostgreSQL set up first)
	@bash scripts/test.sh

fuzz: ## a long schemathesis run (1000 examples per operation) against server --dev, then the gateway's HTTP/1.1 client fuzzed against hyper's (FUZZ_SECONDS, default 300; cargo-fuzz installed first)
	@FUZZ_EXAMPLES=$${FUZZ_EXAMPLES:-1000} TEST_STEPS='openapi schemathesis gateway_fuzz' bash scripts/test.sh

soak: ## the long forms of the replica, failover and key-rotation runs (SOAK_SECONDS, default 300; nginx and PostgreSQL set up first)
	@bash scripts/soak.sh

bench: ## measure against the limits: writes docs/benchmarks.md (release builds; BENCH_* settings: kubesvc-bench --help)
	@bash scripts/bench.sh

scale: ## the service at 1,000,000 clusters beside 10,000: writes docs/scale.md (release builds, about half an hour; SCALE_* settings: crates/bench/src/bin/scale.rs)
	@bash scripts/scale.sh

db: ## the PostgreSQL make test uses, kept up until Ctrl-C (prints TEST_DATABASE_URL)
	@bash scripts/postgres.sh serve

clean-local: ## stop and remove the project-local PostgreSQL (.local/pg), nothing else
	@bash scripts/postgres.sh clean
