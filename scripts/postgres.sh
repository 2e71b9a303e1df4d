#!/usr/bin/env bash
# Chooses the PostgreSQL server that `make run` and `make test` use, and owns the project-local
# cluster under .local/pg. Sourced by run.sh and test.sh (pg_choose); run directly for
# `serve` (make db) and `clean` (make clean-local).
#
# The choice, in order:
#   1. the caller's URL variable (DATABASE_URL or TEST_DATABASE_URL), when set: used as is;
#   2. KUBESVC_LOCAL_PG=1: the project-local cluster, whatever answers at 127.0.0.1:5432;
#   3. a server answering at 127.0.0.1:5432: postgres://postgres@127.0.0.1:5432/postgres;
#   4. otherwise the project-local cluster: data in .local/pg, a free port from 54330 up,
#      trust auth, fsync off, stopped (pg_ctl -m immediate) when the make target ends.
# It never creates, changes or drops anything on a server it did not start, except what the
# caller asks for (make run creates the database kubesvc_dev when it is missing).

set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PG_HOME="$LOCAL_DIR/pg"
PG_USER=postgres
PG_PORT=""
PG_ADMIN_URL=""
PG_STARTED=0
PG_BIN=""
PG_BASE="" # where the cluster's files really are: $PG_HOME, or its target when it is a link

pg_answers_at() {
    local host=$1 port=$2
    if have pg_isready; then
        pg_isready -q -h "$host" -p "$port" -t 3
    else
        timeout 3 bash -c "exec 3<>/dev/tcp/$host/$port" 2>/dev/null
    fi
}

# Sets PG_ADMIN_URL (and PG_PORT): the admin URL to the `postgres` database of the chosen server.
pg_choose() {
    if [[ ${KUBESVC_LOCAL_PG:-0} == 1 ]]; then
        say "KUBESVC_LOCAL_PG=1: using a project-local PostgreSQL whatever answers at 127.0.0.1:5432"
        pg_local_start
    elif pg_answers_at 127.0.0.1 5432; then
        say "using the PostgreSQL answering at 127.0.0.1:5432 (user postgres)"
        PG_PORT=5432
    else
        say "nothing answers at 127.0.0.1:5432: a project-local PostgreSQL is needed"
        pg_local_start
    fi
    PG_ADMIN_URL="postgres://$PG_USER@127.0.0.1:$PG_PORT/postgres"
}

# TEST_DATABASE_URL as given, else the PostgreSQL pg_choose finds (exported): make test and
# make soak.
choose_test_database() {
    if [[ -n ${TEST_DATABASE_URL:-} ]]; then
        say "TEST_DATABASE_URL is set: using it as is ($(redact_url "$TEST_DATABASE_URL"))"
    else
        pg_choose
        export TEST_DATABASE_URL="$PG_ADMIN_URL"
        say "TEST_DATABASE_URL=$TEST_DATABASE_URL (the tests create and drop their own kubesvc_test_* databases)"
    fi
}

# Runs a PostgreSQL tool as the cluster's owner: initdb and pg_ctl refuse to run as root.
as_pg() {
    if [[ $EUID -eq 0 ]]; then
        (cd "$PG_BASE" && runuser -u "$PG_USER" -- "$@")
    else
        (cd "$PG_BASE" && "$@")
    fi
}

# Sets PG_BIN to the directory holding initdb, pg_ctl and postgres; the version that made the
# data directory when there is one.
pg_find_bin() {
    local version="" dir
    if [[ -f $PG_BASE/data/PG_VERSION ]]; then
        version=$(cat "$PG_BASE/data/PG_VERSION")
        if [[ -x /usr/lib/postgresql/$version/bin/pg_ctl ]]; then
            PG_BIN=/usr/lib/postgresql/$version/bin
            return 0
        fi
    fi
    while IFS= read -r dir; do
        if [[ -x $dir/initdb && -x $dir/pg_ctl && -x $dir/postgres ]]; then
            PG_BIN=$dir
            break
        fi
    done < <(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V -r)
    if [[ -z $PG_BIN ]] && have initdb && have pg_ctl; then
        PG_BIN=$(dirname "$(command -v pg_ctl)")
    fi
    if [[ -n $version && -n $PG_BIN ]]; then
        local found
        found=$("$PG_BIN/pg_ctl" --version | sed -E 's/.* ([0-9]+)(\.[0-9]+)*.*/\1/')
        [[ $found == "$version" ]] ||
            die "the data in .local/pg is from PostgreSQL $version but $PG_BIN is $found: run make clean-local"
    fi
    [[ -n $PG_BIN ]]
}

pg_resolve_base() {
    if [[ -L $PG_HOME ]]; then PG_BASE=$(readlink "$PG_HOME"); else PG_BASE=$PG_HOME; fi
}

pg_ensure_binaries() {
    pg_resolve_base
    if ! pg_find_bin; then
        say "the PostgreSQL server binaries are missing: installing them"
        apt_install postgresql
        pg_find_bin || die "PostgreSQL was installed but no initdb/pg_ctl was found under /usr/lib/postgresql"
    fi
    say "PostgreSQL server binaries: $PG_BIN ($("$PG_BIN/postgres" --version))"
    if [[ $EUID -eq 0 ]] && ! id -u "$PG_USER" >/dev/null 2>&1; then
        say "creating the system user $PG_USER (initdb refuses to run as root)"
        useradd --system --user-group --no-create-home --home-dir /nonexistent \
            --shell /usr/sbin/nologin "$PG_USER"
    fi
}

# Creates .local/pg owned by the cluster's owner. As root, the postgres user must reach it; when
# a parent directory is closed to that user (a clone under /root), the files go to /var/tmp and
# .local/pg is a link to them.
pg_prepare_home() {
    mkdir -p "$LOCAL_DIR"
    pg_resolve_base
    if [[ ! -L $PG_HOME ]]; then
        if [[ $EUID -eq 0 ]] && ! runuser -u "$PG_USER" -- test -x "$LOCAL_DIR" 2>/dev/null; then
            PG_BASE="/var/tmp/kubesvc-pg-$(printf '%s' "$ROOT" | cksum | cut -d' ' -f1)"
            say "the user $PG_USER cannot reach $LOCAL_DIR: keeping the cluster in $PG_BASE (linked from .local/pg)"
            ln -sfn "$PG_BASE" "$PG_HOME"
        fi
    fi
    mkdir -p "$PG_BASE"
    if [[ $EUID -eq 0 ]]; then
        chown "$PG_USER:" "$PG_BASE"
    fi
    chmod 700 "$PG_BASE"
    as_pg mkdir -p "$PG_BASE/run"
}

pg_local_running() {
    [[ -f $PG_BASE/data/postmaster.pid ]] && as_pg "$PG_BIN/pg_ctl" -D "$PG_BASE/data" status >/dev/null 2>&1
}

pg_free_port() {
    local port
    for port in $(seq "${1:-54330}" 54429); do
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && [[ ! -e $PG_BASE/run/.s.PGSQL.$port.lock ]]; then
            printf '%s\n' "$port"
            return 0
        fi
    done
    return 1
}

pg_local_start() {
    pg_ensure_binaries
    pg_prepare_home
    # Serialises two make targets starting the cluster at once (make run beside make test). The
    # server must not inherit the lock's descriptor, or it would hold the lock while it runs.
    exec {PG_LOCK_FD}>"$LOCAL_DIR/pg.lock"
    if have flock; then
        flock "$PG_LOCK_FD"
    fi
    if pg_local_running; then
        PG_PORT=$(sed -n 4p "$PG_BASE/data/postmaster.pid")
        say "reusing the project-local PostgreSQL already running on 127.0.0.1:$PG_PORT (started by another command; make clean-local stops it)"
        pg_unlock
        return 0
    fi
    if [[ ! -f $PG_BASE/data/PG_VERSION ]]; then
        say "initdb: a new project-local cluster in .local/pg (user postgres, trust auth, no password)"
        rm -rf "$PG_BASE/data"
        as_pg "$PG_BIN/initdb" -D "$PG_BASE/data" -U "$PG_USER" -A trust -E UTF8 --no-locale \
            --no-sync >"$PG_BASE/initdb.log" 2>&1 ||
            die "initdb failed; its output: $PG_BASE/initdb.log"
    fi
    # Unix socket paths are limited to about 107 bytes; a deep clone does without the socket.
    local socket_dir="$PG_BASE/run" attempt port=54329
    if ((${#socket_dir} > 90)); then
        socket_dir=""
    fi
    for attempt in 1 2 3; do
        port=$(pg_free_port $((port + 1))) || die "no free port in 54330-54429 for PostgreSQL"
        say "starting a project-local PostgreSQL on 127.0.0.1:$port (data in .local/pg, log in .local/pg/postgres.log)"
        if as_pg "$PG_BIN/pg_ctl" -D "$PG_BASE/data" -l "$PG_BASE/postgres.log" -w -t 30 start \
            -o "-p $port -k '$socket_dir' -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
            >/dev/null {PG_LOCK_FD}>&-; then
            PG_PORT=$port
            PG_STARTED=1
            trap pg_local_stop EXIT
            pg_unlock
            return 0
        fi
        warn "PostgreSQL did not start on port $port (attempt $attempt); last log lines:"
        tail -n 5 "$PG_BASE/postgres.log" >&2 || true
    done
    die "the project-local PostgreSQL did not start; see $PG_BASE/postgres.log"
}

pg_unlock() {
    if [[ -n ${PG_LOCK_FD:-} ]]; then
        exec {PG_LOCK_FD}>&-
        PG_LOCK_FD=""
    fi
}

# The EXIT trap of a script that started the cluster.
pg_local_stop() {
    if [[ $PG_STARTED -eq 1 ]]; then
        PG_STARTED=0
        if [[ ! -f $PG_BASE/data/postmaster.pid ]]; then
            say "the project-local PostgreSQL is already stopped"
            return 0
        fi
        say "stopping the project-local PostgreSQL on 127.0.0.1:$PG_PORT (pg_ctl -m immediate stop)"
        as_pg "$PG_BIN/pg_ctl" -D "$PG_BASE/data" -m immediate -w stop >/dev/null 2>&1 ||
            warn "pg_ctl stop failed; make clean-local stops and removes the cluster"
    fi
}

# make clean-local: stops the project-local cluster and removes .local/pg, nothing else.
pg_clean() {
    if [[ ! -e $PG_HOME && ! -L $PG_HOME ]]; then
        say "no project-local PostgreSQL (.local/pg does not exist)"
        return 0
    fi
    pg_resolve_base
    if [[ -f $PG_BASE/data/postmaster.pid ]] && pg_find_bin && pg_local_running; then
        say "stopping the project-local PostgreSQL (pg_ctl -m immediate stop)"
        as_pg "$PG_BIN/pg_ctl" -D "$PG_BASE/data" -m immediate -w stop >/dev/null
    fi
    if [[ -L $PG_HOME ]]; then
        [[ $PG_BASE == /var/tmp/kubesvc-pg-* ]] && rm -rf "$PG_BASE"
        say "removing .local/pg (and its files in $PG_BASE)"
        rm -f "$PG_HOME"
    else
        say "removing .local/pg"
        rm -rf "$PG_HOME"
    fi
    rm -f "$LOCAL_DIR/pg.lock"
}

# make db: the PostgreSQL `make test` would use, kept up until Ctrl-C, for running tests by hand.
pg_serve() {
    if [[ -n ${TEST_DATABASE_URL:-} ]]; then
        say "TEST_DATABASE_URL is set: nothing to start ($(redact_url "$TEST_DATABASE_URL"))"
        return 0
    fi
    pg_choose
    say "TEST_DATABASE_URL=$PG_ADMIN_URL"
    printf 'export TEST_DATABASE_URL=%s\n' "$PG_ADMIN_URL"
    if [[ $PG_STARTED -eq 1 ]]; then
        say "the project-local PostgreSQL stays up until Ctrl-C"
        run_child sleep infinity || true
    fi
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    case "${1:-}" in
    serve) pg_serve ;;
    clean) pg_clean ;;
    *) die "usage: scripts/postgres.sh serve|clean" ;;
    esac
fi
