#!/usr/bin/env bash
# The Debian packages as an administrator meets them, run inside the throw-away VM by
# bluez-checks.sh: `dpkg -i` of the three packages into the VM's writable root, then the
# installed /usr/bin/horizon-terminal serving on $BLUEZ_VM_ADAPTER_A (hci0) as the packaged
# service user `horizon` (group bluetooth, as the unit runs it), the register paying through its
# control socket, and the installed /usr/bin/horizon-wallet paying from $BLUEZ_VM_ADAPTER_B
# (hci1). Defines functions; bluez-checks.sh runs them after the build tree's checks.

installed=$(mktemp -d /tmp/horizon-installed.XXXXXX)
installed_data=/var/lib/horizon-terminal
installed_control=/run/horizon-terminal/control.sock
installed_serve_pid=""

# Installs every .deb in DIR. Two things of the VM (not of the packages) are set right first:
# virtme-ng binds a stand-in file over /etc/shadow, and useradd replaces the file by a rename,
# which a mount point refuses (EBUSY); unmounted, the overlay's own writable copy is there. And
# man-db's trigger would rebuild the whole manual index over the VM's 9p root (many minutes).
install_packages() {
    local dir=$1 f
    for f in /etc/shadow /etc/gshadow; do
        if mountpoint -q "$f"; then umount "$f" || return 1; fi
    done
    rm -f /var/lib/man-db/auto-update
    DEBIAN_FRONTEND=noninteractive timeout 300 dpkg -i "$dir"/horizon-*.deb >"$installed/dpkg.log" 2>&1 || {
        echo "      dpkg -i failed:"
        sed 's/^/      /' "$installed/dpkg.log" | tail -30
        return 1
    }
    # The running system bus reads the package's policy for org.horizon.Terminal now.
    dbus-send --system --type=method_call --dest=org.freedesktop.DBus / org.freedesktop.DBus.ReloadConfig ||
        return 1
}

# What the packages installed is there and in its place: the three programs from /usr/bin at the
# build's version, the service user and its private state directory, the unit (not enabled), the
# bus policy, the udev rule and the man pages.
check_packages_installed() {
    local version problems=()
    version=$(/usr/bin/horizon-terminal --version 2>&1)
    for p in horizon-server horizon-terminal horizon-wallet; do
        dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q "install ok installed" ||
            problems+=("$p is not installed")
        [ "$(/usr/bin/$p --version 2>&1)" = "$version" ] || problems+=("$p --version differs from $version")
        [ -f "/usr/share/man/man1/$p.1.gz" ] || problems+=("no man page for $p")
    done
    id -u horizon >/dev/null 2>&1 || problems+=("no user horizon")
    [ "$(stat -c '%U %a' "$installed_data" 2>/dev/null)" = "horizon 700" ] ||
        problems+=("$installed_data is not horizon's and private: $(stat -c '%U %a' "$installed_data" 2>&1)")
    [ -f /usr/lib/systemd/system/horizon-terminal.service ] || problems+=("no horizon-terminal.service")
    [ ! -e /etc/systemd/system/multi-user.target.wants/horizon-terminal.service ] ||
        problems+=("horizon-terminal.service was enabled without being asked")
    [ -f /usr/share/dbus-1/system.d/org.horizon.Terminal.conf ] || problems+=("no bus policy")
    ls /usr/lib/udev/rules.d/*horizon* >/dev/null 2>&1 || problems+=("no udev rule")
    [ ${#problems[@]} -eq 0 ] || {
        printf '      %s\n' "${problems[@]}"
        return 1
    }
    echo "      installed $version"
}

# As the unit runs it: user horizon, group horizon, supplementary group bluetooth. setpriv execs
# the program itself, so a background start's $! is the program's PID (signals reach it).
as_service_user=(setpriv --reuid=horizon --regid=horizon --groups=horizon,bluetooth --)

# The installed terminal, as the service user, serves on hci0 (its data directory made the way
# terminal.env says); the register asks it for 7.25 over the control socket; the installed
# wallet on hci1 pays with a tip; the register gets the paid line; SIGTERM stops serve with 0.
check_installed_serve_pays() {
    [ "${KEEP_RADIOS:-}" = 1 ] || reset_radios
    "${as_service_user[@]}" /usr/bin/horizon-terminal init --data-dir "$installed_data" --merchant-name "Installed Café" \
        --decision-timeout 30 >"$installed/init" 2>&1 || {
        sed 's/^/      /' "$installed/init"
        return 1
    }
    install -d -o horizon -g horizon -m 0750 "$(dirname "$installed_control")"
    "${as_service_user[@]}" /usr/bin/horizon-terminal serve --data-dir "$installed_data" --radio bluez \
        --adapter "$terminal_adapter" --control-socket "$installed_control" --verbose \
        >"$installed/serve.out" 2>"$installed/serve" &
    installed_serve_pid=$!
    local waited=0
    until [ -S "$installed_control" ]; do
        sleep 0.1
        waited=$((waited + 1))
        if [ "$waited" -ge 200 ] || ! kill -0 "$installed_serve_pid" 2>/dev/null; then
            echo "      serve never opened $installed_control"
            show_installed
            return 1
        fi
    done
    /usr/bin/horizon-wallet init --trust "$installed_data/anchor.pub" --data-dir "$installed/wallet-data" \
        >"$installed/wallet-init" 2>&1 || {
        sed 's/^/      /' "$installed/wallet-init"
        return 1
    }
    /usr/bin/horizon-terminal pay 7.25 --control-socket "$installed_control" --json \
        >"$installed/register.json" 2>"$installed/register" &
    local register_pid=$!
    timeout -k 5 90 /usr/bin/horizon-wallet pay --tip 0.75 --yes --json --timeout 60 --radio bluez \
        --adapter "$wallet_adapter" --data-dir "$installed/wallet-data" >"$installed/wallet.json" 2>"$installed/wallet" || {
        show_installed
        return 1
    }
    wait_pid "$register_pid" 60 && grep -q '"formatted" : "8.00 EUR"' "$installed/register.json" || {
        show_installed
        return 1
    }
    kill -TERM "$installed_serve_pid"
    local status=0
    wait_pid "$installed_serve_pid" 30 || status=$?
    installed_serve_pid=""
    [ "$status" -eq 0 ] && [ ! -e "$installed_control" ] || {
        echo "      serve exited with $status on SIGTERM (control socket left: $([ -e "$installed_control" ] && echo yes || echo no))"
        show_installed
        return 1
    }
    echo "      paid 8.00 EUR to /usr/bin/horizon-terminal serve as user horizon; SIGTERM exit 0"
}

show_installed() {
    local file
    for file in "$installed"/*; do
        [ -f "$file" ] || continue
        echo "      --- $file"
        sed 's/^/      /' "$file" | tail -40
    done
}

installed_stop() {
    if [ -n "$installed_serve_pid" ]; then
        kill -KILL "$installed_serve_pid" 2>/dev/null
        wait "$installed_serve_pid" 2>/dev/null
    fi
}
