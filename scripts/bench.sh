#!/usr/bin/env bash
# make bench: measures the service against its limits (issue 8) in one run on this machine and
# writes docs/benchmarks.md, its latency chart and the raw tool output (docs/benchmarks/raw/).
# It builds release binaries, starts its own platform-stub and server processes on free ports,
# uses a database kubesvc_bench_<random> (and a pgbench scratch database beside it) that it
# creates and drops, and never touches another database.
#
# Settings (environment; the defaults are the issue's sizes):
#   BENCH_DURATION=10            seconds of each wrk and pgbench run (items 1 and 2)
#   BENCH_CONNECTIONS="1 16 64"  item 1: wrk connections and pgbench clients
#   BENCH_CLUSTERS=10000         item 2: clusters seeded (SQL) for acme, each with BENCH_POOLS pools
#   BENCH_POOLS=3
#   BENCH_LIST_CONNECTIONS="1 16" item 2: wrk connections of the list
#   BENCH_CREATES=2000           item 3: distinct Idempotency-Keys (then replayed once each)
#   BENCH_CREATE_CONCURRENCY=16
#   BENCH_WAITERS=10000          item 4: concurrent /state long-polls on one server process
#   BENCH_WAIT_CLUSTERS=100      item 4: over this many clusters
#   BENCH_GAP_MS=100             item 4: pause between two clusters' changes
#   BENCH_SETTLE_MS=3000         item 4: pause after the last waiter is sent, before RSS and changes
#   BENCH_PLATFORM_DURATION=5    item 5: seconds of each wrk run (cache on, cache off)
#   BENCH_PLATFORM_CONNECTIONS=16
#   BENCH_DB_POOL_SIZE=16        the servers' DATABASE_POOL_SIZE
#   BENCH_PROFILE=release        cargo profile of the binaries (only release writes docs/)
#   BENCH_OUT=docs               where benchmarks.md and benchmarks/ go
#   BENCH_SKIP_BUILD=1           use the binaries as built (for checking this script)

set -euo pipefail

# shellcheck source=scripts/postgres.sh
source "$(dirname "${BASH_SOURCE[0]}")/postgres.sh"

BENCH_DURATION=${BENCH_DURATION:-10}
BENCH_CONNECTIONS=${BENCH_CONNECTIONS:-1 16 64}
BENCH_CLUSTERS=${BENCH_CLUSTERS:-10000}
BENCH_POOLS=${BENCH_POOLS:-3}
BENCH_LIST_CONNECTIONS=${BENCH_LIST_CONNECTIONS:-1 16}
BENCH_CREATES=${BENCH_CREATES:-2000}
BENCH_CREATE_CONCURRENCY=${BENCH_CREATE_CONCURRENCY:-16}
BENCH_WAITERS=${BENCH_WAITERS:-10000}
BENCH_WAIT_CLUSTERS=${BENCH_WAIT_CLUSTERS:-100}
BENCH_GAP_MS=${BENCH_GAP_MS:-100}
BENCH_SETTLE_MS=${BENCH_SETTLE_MS:-3000}
BENCH_PLATFORM_DURATION=${BENCH_PLATFORM_DURATION:-5}
BENCH_PLATFORM_CONNECTIONS=${BENCH_PLATFORM_CONNECTIONS:-16}
BENCH_DB_POOL_SIZE=${BENCH_DB_POOL_SIZE:-16}
BENCH_PROFILE=${BENCH_PROFILE:-release}
BENCH_OUT=${BENCH_OUT:-$ROOT/docs}

# The demo super_admin of acme of the development directory (crates/account-platform/src/dev.rs).
TOKEN=dev-only-token-acme-super-admin-7c1f0e9a4b2d4c8e9f3a6b5d
ACME_ID=0a0c0e00-0000-4000-8000-000000000001

WORK="$LOCAL_DIR/bench"
RAW="$BENCH_OUT/benchmarks/raw"
RUN_ID=$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')
BENCH_DB=""
PGBENCH_DB=""
PIDS=()

admin_sql() { psql "$PG_ADMIN_URL" -v ON_ERROR_STOP=1 -qAtc "$1"; }
bench_sql() { psql "$DB_URL" -v ON_ERROR_STOP=1 -qAt "$@"; }

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${PIDS[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    PIDS=()
    if [[ -n $PG_ADMIN_URL ]]; then
        local db
        for db in $BENCH_DB $PGBENCH_DB; do
            admin_sql "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 ||
                warn "could not drop the database $db"
        done
    fi
    pg_local_stop
}

stop_pid() {
    local pid=$1 keep=() p
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    for p in "${PIDS[@]}"; do
        [[ $p == "$pid" ]] || keep+=("$p")
    done
    PIDS=("${keep[@]}")
}

# start_server NAME PORT [VAR=value ...]: a server on 127.0.0.1:PORT; sets SERVER_PID.
start_server() {
    local name=$1 port=$2
    shift 2
    env DATABASE_URL="$DB_URL" BIND_ADDR="127.0.0.1:$port" ACCOUNT_PLATFORM_URL="$STUB_URL" \
        ACCOUNT_PLATFORM_SERVICE_TOKEN="$STUB_SERVICE_TOKEN" SECRETS_KEY="$SECRETS_KEY" \
        RECONCILER_WORKERS=0 ZONE_MAX_NODES=1000000000 DATABASE_POOL_SIZE="$BENCH_DB_POOL_SIZE" \
        RUST_LOG=warn "$@" "$BIN/server" >"$WORK/server-$name.log" 2>&1 &
    SERVER_PID=$!
    PIDS+=("$SERVER_PID")
    for _ in $(seq 1 150); do
        curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && return 0
        kill -0 "$SERVER_PID" 2>/dev/null || {
            tail -n 20 "$WORK/server-$name.log" >&2
            die "server $name exited at start (log: $WORK/server-$name.log)"
        }
        sleep 0.2
    done
    die "server $name did not become ready (log: $WORK/server-$name.log)"
}

metrics() { curl -fsS "$1/metrics"; }

# wrk_run OUT CONNECTIONS SECONDS URL [wrk args...]
wrk_run() {
    local out=$1 c=$2 secs=$3 url=$4 threads
    shift 4
    threads=$((c < $(nproc) ? c : $(nproc)))
    say "wrk -t$threads -c$c -d${secs}s --latency $url -> ${out#"$ROOT"/}"
    wrk -t"$threads" -c"$c" -d"${secs}s" --latency -H "Authorization: Bearer $TOKEN" "$@" "$url" >"$out"
}

cd "$ROOT"
if [[ $BENCH_PROFILE != release && $BENCH_OUT == "$ROOT/docs" ]]; then
    die "only release builds write docs/: set BENCH_OUT to another directory for BENCH_PROFILE=$BENCH_PROFILE"
fi
say "make bench: run $RUN_ID, profile $BENCH_PROFILE, results in ${BENCH_OUT#"$ROOT"/}"
ensure_libpq_dev
have wrk || apt_install wrk
have psql || apt_install postgresql-client
have pgbench || apt_install postgresql-client
have curl || apt_install curl
mkdir -p "$WORK" "$RAW"
rm -f "$RAW"/*.txt "$RAW"/*.json

profile_flag=(--release)
[[ $BENCH_PROFILE == release ]] || profile_flag=(--profile "$BENCH_PROFILE")
if [[ ${BENCH_SKIP_BUILD:-0} == 1 ]]; then
    say "BENCH_SKIP_BUILD=1: using the binaries already built"
else
    say "cargo build ${profile_flag[*]} -p server -p platform-stub -p bench"
    run_child cargo build "${profile_flag[@]}" -p server -p platform-stub -p bench
fi
target_subdir=$BENCH_PROFILE
[[ $BENCH_PROFILE != dev ]] || target_subdir=debug
BIN="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)/$target_subdir"

# More descriptors than 10,000 waiters need, on both sides (the hard limit allowing).
ulimit -Hn 65536 2>/dev/null || true
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
say "open files limit: $(ulimit -n)"
((BENCH_WAITERS + 200 < $(ulimit -n))) ||
    warn "ulimit -n $(ulimit -n) is below BENCH_WAITERS=$BENCH_WAITERS: some waiters will fail"

pg_choose
# After pg_choose, which sets its own EXIT trap when it starts a project-local PostgreSQL.
trap cleanup EXIT
BENCH_DB="kubesvc_bench_$RUN_ID"
PGBENCH_DB="kubesvc_bench_${RUN_ID}_pgbench"
DB_URL="${PG_ADMIN_URL%/*}/$BENCH_DB"
say "creating the databases $BENCH_DB and $PGBENCH_DB (dropped at the end)"
admin_sql "CREATE DATABASE $BENCH_DB"
admin_sql "CREATE DATABASE $PGBENCH_DB"

SECRETS_KEY=$(head -c 32 /dev/urandom | base64)
STUB_SERVICE_TOKEN="bench-service-token-$RUN_ID$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
stub_port=$(free_port)
STUB_URL="http://127.0.0.1:$stub_port"
say "starting platform-stub on $STUB_URL"
PLATFORM_STUB_SERVICE_TOKEN=$STUB_SERVICE_TOKEN "$BIN/platform-stub" --bind "127.0.0.1:$stub_port" \
    >"$WORK/platform-stub.log" 2>&1 &
PIDS+=("$!")
for _ in $(seq 1 50); do
    curl -sS -o /dev/null "$STUB_URL/v1/me" 2>/dev/null && break
    sleep 0.1
done

port_a=$(free_port)
A="http://127.0.0.1:$port_a"
say "starting server A on $A (token cache on: TOKEN_CACHE_TTL_S=10; runs the migrations)"
start_server a "$port_a" TOKEN_CACHE_TTL_S=10
PID_A=$SERVER_PID

say "seeding $BENCH_CLUSTERS clusters × $BENCH_POOLS pools for acme with SQL"
bench_sql -c "
INSERT INTO clusters (id, organization_id, organization_slug, name, description, tags, zone, version,
    control_plane_option_id, exposure, network_mode, phase, hub_registration_status,
    default_environment_status, revision, created_at, updated_at)
SELECT gen_random_uuid(), '$ACME_ID', 'acme', 'bench-' || i, 'seeded by make bench', '{}', 'zone-1',
    'v1.32.4', 'cp-standard', 'private', 'intranet', 'Pending', 'pending', 'pending', 1,
    timestamptz '2025-01-01 00:00:00+00' + i * interval '1 second',
    timestamptz '2025-01-01 00:00:00+00' + i * interval '1 second'
FROM generate_series(1, $BENCH_CLUSTERS) AS i;
INSERT INTO node_pools (cluster_id, name, size, count, auto_scale, min_nodes, max_nodes, labels, tags,
    root_volume_size_gib, status, created_at, updated_at)
SELECT c.id, 'pool-' || p, 'kube.c5.large', 1, false, 1, NULL, '{}', '{}', 50, 'Provisioning',
    c.created_at, c.created_at
FROM clusters c CROSS JOIN generate_series(1, $BENCH_POOLS) AS p;
ANALYZE;"
CLUSTER_ID=$(bench_sql -c "SELECT id FROM clusters ORDER BY created_at, id LIMIT 1")
say "warming the token cache (one GET of cluster $CLUSTER_ID)"
curl -fsS -o /dev/null -H "Authorization: Bearer $TOKEN" "$A/v1/public/clusters/$CLUSTER_ID"

say "item 1: GET /v1/public/clusters/{id} at $BENCH_CONNECTIONS connections, pgbench -S beside it"
for c in $BENCH_CONNECTIONS; do
    wrk_run "$RAW/get-by-id-c$c.wrk.txt" "$c" "$BENCH_DURATION" "$A/v1/public/clusters/$CLUSTER_ID"
done
PGBENCH_URL="${PG_ADMIN_URL%/*}/$PGBENCH_DB"
say "pgbench -i (scale 1) on $PGBENCH_DB"
pgbench -i -q "$PGBENCH_URL" >"$RAW/pgbench-init.txt" 2>&1
for c in $BENCH_CONNECTIONS; do
    threads=$((c < $(nproc) ? c : $(nproc)))
    say "pgbench -S -c $c -j $threads -T $BENCH_DURATION -> raw/pgbench-c$c.txt"
    pgbench -S -n -c "$c" -j "$threads" -T "$BENCH_DURATION" "$PGBENCH_URL" >"$RAW/pgbench-c$c.txt" 2>&1
done
admin_sql "DROP DATABASE IF EXISTS $PGBENCH_DB WITH (FORCE)"
PGBENCH_DB=""

say "item 2: GET /v1/public/clusters?size=100 with $BENCH_CLUSTERS clusters"
for c in $BENCH_LIST_CONNECTIONS; do
    wrk_run "$RAW/list-c$c.wrk.txt" "$c" "$BENCH_DURATION" "$A/v1/public/clusters?size=100" \
        -H "X-Platform-Organization: acme"
done

say "item 5 (cache on): platform calls during $BENCH_PLATFORM_DURATION s of GET by id"
metrics "$A" >"$RAW/platform-cache-on.metrics-before.txt"
wrk_run "$RAW/platform-cache-on.wrk.txt" "$BENCH_PLATFORM_CONNECTIONS" "$BENCH_PLATFORM_DURATION" \
    "$A/v1/public/clusters/$CLUSTER_ID"
metrics "$A" >"$RAW/platform-cache-on.metrics-after.txt"

say "item 3: $BENCH_CREATES creates with Idempotency-Key, then their replays"
"$BIN/bench-idempotency" --url "$A" --token "$TOKEN" --count "$BENCH_CREATES" \
    --concurrency "$BENCH_CREATE_CONCURRENCY" --prefix "$RUN_ID" --out "$RAW/idempotency.json" \
    >/dev/null
stop_pid "$PID_A"

port_l=$(free_port)
port_b=$(free_port)
say "item 4: a fresh server L on :$port_l for the waiters, server B on :$port_b for the changes"
start_server l "$port_l" TOKEN_CACHE_TTL_S=60
PID_L=$SERVER_PID
start_server b "$port_b" TOKEN_CACHE_TTL_S=60
PID_B=$SERVER_PID
"$BIN/bench-longpoll" --url "http://127.0.0.1:$port_l" --patch-url "http://127.0.0.1:$port_b" \
    --token "$TOKEN" --server-pid "$PID_L" --waiters "$BENCH_WAITERS" \
    --clusters "$BENCH_WAIT_CLUSTERS" --gap-ms "$BENCH_GAP_MS" --settle-ms "$BENCH_SETTLE_MS" \
    --out "$RAW/longpoll.json" >/dev/null 2>"$RAW/longpoll.stderr.txt" ||
    warn "bench-longpoll reported a failure (see raw/longpoll.json and raw/longpoll.stderr.txt)"
stop_pid "$PID_L"
stop_pid "$PID_B"

port_c=$(free_port)
say "item 5 (cache off): server C on :$port_c with TOKEN_CACHE_TTL_S=0"
start_server c "$port_c" TOKEN_CACHE_TTL_S=0
PID_C=$SERVER_PID
metrics "http://127.0.0.1:$port_c" >"$RAW/platform-cache-off.metrics-before.txt"
wrk_run "$RAW/platform-cache-off.wrk.txt" "$BENCH_PLATFORM_CONNECTIONS" "$BENCH_PLATFORM_DURATION" \
    "http://127.0.0.1:$port_c/v1/public/clusters/$CLUSTER_ID"
metrics "http://127.0.0.1:$port_c" >"$RAW/platform-cache-off.metrics-after.txt"
stop_pid "$PID_C"

say "describing the machine"
{
    printf 'date: %s\n' "$(date -u '+%Y-%m-%d %H:%M UTC')"
    printf 'CPU: %s\n' "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
    printf 'cores (nproc): %s\n' "$(nproc)"
    printf 'memory: %s MiB\n' "$(awk '/MemTotal/ {print int($2 / 1024)}' /proc/meminfo)"
    printf 'kernel: %s\n' "$(uname -srm)"
    printf 'PostgreSQL: %s\n' "$(admin_sql 'SHOW server_version')"
    printf 'wrk: %s\n' "$(wrk -v 2>&1 | head -n 1)"
    printf 'pgbench: %s\n' "$(pgbench --version)"
    printf 'rustc: %s\n' "$(rustc --version)"
    printf 'build profile: %s\n' "$BENCH_PROFILE"
} >"$RAW/machine.txt"
{
    for v in BENCH_DURATION BENCH_CONNECTIONS BENCH_CLUSTERS BENCH_POOLS BENCH_LIST_CONNECTIONS \
        BENCH_CREATES BENCH_CREATE_CONCURRENCY BENCH_WAITERS BENCH_WAIT_CLUSTERS BENCH_GAP_MS \
        BENCH_SETTLE_MS BENCH_PLATFORM_DURATION BENCH_PLATFORM_CONNECTIONS BENCH_DB_POOL_SIZE; do
        printf '%s=%s\n' "$v" "${!v}"
    done
} >"$RAW/params.txt"

say "writing ${BENCH_OUT#"$ROOT"/}/benchmarks.md and benchmarks/latency.png"
"$BIN/bench-report" --raw "$RAW" --out "$BENCH_OUT/benchmarks.md" \
    --chart "$BENCH_OUT/benchmarks/latency.png" --chart-link benchmarks/latency.png
say "make bench: done (report: ${BENCH_OUT#"$ROOT"/}/benchmarks.md)"
