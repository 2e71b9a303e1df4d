# shellcheck shell=bash
# Shared helpers for scripts/*.sh: step logging, privileged package installs, and running one
# long-lived child so that INT/TERM reach it and the EXIT trap (which stops a project-local
# PostgreSQL) still runs afterwards. Sourced, never run.
# shellcheck disable=SC2034 # LOCAL_DIR and INTERRUPTED are read by the scripts sourcing this one

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOCAL_DIR="$ROOT/.local"

say() { printf '==> %s\n' "$*" >&2; }
warn() { printf '==> warning: %s\n' "$*" >&2; }
die() {
    printf '==> error: %s\n' "$*" >&2
    exit 1
}
have() { command -v "$1" >/dev/null 2>&1; }

# A URL as it may be printed: any password replaced by ***.
redact_url() { printf '%s' "$1" | sed -E 's#(://[^/:@]*):[^/@]*@#\1:***@#'; }

# Runs a command as root: directly when we are root, else through sudo when it exists.
as_root() {
    if [[ $EUID -eq 0 ]]; then
        "$@"
    elif have sudo; then
        sudo "$@"
    else
        die "'$*' needs root and sudo is missing; run it as root, then run make again"
    fi
}

pkg_installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

APT_UPDATED=0
# Installs the named Debian packages with apt-get (one apt-get update per script run).
apt_install() {
    have apt-get || die "missing $*; this is not a Debian-like system: install them yourself"
    if [[ $APT_UPDATED -eq 0 ]]; then
        say "apt-get update (once, to install $*)"
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
        APT_UPDATED=1
    fi
    say "apt-get install -y $*"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" \
        >/dev/null
}

# Debian's Patroni and etcd, for the automatic failover test; installed only when missing.
# On a machine with systemd the etcd-server package starts an etcd of its own on 2379/2380:
# the test uses other ports.
ensure_patroni() {
    if { have patroni || [[ -x /usr/bin/patroni ]]; } && { have etcd || [[ -x /usr/bin/etcd ]]; }; then
        return 0
    fi
    say "Patroni or etcd is missing (the automatic failover test runs both)"
    apt_install patroni etcd-server
}

# diesel's PostgreSQL backend links libpq, so every build needs its development files.
ensure_libpq_dev() {
    if have dpkg-query; then
        if pkg_installed libpq-dev; then
            say "libpq-dev is installed (diesel links libpq)"
        else
            apt_install libpq-dev
        fi
    elif have pg_config || { have pkg-config && pkg-config --exists libpq; }; then
        say "libpq found (diesel links libpq)"
    else
        warn "no dpkg and no pg_config: make sure libpq (the PostgreSQL client library) is installed"
    fi
}

CHILD_PID=""
INTERRUPTED=0
forward_term() {
    INTERRUPTED=1
    if [[ -n $CHILD_PID ]]; then
        # A background child of a non-interactive shell ignores SIGINT, so it always gets TERM.
        kill -TERM "$CHILD_PID" 2>/dev/null || true
    fi
}

# Runs "$@" as a background child and waits for it, so that INT/TERM sent to this script are
# handled at once (forwarded as TERM) instead of after the child ends; returns the child's status.
run_child() {
    "$@" &
    CHILD_PID=$!
    trap forward_term INT TERM
    local status=0
    while :; do
        wait "$CHILD_PID" && status=0 || status=$?
        # A trapped signal interrupts wait (status > 128) while the child may still be running.
        kill -0 "$CHILD_PID" 2>/dev/null || break
    done
    CHILD_PID=""
    trap 'exit 130' INT
    trap 'exit 143' TERM
    return "$status"
}

# Outside run_child, INT/TERM end the script through exit, so the EXIT trap still runs.
trap 'exit 130' INT
trap 'exit 143' TERM
