# A throw-away PostgreSQL for the ledger's tests. Sourced, not run; needs
# setup.sh's `step` and `die`.
#
#   postgres_ensure_installed   installs Debian's postgresql when no initdb is found
#   postgres_start_throwaway    a private cluster in a temporary directory, listening only on a
#                               Unix socket in that directory; creates role `horizon` and
#                               database `horizon_test`, exports HORIZON_TEST_POSTGRES_URL and
#                               stops and removes the cluster when the shell exits
#   postgres_stop_throwaway     stops it now (idempotent) and checks that nothing is left
#   postgres_start_replicated_pair
#                               a throw-away primary and a synchronous standby streaming from it
#                               (pg_basebackup -R), each on a private socket of its own; exports
#                               HORIZON_FAILOVER_URL (both hosts, primary first) and the data
#                               directories, and removes both when the shell exits
#   postgres_kill_primary       SIGKILLs the pair's primary and all its processes (a lost host)
#   postgres_promote_standby    pg_ctl promote on the standby; waits until it accepts writes
#   postgres_stop_replicated_pair   stops and removes the pair now (idempotent)
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

# The clusters' owner: this user, or as root (which initdb refuses) postgres, else nobody.
postgres_choose_owner() {
    HORIZON_PG_OWNER=""
    if [ "$(id -u)" -eq 0 ]; then
        if id postgres >/dev/null 2>&1; then HORIZON_PG_OWNER=postgres; else HORIZON_PG_OWNER=nobody; fi
    fi
    export HORIZON_PG_OWNER
}

# Makes DIR enterable by the owner and each SOCKET_DIR below it private to the owner.
postgres_prepare_dir() {
    local dir=$1 sub
    shift
    for sub in "$@"; do
        mkdir -p "$dir/$sub"
        chmod 0700 "$dir/$sub"
    done
    chmod 0711 "$dir"
    if [ -n "$HORIZON_PG_OWNER" ]; then chown -R "$HORIZON_PG_OWNER:" "$dir"; fi
}

# The first port from FIRST up, by STEP, whose socket name no running cluster uses.
postgres_free_port() {
    local port=$1 step=$2
    while [ -e "/run/postgresql/.s.PGSQL.$port" ] || [ -e "/tmp/.s.PGSQL.$port" ]; do port=$((port + step)); done
    echo "$port"
}

postgres_start_throwaway() {
    postgres_ensure_installed
    local bin
    bin=$(postgres_bin_dir)
    postgres_choose_owner
    HORIZON_PG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/horizon-pg.XXXXXX") || die "cannot make a temporary directory"
    export HORIZON_PG_DIR
    trap postgres_stop_throwaway EXIT
    postgres_prepare_dir "$HORIZON_PG_DIR" socket
    local port=${HORIZON_PG_PORT:-}
    [ -n "$port" ] || port=$(postgres_free_port 54320 1)
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

# The pair runs as the throw-away cluster does (same owner rule, sockets only, trust on the
# socket). Its own variables, so it can run beside the throw-away cluster:
#   HORIZON_PG_PAIR_DIR                the temporary directory holding both clusters
#   HORIZON_PG_PRIMARY_DATA, HORIZON_PG_STANDBY_DATA   their data directories
#   HORIZON_PG_PRIMARY_PORT, HORIZON_PG_STANDBY_PORT   the numbers in their sockets' names
#   HORIZON_FAILOVER_URL               postgres://horizon@/horizon_test?host=PRIMARY,STANDBY&port=…
# The primary commits only once the standby has the commit record on disk:
# synchronous_standby_names names the standby, synchronous_commit=on (docs/server.md says why).
# Those settings are given to the primary's postmaster only, not written into its configuration
# files, because pg_basebackup copies them: a promoted standby that named itself as its own
# synchronous standby would wait for ever at every commit.
postgres_start_replicated_pair() {
    postgres_ensure_installed
    local bin
    bin=$(postgres_bin_dir)
    postgres_choose_owner
    HORIZON_PG_PAIR_DIR=$(mktemp -d "${TMPDIR:-/tmp}/horizon-pg-pair.XXXXXX") || die "cannot make a temporary directory"
    export HORIZON_PG_PAIR_DIR
    trap postgres_stop_replicated_pair EXIT
    postgres_prepare_dir "$HORIZON_PG_PAIR_DIR" primary-socket standby-socket
    local port=${HORIZON_PG_PAIR_PORT:-}
    [ -n "$port" ] || port=$(postgres_free_port 54400 2)
    HORIZON_PG_PRIMARY_PORT=$port
    HORIZON_PG_STANDBY_PORT=$((port + 1))
    HORIZON_PG_PRIMARY_DATA=$HORIZON_PG_PAIR_DIR/primary
    HORIZON_PG_STANDBY_DATA=$HORIZON_PG_PAIR_DIR/standby
    export HORIZON_PG_PRIMARY_PORT HORIZON_PG_STANDBY_PORT HORIZON_PG_PRIMARY_DATA HORIZON_PG_STANDBY_DATA
    local primary_socket=$HORIZON_PG_PAIR_DIR/primary-socket standby_socket=$HORIZON_PG_PAIR_DIR/standby-socket
    step "starting a throw-away PostgreSQL primary and synchronous standby in $HORIZON_PG_PAIR_DIR"
    postgres_as_owner "$bin/initdb" -D "$HORIZON_PG_PRIMARY_DATA" -U horizon_admin --auth=trust -E UTF8 \
        --locale=C.UTF-8 >"$HORIZON_PG_PAIR_DIR/initdb.log" 2>&1 ||
        { cat "$HORIZON_PG_PAIR_DIR/initdb.log" >&2; die "initdb failed (log above)"; }
    # initdb's pg_hba.conf trusts replication connections on the socket, which is all the
    # standby uses. wal_level=replica and max_wal_senders are PostgreSQL's defaults.
    postgres_as_owner "$bin/pg_ctl" -D "$HORIZON_PG_PRIMARY_DATA" -l "$HORIZON_PG_PAIR_DIR/primary.log" -w -t 60 \
        -o "-c listen_addresses='' -c unix_socket_directories='$primary_socket' -c port=$HORIZON_PG_PRIMARY_PORT -c max_connections=100 -c synchronous_standby_names='FIRST 1 (horizon_standby)' -c synchronous_commit=on" \
        start >/dev/null ||
        { cat "$HORIZON_PG_PAIR_DIR/primary.log" >&2; die "the primary did not start (log above)"; }
    # Before there is a standby a synchronous commit would wait for ever: these two commit locally
    # (the standby copies them with the base backup).
    PGOPTIONS="-c synchronous_commit=local" "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$primary_socket" \
        -p "$HORIZON_PG_PRIMARY_PORT" -U horizon_admin -d postgres \
        -c "CREATE ROLE horizon LOGIN" -c "CREATE DATABASE horizon_test OWNER horizon" >/dev/null ||
        die "could not create the test role and database on the primary"
    # -R writes standby.signal and primary_conninfo; the standby names itself by cluster_name,
    # which is what synchronous_standby_names matches.
    postgres_as_owner "$bin/pg_basebackup" -D "$HORIZON_PG_STANDBY_DATA" -h "$primary_socket" \
        -p "$HORIZON_PG_PRIMARY_PORT" -U horizon_admin -X stream -R -c fast >"$HORIZON_PG_PAIR_DIR/basebackup.log" 2>&1 ||
        { cat "$HORIZON_PG_PAIR_DIR/basebackup.log" >&2; die "pg_basebackup failed (log above)"; }
    postgres_as_owner "$bin/pg_ctl" -D "$HORIZON_PG_STANDBY_DATA" -l "$HORIZON_PG_PAIR_DIR/standby.log" -w -t 60 \
        -o "-c listen_addresses='' -c unix_socket_directories='$standby_socket' -c port=$HORIZON_PG_STANDBY_PORT -c max_connections=100 -c cluster_name=horizon_standby" \
        start >/dev/null ||
        { cat "$HORIZON_PG_PAIR_DIR/standby.log" >&2; die "the standby did not start (log above)"; }
    local state=""
    for _ in $(seq 1 300); do
        state=$("$bin/psql" -X -At -h "$primary_socket" -p "$HORIZON_PG_PRIMARY_PORT" -U horizon_admin -d postgres \
            -c "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'horizon_standby'" 2>/dev/null || true)
        [ "$state" = sync ] && break
        sleep 0.1
    done
    [ "$state" = sync ] || { tail -n 20 "$HORIZON_PG_PAIR_DIR/standby.log" >&2; die "the standby did not become synchronous within 30 s"; }
    export HORIZON_FAILOVER_URL="postgres://horizon@/horizon_test?host=$primary_socket,$standby_socket&port=$HORIZON_PG_PRIMARY_PORT,$HORIZON_PG_STANDBY_PORT"
    printf 'HORIZON_FAILOVER_URL=%s\n' "$HORIZON_FAILOVER_URL" >&2
}

# The postmaster and every process of the primary at once, as if its machine had died: no
# shutdown checkpoint, no goodbye to clients or to the standby.
postgres_kill_primary() {
    local pid="" pids
    [ -f "$HORIZON_PG_PRIMARY_DATA/postmaster.pid" ] && pid=$(head -n 1 "$HORIZON_PG_PRIMARY_DATA/postmaster.pid")
    [ -n "$pid" ] || die "the primary is not running (no postmaster.pid)"
    pids="$pid $(ps -o pid= --ppid "$pid" | tr -d ' ' | tr '\n' ' ')"
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    ! kill -0 "$pid" 2>/dev/null || die "the primary (pid $pid) survived SIGKILL"
}

postgres_promote_standby() {
    local bin
    bin=$(postgres_bin_dir)
    postgres_as_owner "$bin/pg_ctl" -D "$HORIZON_PG_STANDBY_DATA" -w -t 60 promote >/dev/null ||
        { tail -n 20 "$HORIZON_PG_PAIR_DIR/standby.log" >&2; die "pg_ctl promote failed (log above)"; }
}

postgres_stop_replicated_pair() {
    [ -n "${HORIZON_PG_PAIR_DIR:-}" ] && [ -d "$HORIZON_PG_PAIR_DIR" ] || return 0
    local bin data pid left=""
    bin=$(postgres_bin_dir)
    for data in "$HORIZON_PG_STANDBY_DATA" "$HORIZON_PG_PRIMARY_DATA"; do
        pid=""
        [ -f "$data/postmaster.pid" ] && pid=$(head -n 1 "$data/postmaster.pid")
        [ -n "$pid" ] || continue
        kill -0 "$pid" 2>/dev/null || continue
        postgres_as_owner "$bin/pg_ctl" -D "$data" -m immediate -w -t 30 stop >/dev/null 2>&1 ||
            kill -KILL "$pid" 2>/dev/null || true
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$pid" 2>/dev/null; then
            printf 'warning: PostgreSQL (pid %s) is still running\n' "$pid" >&2
            left=1
        fi
    done
    if [ -n "$left" ]; then
        printf 'warning: left %s in place\n' "$HORIZON_PG_PAIR_DIR" >&2
        return 1
    fi
    rm -rf "$HORIZON_PG_PAIR_DIR"
    unset HORIZON_PG_PAIR_DIR HORIZON_FAILOVER_URL
}
