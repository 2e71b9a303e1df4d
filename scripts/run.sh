#!/usr/bin/env bash
# make run: the server in development mode, with every set-up step it needs (libpq-dev, a
# PostgreSQL server and the database kubesvc_dev, a SECRETS_KEY kept in .local/secrets.key).
# Honours DATABASE_URL, BIND_ADDR and SECRETS_KEY when they are set; see scripts/postgres.sh for
# how the PostgreSQL server is chosen.

set -euo pipefail

# shellcheck source=scripts/postgres.sh
source "$(dirname "${BASH_SOURCE[0]}")/postgres.sh"

DEV_DB=kubesvc_dev

cd "$ROOT"
say "make run: the server in development mode (cargo run -p server -- --dev)"
ensure_libpq_dev

if [[ -n ${DATABASE_URL:-} ]]; then
    say "DATABASE_URL is set: using it as is ($(redact_url "$DATABASE_URL"))"
else
    pg_choose
    if ! have psql; then
        apt_install postgresql-client
    fi
    if [[ $(psql "$PG_ADMIN_URL" -XtAq -c "select 1 from pg_database where datname = '$DEV_DB'") == 1 ]]; then
        say "database $DEV_DB exists on 127.0.0.1:$PG_PORT"
    else
        say "creating the database $DEV_DB on 127.0.0.1:$PG_PORT"
        psql "$PG_ADMIN_URL" -XqAt -v ON_ERROR_STOP=1 -c "create database $DEV_DB" >/dev/null
    fi
    export DATABASE_URL="postgres://$PG_USER@127.0.0.1:$PG_PORT/$DEV_DB"
fi

# The server and a gateway started beside it must share the key that seals OIDC client secrets.
if [[ -n ${SECRETS_KEY:-} ]]; then
    say "SECRETS_KEY is set: using it as is"
else
    key_file="$LOCAL_DIR/secrets.key"
    if [[ ! -s $key_file ]]; then
        say "generating SECRETS_KEY into .local/secrets.key (32 random bytes, base64; kept for later runs)"
        mkdir -p "$LOCAL_DIR"
        (umask 077 && head -c32 /dev/urandom | base64 >"$key_file")
    else
        say "SECRETS_KEY from .local/secrets.key (a gateway beside the server: SECRETS_KEY=\$(cat .local/secrets.key))"
    fi
    SECRETS_KEY=$(tr -d '\n' <"$key_file")
    export SECRETS_KEY
fi

export BIND_ADDR="${BIND_ADDR:-127.0.0.1:8080}"
say "DATABASE_URL=$(redact_url "$DATABASE_URL") BIND_ADDR=$BIND_ADDR"
say "cargo run -p server -- --dev (Ctrl-C stops the server$([[ $PG_STARTED -eq 1 ]] && printf ' and the project-local PostgreSQL'))"
status=0
run_child cargo run -p server -- --dev || status=$?
exit "$status"
