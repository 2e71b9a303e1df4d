#!/usr/bin/env bash
# make bench: what must happen in a shell before kubesvc-bench (crates/bench) runs: the tools
# installed, the open-files limit raised, the release binaries built and PostgreSQL chosen
# (scripts/postgres.sh). kubesvc-bench does the rest: processes, databases, seed, items, report.
# Its settings are the BENCH_* environment variables (`kubesvc-bench --help` lists them; e.g.
# BENCH_ONLY=1,3 runs items 1 and 3). This script reads two of them itself:
#   BENCH_PROFILE=release  cargo profile of the binaries (only release writes docs/)
#   BENCH_SKIP_BUILD=1     use the binaries as built
# Arguments are passed on to kubesvc-bench (e.g. `bash scripts/bench.sh --only 7`).

set -euo pipefail

# shellcheck source=scripts/postgres.sh
source "$(dirname "${BASH_SOURCE[0]}")/postgres.sh"

BENCH_PROFILE=${BENCH_PROFILE:-release}
export BENCH_PROFILE
cd "$ROOT"
ensure_libpq_dev
have wrk || apt_install wrk
{ have psql && have pgbench; } || apt_install postgresql-client
have openssl || apt_install openssl
# nginx is in /usr/sbin, which is not on every user's PATH.
{ { have nginx || [[ -x /usr/sbin/nginx ]]; } && have caddy; } || apt_install nginx caddy

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

pg_choose
# Not exec: the EXIT trap of pg_choose stops a project-local PostgreSQL after the run.
run_child "$BIN/kubesvc-bench" --admin-url "$PG_ADMIN_URL" --bin-dir "$BIN" --root "$ROOT" "$@"
