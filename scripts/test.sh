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
# The long-poll tests hold a thousand connections at once; 1024 descriptors is not enough.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
TEST_STEPS=${TEST_STEPS:-rust}

# ---- The steps. Each is a function step_NAME, listed in TEST_STEPS (Makefile); each runs with
# ---- TEST_DATABASE_URL exported and PostgreSQL up, and returns its status.

# shellcheck disable=SC2317 # steps are called as "step_$step"
step_rust() {
    local args
    read -r -a args <<<"$CARGO_TEST_ARGS"
    # Every body a black-box test sees refused with 422 is written here; step refusals checks
    # that the OpenAPI document refuses it too.
    rm -rf "$REFUSED_DIR" && mkdir -p "$REFUSED_DIR"
    export KUBESVC_RECORD_422="$REFUSED_DIR"
    # The CLI tests check kubeconfigs with kubectl and run terminal sessions under script(1)
    # and tmux.
    have kubectl || die "kubectl is needed: the CLI tests check the kubeconfig it merges"
    have script || apt_install bsdutils
    have tmux || apt_install tmux
    { have nginx || [[ -x /usr/sbin/nginx ]]; } || apt_install nginx
    # The replicas test runs three servers through PgBouncer in transaction mode too (as a child
    # process of the test, on a port of its own). Debian's package also enables a pgbouncer
    # service on port 6432 where systemd runs; the test does not use it.
    { have pgbouncer || [[ -x /usr/sbin/pgbouncer ]]; } || apt_install pgbouncer
    # The automatic failover test (tests/tests/faults/patroni.rs) runs Patroni over a
    # three-member etcd, each process started by the test on ports of its own.
    ensure_patroni
    # The crash-and-restart tests run the real `server` binary as a child process, and the
    # CLI tests the real `kubesvc`, the operator's tests the real `kubesvc-admin`.
    say "cargo build -p server -p kubesvc -p kubesvc-admin (the binaries the process and CLI tests start)"
    run_child cargo build -p server --bin server -p kubesvc --bin kubesvc \
        -p kubesvc-admin --bin kubesvc-admin || return $?
    KUBESVC_SERVER_BIN="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)/debug/server"
    KUBESVC_CLI_BIN="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)/debug/kubesvc"
    KUBESVC_ADMIN_BIN="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)/debug/kubesvc-admin"
    export KUBESVC_SERVER_BIN KUBESVC_CLI_BIN KUBESVC_ADMIN_BIN
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

# ---- The contract steps run against one `server --dev` on a database of their own
# ---- (kubesvc_fuzz_<random>, created here and dropped when the steps end).

VENV="${KUBESVC_CACHE:-$HOME/.cache/kubesvc}/venv"
FUZZ_PID=""
FUZZ_DB=""
FUZZ_URL=""
FUZZ_EXAMPLES=${FUZZ_EXAMPLES:-10}
# The demo super_admin of acme of the embedded development platform.
FUZZ_TOKEN=dev-only-token-acme-super-admin-7c1f0e9a4b2d4c8e9f3a6b5d

ensure_python_tools() {
    if [[ -x $VENV/bin/st && -x $VENV/bin/openapi-spec-validator ]] &&
        "$VENV/bin/pip" freeze 2>/dev/null | grep -qx 'schemathesis==4.32.5'; then
        return 0
    fi
    say "installing schemathesis and openapi-spec-validator into $VENV (pinned in scripts/requirements-fuzz.txt)"
    if ! python3 -m venv --help >/dev/null 2>&1; then
        apt_install python3-venv
    fi
    python3 -m venv "$VENV" || { apt_install python3-venv && python3 -m venv "$VENV"; }
    "$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$ROOT/scripts/requirements-fuzz.txt"
}

admin_sql() {
    have psql || apt_install postgresql-client
    psql "$TEST_DATABASE_URL" -v ON_ERROR_STOP=1 -qAtc "$1"
}

stop_fuzz_server() {
    if [[ -n $FUZZ_PID ]]; then
        kill -TERM "$FUZZ_PID" 2>/dev/null || true
        wait "$FUZZ_PID" 2>/dev/null || true
        FUZZ_PID=""
    fi
    if [[ -n $FUZZ_DB ]]; then
        admin_sql "DROP DATABASE IF EXISTS $FUZZ_DB WITH (FORCE)" || true
        FUZZ_DB=""
    fi
}

start_fuzz_server() {
    [[ -z $FUZZ_PID ]] || return 0
    local bin port db_url
    mkdir -p "$ROOT/.local"
    bin="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)/debug/server"
    [[ -x $bin ]] || run_child cargo build -p server --bin server || return $?
    FUZZ_DB="kubesvc_fuzz_$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')"
    admin_sql "CREATE DATABASE $FUZZ_DB"
    db_url="${TEST_DATABASE_URL%/*}/$FUZZ_DB"
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    FUZZ_URL="http://127.0.0.1:$port"
    say "starting server --dev on $FUZZ_URL (database $FUZZ_DB, created for this run)"
    # No fair-use limits: schema fuzzing sends thousands of requests with one token.
    env -u ACCOUNT_PLATFORM_URL DATABASE_URL="$db_url" BIND_ADDR="127.0.0.1:$port" PROVISIONER_STEP_MS=0 \
        RATE_LIMIT_PER_TOKEN=0 RATE_LIMIT_WRITES_PER_TOKEN=0 RATE_LIMIT_WRITES_PER_ORGANIZATION=0 RATE_LIMIT_UNAUTHENTICATED_PER_ADDRESS=0 RUST_LOG=warn "$bin" --dev >"$ROOT/.local/fuzz-server.log" 2>&1 &
    FUZZ_PID=$!
    local i
    for i in $(seq 1 100); do
        curl -fsS "$FUZZ_URL/healthz" >/dev/null 2>&1 && return 0
        kill -0 "$FUZZ_PID" 2>/dev/null || { cat "$ROOT/.local/fuzz-server.log" >&2; return 1; }
        sleep 0.2
    done
    die "server --dev did not answer /healthz (log: .local/fuzz-server.log)"
}

# shellcheck disable=SC2317 # steps are called as "step_$step"
step_openapi() {
    mkdir -p "$ROOT/.local"
    ensure_python_tools || return $?
    ensure_spectral || return $?
    start_fuzz_server || return $?
    say "validating $FUZZ_URL/v1/openapi.json with openapi-spec-validator"
    curl -fsS "$FUZZ_URL/v1/openapi.json" -o "$ROOT/.local/openapi.json" || return $?
    "$VENV/bin/openapi-spec-validator" "$ROOT/.local/openapi.json" || return $?
    say "linting it with Spectral $SPECTRAL_VERSION (.spectral.yaml: spectral:oas; any warning fails)"
    "$SPECTRAL" lint --ruleset "$ROOT/.spectral.yaml" --fail-severity warn "$ROOT/.local/openapi.json"
}

SPECTRAL_VERSION=6.15.0
SPECTRAL_DIR="${KUBESVC_CACHE:-$HOME/.cache/kubesvc}/spectral-$SPECTRAL_VERSION"
SPECTRAL="$SPECTRAL_DIR/node_modules/.bin/spectral"

ensure_spectral() {
    [[ -x $SPECTRAL ]] && return 0
    have npm || apt_install nodejs npm
    say "installing @stoplight/spectral-cli@$SPECTRAL_VERSION into $SPECTRAL_DIR (npm)"
    mkdir -p "$SPECTRAL_DIR"
    run_child npm install --prefix "$SPECTRAL_DIR" --no-audit --no-fund --silent \
        "@stoplight/spectral-cli@$SPECTRAL_VERSION"
}

# shellcheck disable=SC2317 # steps are called as "step_$step"
step_client() {
    mkdir -p "$ROOT/.local"
    ensure_client_tools || return $?
    start_fuzz_server || return $?
    local out="$ROOT/.local/client"
    say "generating a Python client from $FUZZ_URL/v1/openapi.json (openapi-python-client, tests/client/openapi-python-client.yaml)"
    rm -rf "$out" && mkdir -p "$out"
    (cd "$out" && run_child "$CLIENT_VENV/bin/openapi-python-client" generate --url "$FUZZ_URL/v1/openapi.json" \
        --meta none --output-path "$out/kubesvc_client" \
        --config "$ROOT/tests/client/openapi-python-client.yaml" --fail-on-warning) || return $?
    say "driving a lifecycle with it (tests/client/lifecycle.py)"
    run_child env PYTHONPATH="$out" KUBESVC_URL="$FUZZ_URL" "$CLIENT_VENV/bin/python" "$ROOT/tests/client/lifecycle.py"
}

DEPLOY_VENV="${KUBESVC_CACHE:-$HOME/.cache/kubesvc}/deploy-venv"

# shellcheck disable=SC2317 # steps are called as "step_$step"
step_deploy() {
    have kubectl || die "kubectl renders deploy/ (kubectl kustomize, offline)"
    if ! "$DEPLOY_VENV/bin/pip" freeze 2>/dev/null | grep -qx 'kubernetes-validate==1.37.0'; then
        say "installing kubernetes-validate into $DEPLOY_VENV (pinned in scripts/requirements-deploy.txt)"
        python3 -m venv "$DEPLOY_VENV" || { apt_install python3-venv && python3 -m venv "$DEPLOY_VENV"; }
        "$DEPLOY_VENV/bin/pip" install --quiet --disable-pip-version-check -r "$ROOT/scripts/requirements-deploy.txt" || return $?
    fi
    mkdir -p "$ROOT/.local"
    local rendered="$ROOT/.local/deploy.yaml"
    say "rendering deploy/ with kubectl kustomize"
    kubectl kustomize "$ROOT/deploy" >"$rendered" || return $?
    say "validating every object against the Kubernetes 1.32 schemas (kubernetes-validate --strict)"
    "$DEPLOY_VENV/bin/kubernetes-validate" --strict --quiet -k 1.32.0 "$rendered" || return $?
    # deploy/postgres/ (CloudNativePG's Cluster) is applied on its own, once the operator is
    # installed; the Kubernetes schemas do not know its kind, so check-deploy.py checks it.
    local rendered_pg="$ROOT/.local/deploy-postgres.yaml"
    say "rendering deploy/postgres with kubectl kustomize"
    kubectl kustomize "$ROOT/deploy/postgres" >"$rendered_pg" || return $?
    say "checking settings, probes, resources and security contexts, and the PostgreSQL cluster (scripts/check-deploy.py)"
    "$DEPLOY_VENV/bin/python" "$ROOT/scripts/check-deploy.py" "$rendered" \
        "$ROOT/docs/configuration.md" "$ROOT/docs/gateway.md" "$rendered_pg" || return $?
    step_deploy_monitoring
}

# deploy/monitoring/: the Prometheus rules, their unit tests, and the Grafana dashboard. Which
# series they select is checked against real scrapes by a black-box test (step rust).
# shellcheck disable=SC2317 # called by step_deploy, itself called as "step_$step"
step_deploy_monitoring() {
    local dir="$ROOT/deploy/monitoring" rendered="$ROOT/.local/deploy-monitoring.yaml"
    # promtool ships in Debian's Prometheus package, with the server itself (which Debian
    # enables as a service where systemd runs).
    have promtool || apt_install prometheus
    say "rendering deploy/monitoring/ with kubectl kustomize, validating it (kubernetes-validate --strict)"
    kubectl kustomize "$dir" >"$rendered" || return $?
    "$DEPLOY_VENV/bin/kubernetes-validate" --strict --quiet -k 1.32.0 "$rendered" || return $?
    say "promtool check rules, promtool test rules (deploy/monitoring/*.test.yaml)"
    promtool check rules "$dir/kubesvc.rules.yaml" || return $?
    (cd "$dir" && promtool test rules kubesvc.rules.test.yaml kubesvc.rules.long.test.yaml) || return $?
    say "checking the alerts' cases, their docs, the PrometheusRule and the dashboard (scripts/check-monitoring.py)"
    "$DEPLOY_VENV/bin/python" "$ROOT/scripts/check-monitoring.py" "$dir" "$ROOT/docs/operations.md"
}

# shellcheck disable=SC2317 # steps are called as "step_$step"
step_docs() {
    have chromium || apt_install chromium
    have npm || apt_install nodejs npm
    if [[ ! -f $ROOT/tests/docs/node_modules/playwright-core/package.json ]]; then
        say "installing playwright-core into tests/docs (npm, pinned by its package-lock.json)"
        run_child npm ci --prefix "$ROOT/tests/docs" --no-audit --no-fund --silent || return $?
    fi
    start_fuzz_server || return $?
    say "opening $FUZZ_URL/docs in headless Chromium (tests/docs/check.mjs)"
    run_child env BASE_URL="$FUZZ_URL" TOKEN="$FUZZ_TOKEN" node "$ROOT/tests/docs/check.mjs"
}

# shellcheck disable=SC2317 # steps are called as "step_$step"
step_console() {
    have chromium || apt_install chromium
    have npm || apt_install nodejs npm
    have kubectl || die "kubectl is needed to check the kubeconfig the console hands out"
    if [[ ! -f $ROOT/tests/console/node_modules/axe-core/package.json ]]; then
        say "installing playwright-core and axe-core into tests/console (npm, pinned by its package-lock.json)"
        run_child npm ci --prefix "$ROOT/tests/console" --no-audit --no-fund --silent || return $?
    fi
    start_fuzz_server || return $?
    say "driving $FUZZ_URL/console in headless Chromium as a super_admin and a member (tests/console/check.mjs)"
    run_child env BASE_URL="$FUZZ_URL" node "$ROOT/tests/console/check.mjs"
}

# shellcheck disable=SC2317 # steps are called as "step_$step"
step_refusals() {
    if ! compgen -G "$REFUSED_DIR/*.jsonl" >/dev/null; then
        say "no refused bodies recorded (step rust writes them): nothing to check"
        return 0
    fi
    ensure_client_tools || return $?
    start_fuzz_server || return $?
    curl -fsS "$FUZZ_URL/v1/openapi.json" -o "$ROOT/.local/openapi.json" || return $?
    say "every body the black-box tests saw refused with 422 is refused by the document too (tests/client/refusals.py)"
    run_child "$CLIENT_VENV/bin/python" "$ROOT/tests/client/refusals.py" "$ROOT/.local/openapi.json" "$REFUSED_DIR"
}

REFUSED_DIR="$ROOT/.local/refused-422"
CLIENT_VENV="${KUBESVC_CACHE:-$HOME/.cache/kubesvc}/client-venv"

ensure_client_tools() {
    if [[ -x $CLIENT_VENV/bin/openapi-python-client ]] &&
        "$CLIENT_VENV/bin/pip" freeze 2>/dev/null | grep -qx 'openapi-python-client==0.29.1' &&
        "$CLIENT_VENV/bin/pip" freeze 2>/dev/null | grep -qx 'openapi-core==0.23.1'; then
        return 0
    fi
    say "installing openapi-python-client into $CLIENT_VENV (pinned in tests/client/requirements.txt)"
    python3 -m venv "$CLIENT_VENV" || { apt_install python3-venv && python3 -m venv "$CLIENT_VENV"; }
    "$CLIENT_VENV/bin/pip" install --quiet --disable-pip-version-check -r "$ROOT/tests/client/requirements.txt"
}

# shellcheck disable=SC2317 # steps are called as "step_$step"
step_schemathesis() {
    mkdir -p "$ROOT/.local"
    ensure_python_tools || return $?
    start_fuzz_server || return $?
    say "schemathesis: every check of schemathesis.toml, $FUZZ_EXAMPLES examples per operation, seed 1"
    (cd "$ROOT" && "$VENV/bin/st" run "$FUZZ_URL/v1/openapi.json" --url "$FUZZ_URL" \
        -H "Authorization: Bearer $FUZZ_TOKEN" -H "X-Platform-Organization: acme" \
        --max-examples "$FUZZ_EXAMPLES" --seed 1 --no-color)
}

MCP_VENV="${KUBESVC_CACHE:-$HOME/.cache/kubesvc}/mcp-venv"

ensure_mcp_tools() {
    if [[ -x $MCP_VENV/bin/python ]] &&
        "$MCP_VENV/bin/pip" freeze 2>/dev/null | grep -qx 'mcp==2.3.0' &&
        "$MCP_VENV/bin/pip" freeze 2>/dev/null | grep -qx 'jsonschema==4.26.0'; then
        return 0
    fi
    say "installing the MCP Python SDK into $MCP_VENV (pinned in tests/mcp/requirements.txt)"
    python3 -m venv "$MCP_VENV" || { apt_install python3-venv && python3 -m venv "$MCP_VENV"; }
    "$MCP_VENV/bin/pip" install --quiet --disable-pip-version-check -r "$ROOT/tests/mcp/requirements.txt"
}

# shellcheck disable=SC2317 # steps are called as "step_$step"
step_mcp() {
    mkdir -p "$ROOT/.local"
    ensure_mcp_tools || return $?
    start_fuzz_server || return $?
    say "the assistant's /mcp endpoint through the official MCP Python SDK, both protocol revisions (tests/mcp/check.py)"
    local cli
    cli="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)/debug/kubesvc"
    [[ -x $cli ]] || run_child cargo build -p kubesvc --bin kubesvc || return $?
    run_child env KUBESVC_URL="$FUZZ_URL" KUBESVC_CLI_BIN="$cli" "$MCP_VENV/bin/python" "$ROOT/tests/mcp/check.py"
}

# ---- The gateway's fuzz target (make fuzz): its own HTTP/1.1 client and hyper's read the same
# ---- upstream bytes, and any disagreement beyond the listed ones is a crash (docs/gateway.md).

FUZZ_SECONDS=${FUZZ_SECONDS:-300}
CARGO_FUZZ_VERSION=0.13.2
GATEWAY_FUZZ_TARGET=wire_differential

ensure_cargo_fuzz() {
    if cargo fuzz --version 2>/dev/null | grep -qx "cargo-fuzz $CARGO_FUZZ_VERSION"; then
        return 0
    fi
    # libFuzzer's C++ part is built by libfuzzer-sys.
    have c++ || apt_install g++
    say "installing cargo-fuzz $CARGO_FUZZ_VERSION (cargo install --locked, from crates.io)"
    run_child cargo install --locked --version "$CARGO_FUZZ_VERSION" cargo-fuzz
}

# shellcheck disable=SC2317 # steps are called as "step_$step"
step_gateway_fuzz() {
    ensure_cargo_fuzz || return $?
    local fuzz="$ROOT/crates/gateway/fuzz" out="$ROOT/.local/fuzz/$GATEWAY_FUZZ_TARGET" target_dir=()
    mkdir -p "$out/corpus" "$out/artifacts"
    # Its own target directory: the instrumented build would otherwise replace the tests' one.
    [[ -z ${CARGO_TARGET_DIR:-} ]] || target_dir=(--target-dir "$CARGO_TARGET_DIR/fuzz")
    say "cargo fuzz run $GATEWAY_FUZZ_TARGET for ${FUZZ_SECONDS}s: the gateway's HTTP/1.1 client against hyper's (stable rustc with RUSTC_BOOTSTRAP=1 for libFuzzer's flags; the committed corpus, new inputs in .local/fuzz/$GATEWAY_FUZZ_TARGET/corpus, a disagreement in .local/fuzz/$GATEWAY_FUZZ_TARGET/artifacts)"
    run_child env RUSTC_BOOTSTRAP=1 cargo fuzz run --fuzz-dir "$fuzz" --sanitizer none \
        "${target_dir[@]}" "$GATEWAY_FUZZ_TARGET" "$out/corpus" "$fuzz/corpus/$GATEWAY_FUZZ_TARGET" -- \
        -max_total_time="$FUZZ_SECONDS" -max_len=8192 -dict="$fuzz/$GATEWAY_FUZZ_TARGET.dict" \
        -artifact_prefix="$out/artifacts/" -print_final_stats=1
}

cd "$ROOT"
say "make test: steps: $TEST_STEPS"
for step in $TEST_STEPS; do
    declare -F "step_$step" >/dev/null || die "unknown test step '$step' (TEST_STEPS=$TEST_STEPS)"
done
ensure_libpq_dev

choose_test_database

status=0
results=()
# (the contract steps' server and database are stopped and dropped after the last step)
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
stop_fuzz_server
say "make test: $(IFS=,; printf '%s' "${results[*]}" | sed 's/,/, /g')"
exit "$status"
