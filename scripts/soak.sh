#!/usr/bin/env bash
# make soak: the long forms of the fault tests that run for as long as they are given: three
# server replicas behind nginx, killed and stopped round after round under load
# (tests/tests/faults/replicas.rs), the database failover runs (failover.rs, by hand, and
# patroni.rs, Patroni promoting by itself), and the SECRETS_KEY rotation under load
# (key_rotation.rs). Each reads SOAK_SECONDS and runs its short
# form (as in make test) without it. Prints each test's measured figures.
#
# Settings (make passes them through): SOAK_SECONDS (default 300), SOAK_TESTS (the test name
# filters, default "replicas failover patroni key_rotation"), TEST_DATABASE_URL (as for make test; when
# unset, see scripts/postgres.sh).

set -euo pipefail

# shellcheck source=scripts/postgres.sh
source "$(dirname "${BASH_SOURCE[0]}")/postgres.sh"

export SOAK_SECONDS=${SOAK_SECONDS:-300}
SOAK_TESTS=${SOAK_TESTS:-replicas failover patroni key_rotation}
# Each replica holds connections of its own and the long-polls of the load.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

cd "$ROOT"
ensure_libpq_dev
{ have nginx || [[ -x /usr/sbin/nginx ]]; } || apt_install nginx
ensure_patroni

choose_test_database

# The tests start the real `server` binary as child processes, the rotation `kubesvc-admin`.
say "cargo build -p server -p kubesvc-admin (the binaries the soak starts)"
run_child cargo build -p server --bin server -p kubesvc-admin --bin kubesvc-admin
KUBESVC_SERVER_BIN="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)/debug/server"
KUBESVC_ADMIN_BIN="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)/debug/kubesvc-admin"
export KUBESVC_SERVER_BIN KUBESVC_ADMIN_BIN

read -r -a filters <<<"$SOAK_TESTS"
# One at a time, output shown: the figures are the point, and the machine has two cores.
if cargo nextest --version >/dev/null 2>&1; then
    say "SOAK_SECONDS=$SOAK_SECONDS cargo nextest run -p blackbox --test faults --no-capture -- ${filters[*]}"
    run_child cargo nextest run -p blackbox --test faults --no-capture -- "${filters[@]}"
else
    say "SOAK_SECONDS=$SOAK_SECONDS cargo test -p blackbox --test faults -- ${filters[*]} (cargo-nextest is not installed)"
    run_child cargo test -p blackbox --test faults -- "${filters[@]}" --nocapture --test-threads 1
fi
