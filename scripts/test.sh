#!/usr/bin/env bash
# make test: every test, with every set-up step it needs (libpq-dev, a PostgreSQL server for the
# tests that create their own kubesvc_test_* databases). Exits non-zero when any step fails.
#
# Settings (make passes them through): TEST_DATABASE_URL (an admin URL to a `postgres` database;
# when unset, see scripts/postgres.sh), CARGO_TEST_ARGS (package selection, default --workspace),
# TEST_STEPS (the steps below, in order).

set -euo pipefail

# shellcheck source=scripts/postgres.sh
source "$(dirname "${BASH_SOURCE[0]}")/postgres.sh"

CARGO_TEST_ARGS=${CARGO_TEST_ARGS:---workspace}
TEST_STEPS=${TEST_STEPS:-rust}

# ---- The steps. Each is a function step_NAME, listed in TEST_STEPS (Makefile); each runs with
# ---- TEST_DATABASE_URL exported and PostgreSQL up, and returns its status.

# shellcheck disable=SC2317 # steps are called as "step_$step"
step_rust() {
    local args
    read -r -a args <<<"$CARGO_TEST_ARGS"
    # The crash-and-restart tests run the real `server` binary as a child process.
    say "cargo build -p server --bin server (the binary the process tests start)"
    run_child cargo build -p server --bin server || return $?
    KUBESVC_SERVER_BIN="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)/debug/server"
    export KUBESVC_SERVER_BIN
    if cargo nextest --version >/dev/null 2>&1; then
        say "cargo nextest run ${args[*]} --no-fail-fast"
        local status=0
        run_child cargo nextest run "${args[@]}" --no-fail-fast || status=$?
        # nextest does not run doctests. cargo refuses --doc for a selection of binary-only
        # packages (-p server), so a narrowed selection skips them.
        if [[ $INTERRUPTED -ne 0 ]]; then
            :
        elif [[ " ${args[*]} " == *" --workspace "* || " ${args[*]} " == *" --all "* ]]; then
            say "cargo test ${args[*]} --doc --no-fail-fast (the doctests, which nextest does not run)"
            run_child cargo test "${args[@]}" --doc --no-fail-fast || status=$?
        else
            say "skipping the doctests: CARGO_TEST_ARGS does not select the whole workspace"
        fi
        return "$status"
    else
        say "cargo test ${args[*]} --no-fail-fast (cargo-nextest is not installed)"
        run_child cargo test "${args[@]}" --no-fail-fast
    fi
}

# ---- Later steps go here (added by later issues, then named in TEST_STEPS in the Makefile):
# ----   step_openapi       validate the server's OpenAPI document;
# ----   step_schemathesis  a bounded schemathesis run against `server --dev`.

cd "$ROOT"
say "make test: steps: $TEST_STEPS"
for step in $TEST_STEPS; do
    declare -F "step_$step" >/dev/null || die "unknown test step '$step' (TEST_STEPS=$TEST_STEPS)"
done
ensure_libpq_dev

if [[ -n ${TEST_DATABASE_URL:-} ]]; then
    say "TEST_DATABASE_URL is set: using it as is ($(redact_url "$TEST_DATABASE_URL"))"
else
    pg_choose
    export TEST_DATABASE_URL="$PG_ADMIN_URL"
    say "TEST_DATABASE_URL=$TEST_DATABASE_URL (the tests create and drop their own kubesvc_test_* databases)"
fi

status=0
results=()
for step in $TEST_STEPS; do
    say "step $step"
    step_status=0
    "step_$step" || step_status=$?
    if [[ $step_status -eq 0 ]]; then
        results+=("$step ok")
    else
        results+=("$step FAILED ($step_status)")
        [[ $status -ne 0 ]] || status=$step_status
    fi
    [[ $INTERRUPTED -eq 0 ]] || break
done
say "make test: $(IFS=,; printf '%s' "${results[*]}" | sed 's/,/, /g')"
exit "$status"
