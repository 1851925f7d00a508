#!/bin/bash
# Guest side of Tools/bluez-vm/run-in-vm.sh. Runs INSIDE the throw-away VM
# (as root, started by virtme-ng's init), never on the host.
#
#   guest-setup.sh [OPTIONS] --check
#   guest-setup.sh [OPTIONS] -- COMMAND [ARGS...]
#
# 1. loads the kernel's Bluetooth modules (hci_vhci gives /dev/vhci),
# 2. starts the system bus (dbus-daemon --system),
# 3. starts bluetoothd with this folder's main.conf ([GATT] Channels=1) and -E,
# 4. starts ONE `btvirt -L -l2` (two LE controllers linked to each other: they
#    only see each other when they live in the same btvirt process),
# 5. waits until `btmgmt info` lists both controllers powered AND bluetoothd
#    exports both as powered org.bluez.Adapter1 objects; a controller that
#    never appears (the kernel's 2 s HCI_Reset timeout on a fresh vhci
#    controller is often missed under software emulation: dmesg shows
#    "Opcode 0x0c03 failed: -110") makes it kill btvirt and start it again,
# 6. runs COMMAND (with --check: prints `btmgmt info` and `bluetoothctl list`)
#    and exits with its exit code.
#
# Options:
#   --attempts N            btvirt starts before giving up (default 5)
#   --controller-timeout S  seconds to wait for both controllers per attempt (default 30)
#   --verbose               bluetoothd with -d (debug log); print logs at the end
#   --host-start EPOCH      host's `date +%s.%N` when the VM was launched (for timings)
#
# Exit codes: COMMAND's own; 125 if BlueZ could not be brought up (infrastructure).
#
# Environment given to COMMAND:
#   BLUEZ_VM=1
#   BLUEZ_VM_ADAPTERS="hci0 hci1"   the two controllers, in index order
#   BLUEZ_VM_ADAPTER_A=hci0         (first, e.g. the terminal's)
#   BLUEZ_VM_ADAPTER_B=hci1         (second, e.g. the wallet's)
#   BLUEZ_VM_LOGDIR=/run/bluez-vm   bluetoothd / btvirt / dbus logs (VM-local tmpfs)
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOGDIR=/run/bluez-vm
ATTEMPTS=5
CONTROLLER_TIMEOUT=30
VERBOSE=0
CHECK=0
HOST_START=""
export PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:${PATH:-}"

while [ $# -gt 0 ]; do
    case "$1" in
        --attempts) ATTEMPTS=$2; shift 2 ;;
        --controller-timeout) CONTROLLER_TIMEOUT=$2; shift 2 ;;
        --verbose) VERBOSE=1; shift ;;
        --host-start) HOST_START=$2; shift 2 ;;
        --check) CHECK=1; shift ;;
        --) shift; break ;;
        *) echo "guest-setup.sh: unknown option $1" >&2; exit 125 ;;
    esac
done
if [ "$CHECK" = 0 ] && [ $# -eq 0 ]; then
    echo "guest-setup.sh: need --check or -- COMMAND [ARGS...]" >&2
    exit 125
fi

uptime_s() { cut -d' ' -f1 /proc/uptime; }
log() { echo "[bluez-vm $(uptime_s)s] $*" >&2; }
BOOT_UPTIME=$(uptime_s)
mkdir -p "$LOGDIR"

# btmgmt (and sometimes bluetoothctl) print nothing when their stdin is at
# EOF: they quit before the reply arrives. A FIFO opened read-write is a
# stdin that never reaches EOF and needs no writer process.
mkfifo "$LOGDIR/stdin.fifo"
exec 9<>"$LOGDIR/stdin.fifo"
btmgmt_q() { timeout 15 btmgmt "$@" <&9 2>&1; }
btctl_q() { timeout 15 bluetoothctl "$@" <&9 2>&1; }

BTVIRT_PID=""
BLUETOOTHD_PID=""
dump_logs() {
    log "---- dmesg (bluetooth) ----"
    dmesg | grep -iE 'bluetooth|hci|vhci' | tail -40 >&2
    log "---- bluetoothd log ----"
    tail -60 "$LOGDIR/bluetoothd.log" >&2 2>/dev/null
    log "---- btvirt logs ----"
    tail -n 20 "$LOGDIR"/btvirt.*.log >&2 2>/dev/null
}
fail() {
    log "FAILED: $*"
    dump_logs
    exit 125
}

# ---- 1. kernel modules --------------------------------------------------------
modprobe bluetooth 2>/dev/null
modprobe hci_vhci || fail "modprobe hci_vhci failed (is linux-image-amd64's module tree in /lib/modules?)"
for _ in $(seq 50); do [ -c /dev/vhci ] && break; sleep 0.1; done
[ -c /dev/vhci ] || fail "/dev/vhci did not appear"
# Modules that would otherwise be requested while the first controller is
# being initialised (SMP's cmac and ecdh, bluetoothd's AF_ALG sockets):
# loading them from the 9p root under emulation takes seconds, enough to
# make the kernel miss its 2 s HCI_Reset timeout. Load them now.
modprobe -a cmac ecdh_generic af_alg algif_hash algif_skcipher 2>/dev/null || true

# ---- 2. system bus ----------------------------------------------------------------
mkdir -p /run/dbus
rm -f /run/dbus/pid /run/dbus/system_bus_socket
dbus-daemon --system --fork --print-pid >"$LOGDIR/dbus.pid" 2>"$LOGDIR/dbus.log" \
    || fail "dbus-daemon --system did not start: $(cat "$LOGDIR/dbus.log")"
for _ in $(seq 100); do [ -S /run/dbus/system_bus_socket ] && break; sleep 0.1; done
[ -S /run/dbus/system_bus_socket ] || fail "no /run/dbus/system_bus_socket"

bus_has_bluez() {
    dbus-send --system --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
        org.freedesktop.DBus.NameHasOwner string:org.bluez 2>/dev/null | grep -q 'boolean true'
}

# ---- 3. bluetoothd ------------------------------------------------------------------
BLUETOOTHD=/usr/libexec/bluetooth/bluetoothd
[ -x "$BLUETOOTHD" ] || BLUETOOTHD=$(command -v bluetoothd) || fail "bluetoothd not installed (Debian package bluez)"
start_bluetoothd() {
    local debug=()
    [ "$VERBOSE" = 1 ] && debug=(-d)
    "$BLUETOOTHD" -n -E "${debug[@]}" -f "$HERE/main.conf" >>"$LOGDIR/bluetoothd.log" 2>&1 &
    BLUETOOTHD_PID=$!
    for _ in $(seq 300); do
        bus_has_bluez && return 0
        kill -0 "$BLUETOOTHD_PID" 2>/dev/null || break
        sleep 0.1
    done
    return 1
}
start_bluetoothd || fail "bluetoothd did not take org.bluez on the system bus"
log "dbus-daemon and bluetoothd (pid $BLUETOOTHD_PID) up"

# ---- 4./5. btvirt and waiting for both controllers -------------------------------------
BTVIRT_HOST=$(command -v btvirt) || fail "btvirt not installed (Debian package bluez-test-tools)"
# Run btvirt from tmpfs: its pages then never fault in over 9p, which under
# emulation can delay its answer to the kernel's first HCI_Reset past 2 s.
BTVIRT=$LOGDIR/btvirt
cp "$BTVIRT_HOST" "$BTVIRT" || BTVIRT=$BTVIRT_HOST

# From `btmgmt info` output on stdin: names of the controllers it lists with
# "powered" in their current settings / names of all controllers it lists.
powered_in() {
    awk '/^hci[0-9]+:/ { name = $1; sub(":", "", name) }
         /^[ \t]+current settings:/ { if (name != "" && $0 ~ / powered( |$)/) print name; name = "" }' | sort -V | xargs
}
listed_in() {
    awk '/^hci[0-9]+:/ { n = $1; sub(":", "", n); print n }' | sort -V | xargs
}
dbus_powered() { # $1 = hciN
    dbus-send --system --print-reply --dest=org.bluez "/org/bluez/$1" \
        org.freedesktop.DBus.Properties.Get string:org.bluez.Adapter1 string:Powered 2>/dev/null \
        | grep -q 'boolean true'
}
stop_btvirt() {
    [ -n "$BTVIRT_PID" ] || return 0
    kill "$BTVIRT_PID" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$BTVIRT_PID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$BTVIRT_PID" 2>/dev/null
    wait "$BTVIRT_PID" 2>/dev/null
    BTVIRT_PID=""
    # Closing /dev/vhci unregisters the controllers; wait until they are gone
    # so the next attempt gets fresh indexes (hci0/hci1 again).
    for _ in $(seq 100); do
        [ -z "$(ls /sys/class/bluetooth 2>/dev/null)" ] && break
        sleep 0.2
    done
}

# Controllers the kernel has registered (sysfs), without forking anything.
kernel_controllers() {
    local d names=""
    for d in /sys/class/bluetooth/hci*; do [ -e "$d" ] && names="$names ${d##*/}"; done
    echo "${names# }"
}

ADAPTERS=""
attempt=0
BTVIRT_STARTS=0
while [ "$attempt" -lt "$ATTEMPTS" ]; do
    attempt=$((attempt + 1))
    BTVIRT_STARTS=$attempt
    t_start=$(date +%s)
    dmesg_base=$(dmesg | wc -l)
    # Only one btvirt: both controllers must be in the same process to see each other.
    "$BTVIRT" -L -l2 >"$LOGDIR/btvirt.$attempt.log" 2>&1 &
    BTVIRT_PID=$!
    log "attempt $attempt/$ATTEMPTS: btvirt -L -l2 started (pid $BTVIRT_PID)"
    # Leave the CPU to btvirt while the kernel initialises the controllers:
    # every command forked now (btmgmt above all) slows the emulated machine
    # and makes the 2 s HCI_Reset timeout likelier to be missed.
    sleep 3
    kicked=0
    why="not both powered after ${CONTROLLER_TIMEOUT}s"
    while [ $(($(date +%s) - t_start)) -lt "$CONTROLLER_TIMEOUT" ]; do
        if ! kill -0 "$BTVIRT_PID" 2>/dev/null; then
            why="btvirt exited: $(tail -3 "$LOGDIR/btvirt.$attempt.log" | tr '\n' ' ')"
            break
        fi
        # A controller whose initialisation timed out ("hciN: Opcode 0x0c03
        # failed: -110", HCI_Reset) never reaches the mgmt index list: give up
        # on this btvirt at once instead of waiting for the timeout.
        failed=$(dmesg | tail -n +"$((dmesg_base + 1))" | grep -E 'hci[0-9]+: .*failed: -110' | head -1)
        if [ -n "$failed" ]; then
            why="kernel: ${failed#*] }"
            break
        fi
        kc=$(kernel_controllers)
        if [ "$(echo "$kc" | wc -w)" -ge 2 ]; then
            # Cheap check first (bluetoothd's view over D-Bus), then btmgmt.
            ok=1
            for h in $kc; do dbus_powered "$h" || { ok=0; break; }; done
            if [ "$ok" = 1 ]; then
                info=$(btmgmt_q info)
                powered=$(echo "$info" | powered_in)
                if [ "$(echo "$powered" | wc -w)" -ge 2 ]; then
                    ADAPTERS=$powered
                    break 2
                fi
            elif [ "$kicked" = 0 ] && [ $(($(date +%s) - t_start)) -ge 12 ]; then
                # Listed but still not powered (AutoEnable raced something):
                # power them by hand once.
                info=$(btmgmt_q info)
                powered=$(echo "$info" | powered_in)
                for h in $(echo "$info" | listed_in); do
                    case " $powered " in *" $h "*) ;; *)
                        log "$h listed but not powered; btmgmt power on"
                        btmgmt_q --index "${h#hci}" power on >/dev/null ;;
                    esac
                done
                kicked=1
            fi
        fi
        sleep 1
    done
    info=$(btmgmt_q info)
    log "attempt $attempt failed after $(($(date +%s) - t_start))s: $why; kernel has [$(kernel_controllers)], btmgmt lists [$(echo "$info" | listed_in)], powered [$(echo "$info" | powered_in)]"
    stop_btvirt
    # If bluetoothd died meanwhile, bring it back too.
    if ! kill -0 "$BLUETOOTHD_PID" 2>/dev/null; then
        log "bluetoothd died; restarting it"
        start_bluetoothd || fail "bluetoothd did not come back"
    fi
done
[ -n "$ADAPTERS" ] || fail "both virtual controllers never came up in $ATTEMPTS btvirt starts"

READY_UPTIME=$(uptime_s)
set_adapters() { BLUEZ_VM_ADAPTER_A=$1; BLUEZ_VM_ADAPTER_B=$2; }
# shellcheck disable=SC2086 # split "hci0 hci1" into two words on purpose
set_adapters $ADAPTERS
export BLUEZ_VM=1 BLUEZ_VM_ADAPTERS="$ADAPTERS" BLUEZ_VM_ADAPTER_A BLUEZ_VM_ADAPTER_B BLUEZ_VM_LOGDIR="$LOGDIR"
host_part=""
if [ -n "$HOST_START" ]; then
    # The guest clock comes from the host's RTC, so wall-clock differences are comparable.
    host_part=$(awk -v a="$HOST_START" -v b="$(date +%s.%N)" 'BEGIN { printf ", %.1f s since the host launched the VM", b - a }')
fi
log "BlueZ ready: controllers $ADAPTERS powered after $BTVIRT_STARTS btvirt start(s); guest uptime: setup began at ${BOOT_UPTIME}s, ready at ${READY_UPTIME}s$host_part"

# ---- 6. the command -----------------------------------------------------------------
if [ "$CHECK" = 1 ]; then
    echo "== btmgmt info"
    btmgmt_q info
    echo "== bluetoothctl list"
    btctl_q list
    echo "== bluetoothd adapters (D-Bus)"
    for h in $ADAPTERS; do
        printf '/org/bluez/%s Powered=%s\n' "$h" "$(dbus_powered "$h" && echo true || echo false)"
    done
    rc=0
else
    exec 9<&- # COMMAND gets the VM's own stdin, not the FIFO
    "$@"
    rc=$?
fi
log "command exited with $rc (guest uptime $(uptime_s)s)"
[ "$VERBOSE" = 1 ] && dump_logs
stop_btvirt
kill "$BLUETOOTHD_PID" 2>/dev/null
exit "$rc"
