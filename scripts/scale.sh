#!/usr/bin/env bash
# make scale: the service at a million clusters beside ten thousand (crates/bench/src/scale):
# the tools installed, the open-files limit raised, the release binaries built and PostgreSQL
# chosen (scripts/postgres.sh); kubesvc-scale does the rest and writes docs/scale.md. Never part
# of make test: it takes about half an hour and several GB of disk. Settings: SCALE_* (see
# crates/bench/src/bin/scale.rs); SCALE_SKIP_BUILD=1 uses the binaries as built.

set -euo pipefail

# shellcheck source=scripts/postgres.sh
source "$(dirname "${BASH_SOURCE[0]}")/postgres.sh"

cd "$ROOT"
ensure_libpq_dev
have wrk || apt_install wrk
{ have psql && have pgbench; } || apt_install postgresql-client

if [[ ${SCALE_SKIP_BUILD:-0} == 1 ]]; then
    say "SCALE_SKIP_BUILD=1: using the binaries already built"
else
    say "cargo build --release -p server -p platform-stub -p bench"
    run_child cargo build --release -p server -p platform-stub -p bench
fi
BIN="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)/release"

ulimit -Hn 65536 2>/dev/null || true
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
say "open files limit: $(ulimit -n)"

pg_choose
run_child "$BIN/kubesvc-scale" --admin-url "$PG_ADMIN_URL" --bin-dir "$BIN" --root "$ROOT" "$@"
