# A throw-away PostgreSQL for the ledger's tests. Sourced, not run; needs
# setup.sh's `step` and `die`.
#
#   postgres_ensure_installed   installs Debian's postgresql when no initdb is found
#   postgres_start_throwaway    a private cluster in a temporary directory, listening only on a
#                               Unix socket in that directory; creates role `horizon` and
#                               database `horizon_test`, exports HORIZON_TEST_POSTGRES_URL and
#                               stops and removes the cluster when the shell exits
#   postgres_stop_throwaway     stops it now (idempotent) and checks that nothing is left
#
# PostgreSQL refuses to run as root, so when the script runs as root the cluster runs as the
# `postgres` user the package creates (or `nobody`); the socket directory is 0700 and owned by
# that user, so only it and root can connect: no TCP port is opened at all. HORIZON_PG_PORT
# chooses the number in the socket's name (default: a free-looking one from 54320 up).

postgres_bin_dir() {
    local initdb
    initdb=$(ls /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n 1 || true)
    [ -n "$initdb" ] || return 1
    dirname "$initdb"
}

postgres_ensure_installed() {
    postgres_bin_dir >/dev/null && return 0
    command -v apt-get >/dev/null 2>&1 || die "PostgreSQL is not installed and there is no apt-get; install postgresql by hand"
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || die "PostgreSQL is not installed; run as root or install sudo"
        sudo=(sudo)
    fi
    step "installing PostgreSQL (Debian's postgresql package)"
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -qq || die "apt-get update failed; check the network or the apt sources"
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends postgresql >/dev/null ||
        die "apt-get could not install postgresql"
    postgres_bin_dir >/dev/null || die "postgresql was installed but no initdb was found under /usr/lib/postgresql"
}

# Runs a PostgreSQL program as the cluster's user (this user, unless we are root).
postgres_as_owner() {
    if [ -n "${HORIZON_PG_OWNER:-}" ]; then
        runuser -u "$HORIZON_PG_OWNER" -- "$@"
    else
        "$@"
    fi
}

postgres_start_throwaway() {
    postgres_ensure_installed
    local bin
    bin=$(postgres_bin_dir)
    HORIZON_PG_OWNER=""
    if [ "$(id -u)" -eq 0 ]; then
        if id postgres >/dev/null 2>&1; then HORIZON_PG_OWNER=postgres; else HORIZON_PG_OWNER=nobody; fi
    fi
    HORIZON_PG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/horizon-pg.XXXXXX") || die "cannot make a temporary directory"
    export HORIZON_PG_DIR HORIZON_PG_OWNER
    trap postgres_stop_throwaway EXIT
    mkdir -p "$HORIZON_PG_DIR/socket"
    chmod 0700 "$HORIZON_PG_DIR/socket"
    # The parent must be enterable by the owner; the socket directory stays private.
    chmod 0711 "$HORIZON_PG_DIR"
    if [ -n "$HORIZON_PG_OWNER" ]; then chown -R "$HORIZON_PG_OWNER:" "$HORIZON_PG_DIR"; fi
    local port=${HORIZON_PG_PORT:-}
    if [ -z "$port" ]; then
        port=54320
        while [ -e "/run/postgresql/.s.PGSQL.$port" ] || [ -e "/tmp/.s.PGSQL.$port" ]; do port=$((port + 1)); done
    fi
    HORIZON_PG_PORT=$port
    export HORIZON_PG_PORT
    step "starting a throw-away PostgreSQL ($("$bin/postgres" --version | awk '{print $3}')) in $HORIZON_PG_DIR"
    postgres_as_owner "$bin/initdb" -D "$HORIZON_PG_DIR/data" -U horizon_admin --auth=trust -E UTF8 \
        --locale=C.UTF-8 >"$HORIZON_PG_DIR/initdb.log" 2>&1 ||
        { cat "$HORIZON_PG_DIR/initdb.log" >&2; die "initdb failed (log above)"; }
    # Only the private socket: listen_addresses='' opens no TCP port. max_connections leaves room
    # for the tests' pools (each test's ledger has up to 4 connections, tests run in parallel).
    postgres_as_owner "$bin/pg_ctl" -D "$HORIZON_PG_DIR/data" -l "$HORIZON_PG_DIR/server.log" -w -t 60 \
        -o "-c listen_addresses='' -c unix_socket_directories='$HORIZON_PG_DIR/socket' -c port=$port -c max_connections=200" \
        start >/dev/null ||
        { cat "$HORIZON_PG_DIR/server.log" >&2; die "PostgreSQL did not start (log above)"; }
    "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$HORIZON_PG_DIR/socket" -p "$port" -U horizon_admin -d postgres \
        -c "CREATE ROLE horizon LOGIN" -c "CREATE DATABASE horizon_test OWNER horizon" >/dev/null ||
        die "could not create the test role and database"
    export HORIZON_TEST_POSTGRES_URL="postgres://horizon@/horizon_test?host=$HORIZON_PG_DIR/socket&port=$port"
    printf 'HORIZON_TEST_POSTGRES_URL=%s\n' "$HORIZON_TEST_POSTGRES_URL" >&2
}

postgres_stop_throwaway() {
    [ -n "${HORIZON_PG_DIR:-}" ] && [ -d "$HORIZON_PG_DIR" ] || return 0
    local bin pid=""
    bin=$(postgres_bin_dir)
    [ -f "$HORIZON_PG_DIR/data/postmaster.pid" ] && pid=$(head -n 1 "$HORIZON_PG_DIR/data/postmaster.pid")
    if [ -n "$pid" ]; then
        postgres_as_owner "$bin/pg_ctl" -D "$HORIZON_PG_DIR/data" -m fast -w -t 30 stop >/dev/null 2>&1 ||
            kill -KILL "$pid" 2>/dev/null || true
        # The postmaster ends its children before it exits; wait for it, briefly.
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$pid" 2>/dev/null; then
            printf 'warning: PostgreSQL (pid %s) is still running; left %s in place\n' "$pid" "$HORIZON_PG_DIR" >&2
            return 1
        fi
    fi
    rm -rf "$HORIZON_PG_DIR"
    unset HORIZON_PG_DIR HORIZON_TEST_POSTGRES_URL
}
