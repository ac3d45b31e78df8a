#!/usr/bin/env bash
# Start a throwaway PostgreSQL cluster on 127.0.0.1 for the store tests.
#
# Run as root. Installs the Debian `postgresql` package when initdb is missing,
# creates a cluster under a temp dir owned by the `postgres` user (initdb
# refuses root), starts it on a free port, creates a database and prints
#
#   export RETINUE_TEST_POSTGRES_DSN=postgresql://postgres@127.0.0.1:PORT/retinue_test
#   export RETINUE_TEST_POSTGRES_DIR=/tmp/...
#
# so a caller can `pg=$(bash scripts/postgres.sh) && eval "$pg"` (a bare `eval "$(...)"`
# succeeds when the script fails). Stop the server with
# `bash scripts/postgres.sh stop "$RETINUE_TEST_POSTGRES_DIR"`.
# Everything except those lines goes to stderr. A run that fails (or is interrupted)
# once the cluster's directory exists stops the server it started, removes the
# directory and exits non-zero, naming the step that failed.
set -euo pipefail

log() { echo "postgres.sh: $*" >&2; }

if [[ "${1:-}" == "stop" ]]; then
    dir="${2:?usage: postgres.sh stop DIR}"
    bin="$(cat "$dir/bindir")"
    runuser -u postgres -- "$bin/pg_ctl" -D "$dir/data" -m immediate stop >&2 || true
    rm -rf "$dir"
    exit 0
fi
if (($#)); then
    # The cluster's directory is always a new temp dir, printed as RETINUE_TEST_POSTGRES_DIR.
    log "usage: postgres.sh | postgres.sh stop DIR (takes no other argument: got '$1')"
    exit 2
fi

find_bindir() {
    local candidate
    for candidate in /usr/lib/postgresql/*/bin; do
        if [[ -x "$candidate/initdb" ]]; then
            echo "$candidate"
        fi
    done | sort -V | tail -n 1
}

bindir="$(find_bindir)"
if [[ -z "$bindir" ]]; then
    if [[ "$(id -u)" != "0" ]]; then
        log "PostgreSQL is not installed and installing it needs root"
        exit 1
    fi
    log "installing the postgresql package"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq postgresql >&2
    bindir="$(find_bindir)"
fi
if [[ -z "$bindir" ]]; then
    log "no initdb found after installing postgresql"
    exit 1
fi

port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
dir="$(mktemp -d /tmp/retinue-pg.XXXXXX)"
step="creating the cluster"
ready=""
signal=""
# The caller's stderr, kept: a step's own output redirection is in force while a trap runs.
exec 3>&2

# A caller that sees the run fail has no directory to stop the server with: a server
# left running here would run until the machine stops.
undo() {
    local status=$?
    [[ -n "$ready" ]] && return
    set +e
    trap - EXIT INT TERM HUP PIPE
    local outcome="no server was running"
    if [[ -f "$dir/data/postmaster.pid" ]]; then
        # Stopped before anything is written: stderr may be the closed pipe that failed.
        if runuser -u postgres -- "$bindir/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1; then
            outcome="stopped the server it started"
        else
            outcome="could not stop the server it started: stop it with: bash $0 stop $dir"
        fi
    fi
    if [[ "$outcome" != could* ]]; then
        rm -rf "$dir"
        outcome="$outcome and removed $dir"
    fi
    log "$step failed (exit status $status): $outcome" 2>&3
    if [[ -n "$signal" ]]; then
        # Dies of the signal, as its caller's shell expects of a Ctrl-C, not a plain exit.
        trap - "$signal"
        kill -s "$signal" $$
    fi
    exit $((status == 0 ? 1 : status))
}
interrupted() {
    signal=$1
    exit "$2"
}
trap undo EXIT
# Each signal exits through the EXIT trap, which stops the server, and is then raised again.
trap 'interrupted INT 130' INT
trap 'interrupted TERM 143' TERM
trap 'interrupted HUP 129' HUP
trap 'interrupted PIPE 141' PIPE

echo "$bindir" >"$dir/bindir"
chown -R postgres:postgres "$dir"
# Without the kept stderr: the server would hold it open after the script ends.
as_postgres() { runuser -u postgres -- "$@" 3>&-; }

as_postgres "$bindir/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --no-locale >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; exit 1; }
step="starting the server"
as_postgres "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=200 -c fsync=on" \
    start >&2 || { cat "$dir/server.log" >&2; exit 1; }
step="creating the database"
as_postgres "$bindir/createdb" -h 127.0.0.1 -p "$port" -U postgres retinue_test >&2

step="printing the environment"
log "server running on 127.0.0.1:$port (data in $dir)"
# One write: the caller gets both lines or, its pipe closed, no server.
printf 'export RETINUE_TEST_POSTGRES_DSN=%s\nexport RETINUE_TEST_POSTGRES_DIR=%s\n' \
    "postgresql://postgres@127.0.0.1:$port/retinue_test" "$dir"
ready=1
