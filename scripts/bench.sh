#!/usr/bin/env bash
# make bench: measures the service against its limits in one run on this machine and
# writes docs/benchmarks.md, its latency chart and the raw tool output (docs/benchmarks/raw/).
# It builds release binaries, starts its own platform-stub and server processes on free ports,
# uses a database kubesvc_bench_<random> (and a pgbench scratch database beside it) that it
# creates and drops, and never touches another database.
#
# Item N is the group of rows numbered N in docs/benchmarks.md.
#
# Settings (environment; the defaults are the sizes the goals there are stated for):
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
#   BENCH_GATEWAY_CONNECTIONS="16 64" item 6: wrk connections through each proxy and gateway route
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
BENCH_GATEWAY_CONNECTIONS=${BENCH_GATEWAY_CONNECTIONS:-16 64}
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

# wrk_plain OUT CONNECTIONS SECONDS URL [wrk args...]: no Authorization header of its own.
wrk_plain() {
    local out=$1 c=$2 secs=$3 url=$4 threads
    shift 4
    threads=$((c < $(nproc) ? c : $(nproc)))
    say "wrk -t$threads -c$c -d${secs}s --latency $url -> ${out#"$ROOT"/}"
    wrk -t"$threads" -c"$c" -d"${secs}s" --latency "$@" "$url" >"$out"
}

# wrk_run OUT CONNECTIONS SECONDS URL [wrk args...]: as the demo super_admin.
wrk_run() {
    local out=$1 c=$2 secs=$3 url=$4
    shift 4
    wrk_plain "$out" "$c" "$secs" "$url" -H "Authorization: Bearer $TOKEN" "$@"
}

# wait_200 URL [curl args...]: until URL answers 200 (the gateway re-reads auth servers each second).
wait_200() {
    local url=$1 code=""
    shift
    for _ in $(seq 1 100); do
        code=$(curl -sS -o /dev/null -w '%{http_code}' "$@" "$url" 2>/dev/null || true)
        [[ $code == 200 ]] && return 0
        sleep 0.2
    done
    die "$url answered ${code:-nothing} instead of 200 after 20 s"
}

# start_bg NAME PROGRAM ARGS...: a process of this run, its output in $WORK/NAME.log; sets BG_PID.
start_bg() {
    local name=$1
    shift
    "$@" >"$WORK/$name.log" 2>&1 &
    BG_PID=$!
    PIDS+=("$BG_PID")
}

# wait_port NAME PID PORT: until 127.0.0.1:PORT accepts connections.
wait_port() {
    local name=$1 pid=$2 port=$3
    for _ in $(seq 1 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
        kill -0 "$pid" 2>/dev/null || {
            tail -n 20 "$WORK/$name.log" >&2
            die "$name exited at start (log: $WORK/$name.log)"
        }
        sleep 0.1
    done
    die "$name did not listen on :$port (log: $WORK/$name.log)"
}

# create_auth_server BASE JSON: POSTs an auth server as acme's super_admin; fails loudly.
create_auth_server() {
    local base=$1 body=$2 code
    code=$(curl -sS -o "$WORK/auth-server.json" -w '%{http_code}' -X POST \
        -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
        "$base/v1/public/gateway/auth-servers" -d "$body")
    [[ $code == 201 ]] || {
        cat "$WORK/auth-server.json" >&2
        die "creating an auth server answered $code"
    }
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
have openssl || apt_install openssl
# nginx is in /usr/sbin, which is not on every user's PATH.
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[[ -x $NGINX ]] && have caddy || apt_install nginx caddy
[[ -x $NGINX ]] || NGINX=$(command -v nginx || echo /usr/sbin/nginx)
mkdir -p "$WORK" "$RAW"
rm -f "$RAW"/*.txt "$RAW"/*.json

profile_flag=(--release)
[[ $BENCH_PROFILE == release ]] || profile_flag=(--profile "$BENCH_PROFILE")
if [[ ${BENCH_SKIP_BUILD:-0} == 1 ]]; then
    say "BENCH_SKIP_BUILD=1: using the binaries already built"
else
    say "cargo build ${profile_flag[*]} -p server -p platform-stub -p gateway -p bench"
    run_child cargo build "${profile_flag[@]}" -p server -p platform-stub -p gateway -p bench
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
PID_STUB=$!
PIDS+=("$PID_STUB")
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

say "item 6: the gateway next to nginx and Caddy, all in front of one upstream"
GW="$WORK/gateway-$RUN_ID"
rm -rf "$GW"
mkdir -p "$GW/nginx-upstream" "$GW/nginx-proxy" "$GW/caddy"
port_up=$(free_port)
port_nginx=$(free_port)
port_nginx_basic=$(free_port)
port_caddy=$(free_port)
port_gw=$(free_port)
port_issuer=$(free_port)
port_api=$(free_port)
BASIC_USER=bench
BASIC_PASSWORD="bench-pw-$(head -c 9 /dev/urandom | od -An -tx1 | tr -d ' \n')"
STATIC_TOKEN="bench-static-token-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
OIDC_CLIENT=bench-gateway
BASIC_HEADER="Authorization: Basic $(printf '%s:%s' "$BASIC_USER" "$BASIC_PASSWORD" | base64 -w0)"

# nginx_conf DIR SERVERS: an nginx configuration whose files all stay in DIR.
nginx_conf() {
    local dir=$1 servers=$2
    cat >"$dir/nginx.conf" <<NGINX
worker_processes auto;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $dir/client_body;
    proxy_temp_path $dir/proxy;
    fastcgi_temp_path $dir/fastcgi;
    uwsgi_temp_path $dir/uwsgi;
    scgi_temp_path $dir/scgi;
    keepalive_requests 1000000;
    upstream bench_upstream {
        server 127.0.0.1:$port_up;
        keepalive 128;
        keepalive_requests 1000000;
    }
$servers
}
NGINX
}
# The upstream every proxy forwards to: nginx answering 200 with a 3-byte body.
nginx_conf "$GW/nginx-upstream" "    server {
        listen 127.0.0.1:$port_up;
        location / { return 200 \"ok\\n\"; }
    }"
# Connections to the upstream are kept alive, as any proxy in production would be set up.
proxy_block="proxy_pass http://bench_upstream; proxy_http_version 1.1; proxy_set_header Connection \"\";"
printf '%s:%s\n' "$BASIC_USER" "$(openssl passwd -apr1 "$BASIC_PASSWORD")" >"$GW/nginx-proxy/htpasswd"
nginx_conf "$GW/nginx-proxy" "    server {
        listen 127.0.0.1:$port_nginx;
        location / { $proxy_block }
    }
    server {
        listen 127.0.0.1:$port_nginx_basic;
        location / {
            auth_basic \"bench\";
            auth_basic_user_file $GW/nginx-proxy/htpasswd;
            $proxy_block
        }
    }"
cat >"$GW/caddy/Caddyfile" <<CADDY
{
    admin off
    auto_https off
    storage file_system $GW/caddy/data
}
http://127.0.0.1:$port_caddy {
    basicauth {
        $BASIC_USER $(caddy hash-password --plaintext "$BASIC_PASSWORD")
    }
    reverse_proxy 127.0.0.1:$port_up
}
CADDY
cat >"$GW/routes.toml" <<ROUTES
[[route]]
path_prefix = "/basic"
upstream = "http://127.0.0.1:$port_up"
organization = "acme"
environment = "production"
auth_server = "bench-basic"

[[route]]
path_prefix = "/token"
upstream = "http://127.0.0.1:$port_up"
organization = "acme"
environment = "production"
auth_server = "bench-token"

[[route]]
path_prefix = "/oidc"
upstream = "http://127.0.0.1:$port_up"
organization = "acme"
environment = "production"
auth_server = "bench-oidc"
ROUTES

start_bg nginx-upstream "$NGINX" -c "$GW/nginx-upstream/nginx.conf" -p "$GW/nginx-upstream" \
    -e "$GW/nginx-upstream/error.log" \
    -g 'daemon off;'
wait_port nginx-upstream "$BG_PID" "$port_up"
start_bg nginx-proxy "$NGINX" -c "$GW/nginx-proxy/nginx.conf" -p "$GW/nginx-proxy" \
    -e "$GW/nginx-proxy/error.log" -g "daemon off;"
wait_port nginx-proxy "$BG_PID" "$port_nginx_basic"
start_bg caddy env HOME="$GW/caddy" XDG_DATA_HOME="$GW/caddy/data" XDG_CONFIG_HOME="$GW/caddy/config" \
    caddy run --config "$GW/caddy/Caddyfile" --adapter caddyfile
wait_port caddy "$BG_PID" "$port_caddy"
start_bg oidc-issuer "$BIN/bench-oidc-issuer" --bind "127.0.0.1:$port_issuer" \
    --audience "$OIDC_CLIENT" --token-out "$GW/oidc-token"
for _ in $(seq 1 100); do
    [[ -s $GW/oidc-token ]] && break
    sleep 0.1
done
[[ -s $GW/oidc-token ]] || die "bench-oidc-issuer wrote no token (log: $WORK/oidc-issuer.log)"
OIDC_TOKEN=$(cat "$GW/oidc-token")

say "creating the gateway's auth servers through server G on :$port_api"
start_server g "$port_api" TOKEN_CACHE_TTL_S=60
PID_G=$SERVER_PID
G_API="http://127.0.0.1:$port_api"
create_auth_server "$G_API" '{"organization":"acme","name":"bench-basic","environment":"production",
    "type":"basic","config":{"realm":"bench","credentials":[{"username":"'"$BASIC_USER"'",
    "password":"'"$BASIC_PASSWORD"'"}]}}'
create_auth_server "$G_API" '{"organization":"acme","name":"bench-token","environment":"production",
    "type":"token","config":{"tokens":["'"$STATIC_TOKEN"'"]}}'
create_auth_server "$G_API" '{"organization":"acme","name":"bench-oidc","environment":"production",
    "type":"oidc","config":{"issuer_url":"http://127.0.0.1:'"$port_issuer"'",
    "redirect_path":"/oauth/callback","client_id":"'"$OIDC_CLIENT"'","client_secret":"bench-secret",
    "authorized_domain":"127.0.0.1:'"$port_gw"'","username_claim":"sub"}}'
stop_pid "$PID_G"

start_bg gateway env DATABASE_URL="$DB_URL" GATEWAY_BIND_ADDR="127.0.0.1:$port_gw" \
    SECRETS_KEY="$SECRETS_KEY" GATEWAY_ROUTES_FILE="$GW/routes.toml" RUST_LOG=warn "$BIN/gateway"
wait_port gateway "$BG_PID" "$port_gw"
U="http://127.0.0.1"
wait_200 "$U:$port_nginx/bench"
wait_200 "$U:$port_nginx_basic/bench" -H "$BASIC_HEADER"
wait_200 "$U:$port_caddy/bench" -H "$BASIC_HEADER"
wait_200 "$U:$port_gw/basic/bench" -H "$BASIC_HEADER"
wait_200 "$U:$port_gw/token/bench" -H "Authorization: Bearer $STATIC_TOKEN"
wait_200 "$U:$port_gw/oidc/bench" -H "Authorization: Bearer $OIDC_TOKEN"

for c in $BENCH_GATEWAY_CONNECTIONS; do
    wrk_plain "$RAW/gw-nginx-c$c.wrk.txt" "$c" "$BENCH_DURATION" "$U:$port_nginx/bench"
    wrk_plain "$RAW/gw-nginx-basic-c$c.wrk.txt" "$c" "$BENCH_DURATION" "$U:$port_nginx_basic/bench" \
        -H "$BASIC_HEADER"
    wrk_plain "$RAW/gw-caddy-basic-c$c.wrk.txt" "$c" "$BENCH_DURATION" "$U:$port_caddy/bench" \
        -H "$BASIC_HEADER"
    wrk_plain "$RAW/gw-gateway-basic-c$c.wrk.txt" "$c" "$BENCH_DURATION" "$U:$port_gw/basic/bench" \
        -H "$BASIC_HEADER"
    wrk_plain "$RAW/gw-gateway-token-c$c.wrk.txt" "$c" "$BENCH_DURATION" "$U:$port_gw/token/bench" \
        -H "Authorization: Bearer $STATIC_TOKEN"
    wrk_plain "$RAW/gw-gateway-oidc-c$c.wrk.txt" "$c" "$BENCH_DURATION" "$U:$port_gw/oidc/bench" \
        -H "Authorization: Bearer $OIDC_TOKEN"
done
# Every process of item 6 is stopped here (cleanup would stop them too, on a failure).
for pid in "${PIDS[@]}"; do
    [[ $pid == "$PID_STUB" ]] || stop_pid "$pid"
done
rm -rf "$GW"

say "describing the machine"
{
    printf 'date: %s\n' "$(date -u '+%Y-%m-%d %H:%M UTC')"
    printf 'CPU: %s\n' "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
    printf 'cores (nproc): %s\n' "$(nproc)"
    printf 'memory: %s MiB\n' "$(awk '/MemTotal/ {print int($2 / 1024)}' /proc/meminfo)"
    printf 'kernel: %s\n' "$(uname -srm)"
    printf 'PostgreSQL: %s\n' "$(admin_sql 'SHOW server_version')"
    printf 'wrk: %s\n' "$(wrk -v 2>&1 | head -n 1)"
    printf 'nginx: %s\n' "$("$NGINX" -v 2>&1 | head -n 1)"
    printf 'Caddy: %s\n' "$(caddy version 2>&1 | head -n 1)"
    printf 'pgbench: %s\n' "$(pgbench --version)"
    printf 'rustc: %s\n' "$(rustc --version)"
    printf 'build profile: %s\n' "$BENCH_PROFILE"
} >"$RAW/machine.txt"
{
    for v in BENCH_DURATION BENCH_CONNECTIONS BENCH_CLUSTERS BENCH_POOLS BENCH_LIST_CONNECTIONS \
        BENCH_CREATES BENCH_CREATE_CONCURRENCY BENCH_WAITERS BENCH_WAIT_CLUSTERS BENCH_GAP_MS \
        BENCH_SETTLE_MS BENCH_PLATFORM_DURATION BENCH_PLATFORM_CONNECTIONS \
        BENCH_GATEWAY_CONNECTIONS BENCH_DB_POOL_SIZE; do
        printf '%s=%s\n' "$v" "${!v}"
    done
} >"$RAW/params.txt"

say "writing ${BENCH_OUT#"$ROOT"/}/benchmarks.md and benchmarks/latency.png"
"$BIN/bench-report" --raw "$RAW" --out "$BENCH_OUT/benchmarks.md" \
    --chart "$BENCH_OUT/benchmarks/latency.png" --chart-link benchmarks/latency.png
say "make bench: done (report: ${BENCH_OUT#"$ROOT"/}/benchmarks.md)"
