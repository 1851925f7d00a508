#!/bin/bash
# Run a command next to a real bluetoothd and two linked virtual LE
# controllers, without Bluetooth hardware, inside a throw-away QEMU VM of this
# machine's own root filesystem (read-only; every writable path is a tmpfs
# overlay inside the VM, so the VM never writes to the host's root).
#
#   Tools/bluez-vm/run-in-vm.sh [OPTIONS] -- COMMAND [ARGS...]
#   Tools/bluez-vm/run-in-vm.sh [OPTIONS] --check
#
# COMMAND is a path on the host (absolute, or relative to the current
# directory, which is also the VM's working directory), e.g.
# .build/debug/horizon-terminal. It runs as root in the VM once both
# controllers are powered in bluetoothd; its stdout/stderr are printed and
# this script exits with its exit code. Its stdin is empty (/dev/null).
# In the VM it finds BLUEZ_VM=1, BLUEZ_VM_ADAPTERS="hci0 hci1",
# BLUEZ_VM_ADAPTER_A=hci0, BLUEZ_VM_ADAPTER_B=hci1 (see guest-setup.sh).
#
# --check boots, brings BlueZ up and prints `btmgmt info` and
# `bluetoothctl list`.
#
# Options (environment variable in brackets):
#   --memory SIZE           guest memory (default 2G)            [BLUEZ_VM_MEMORY]
#   --cpus N                guest vCPUs (default 2)              [BLUEZ_VM_CPUS]
#   --timeout SECONDS       wall-clock limit for one VM (default 600) [BLUEZ_VM_TIMEOUT]
#   --kernel PATH           kernel image (default: newest /boot/vmlinuz-* whose
#                           /lib/modules tree has hci_vhci)     [BLUEZ_VM_KERNEL]
#   --attempts N            btvirt starts inside the VM (default 5)
#   --controller-timeout S  seconds per btvirt start (default 30)
#   --vm-attempts N         boots when BlueZ could not be brought up before
#                           COMMAND ran (default 2)              [BLUEZ_VM_BOOTS]
#   --rwdir DIR             make host DIR writable from the VM (opt-in; the only
#                           host path the VM may write to), repeatable
#   --verbose               boot console, bluetoothd -d, logs at the end
#   --no-install            do not apt-get/pip install missing tools
#   --kvm                   try KVM (broken on this machine kind: qemu asserts
#                           on MSR 0x10a); default is TCG software emulation
#
# Exit codes: COMMAND's; 125 BlueZ never came up; 124 the VM hit --timeout;
# 2 usage; 3 tools missing and not installable; 255 the VM died unexpectedly.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PROG=run-in-vm.sh
VIRTME_NG_VERSION=1.42 # the version this was measured with
CACHE_DIR=${BLUEZ_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/horizon-bluez-vm}

MEMORY=${BLUEZ_VM_MEMORY:-2G}
CPUS=${BLUEZ_VM_CPUS:-2}
TIMEOUT=${BLUEZ_VM_TIMEOUT:-600}
KERNEL=${BLUEZ_VM_KERNEL:-}
VM_ATTEMPTS=${BLUEZ_VM_BOOTS:-2}
ATTEMPTS=5
CONTROLLER_TIMEOUT=30
VERBOSE=0
INSTALL=1
KVM=0
CHECK=0
RWDIRS=()

say() { echo "[$PROG] $*" >&2; }
die() { local rc=$1; shift; say "error: $*"; exit "$rc"; }
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

while [ $# -gt 0 ]; do
    case "$1" in
        --check) CHECK=1; shift ;;
        --memory) MEMORY=$2; shift 2 ;;
        --cpus) CPUS=$2; shift 2 ;;
        --timeout) TIMEOUT=$2; shift 2 ;;
        --kernel) KERNEL=$2; shift 2 ;;
        --attempts) ATTEMPTS=$2; shift 2 ;;
        --controller-timeout) CONTROLLER_TIMEOUT=$2; shift 2 ;;
        --vm-attempts) VM_ATTEMPTS=$2; shift 2 ;;
        --rwdir) RWDIRS+=("$2"); shift 2 ;;
        --verbose) VERBOSE=1; shift ;;
        --no-install) INSTALL=0; shift ;;
        --kvm) KVM=1; shift ;;
        -h|--help) usage ;;
        --) shift; break ;;
        *) say "unknown option: $1"; usage ;;
    esac
done
if [ "$CHECK" = 1 ] && [ $# -gt 0 ]; then say "--check takes no command"; usage; fi
if [ "$CHECK" = 0 ] && [ $# -eq 0 ]; then usage; fi

# ---- tools ------------------------------------------------------------------

# Newest installed kernel image whose module tree has hci_vhci (the host's own
# running kernel may be a custom one without /boot or /lib/modules).
find_kernel() {
    local k v
    for k in $(printf '%s\n' /boot/vmlinuz-* | sort -V -r); do
        v=${k#/boot/vmlinuz-}
        if [ -r "$k" ] && [ -n "$(find "/lib/modules/$v" -name 'hci_vhci.ko*' -print -quit 2>/dev/null)" ]; then
            echo "$k"
            return 0
        fi
    done
    return 1
}

VNG=""
find_vng() {
    if [ -x "$CACHE_DIR/venv/bin/vng" ]; then VNG=$CACHE_DIR/venv/bin/vng; return 0; fi
    if command -v vng >/dev/null 2>&1 && vng --version >/dev/null 2>&1; then VNG=$(command -v vng); return 0; fi
    return 1
}

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# Install only what is missing. Debian packages:
#   qemu-system-x86   qemu-system-x86_64, run here as TCG software emulation
#                     (its Depends bring seabios, the PC firmware)
#   linux-image-amd64 Debian's kernel for the guest; its modules
#                     (/lib/modules/*) include hci_vhci (virtual HCI, /dev/vhci),
#                     bluetooth, 9p/virtio that virtme-ng loads from an initramfs
#   busybox-static    virtme-ng builds that initramfs around busybox
#   bluez             bluetoothd, btmgmt, bluetoothctl
#   bluez-test-tools  btvirt (virtual controllers over /dev/vhci)
#   dbus-daemon       dbus-daemon --system for bluetoothd (bluez pulls it in too)
#   dbus-bin          dbus-send, used to ask bluetoothd whether adapters are powered
#   kmod              modprobe in the guest
#   python3-venv      only if virtme-ng must be installed and python3 has no venv
# PyPI:
#   virtme-ng         vng: boots a kernel with the host's root as a read-only 9p
#                     export plus tmpfs overlays, runs one command, returns its code
ensure_vm_tools() {
    local apt=()
    command -v qemu-system-x86_64 >/dev/null || apt+=(qemu-system-x86)
    if [ -z "$KERNEL" ] && ! find_kernel >/dev/null; then apt+=(linux-image-amd64); fi
    command -v busybox >/dev/null || [ -x /bin/busybox ] || apt+=(busybox-static)
    { [ -x /usr/libexec/bluetooth/bluetoothd ] && command -v btmgmt >/dev/null && command -v bluetoothctl >/dev/null; } || apt+=(bluez)
    command -v btvirt >/dev/null || apt+=(bluez-test-tools)
    command -v dbus-daemon >/dev/null || apt+=(dbus-daemon)
    command -v dbus-send >/dev/null || apt+=(dbus-bin)
    command -v modprobe >/dev/null || apt+=(kmod)
    local need_vng=0
    find_vng || need_vng=1
    if [ "$need_vng" = 1 ] && command -v python3 >/dev/null && ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
        apt+=(python3-venv)
    fi
    command -v python3 >/dev/null || apt+=(python3 python3-venv)

    if [ ${#apt[@]} -gt 0 ]; then
        [ "$INSTALL" = 1 ] || die 3 "missing Debian packages: ${apt[*]} (run without --no-install, or apt-get install them)"
        say "installing Debian packages: ${apt[*]}"
        as_root apt-get update -q >&2 || die 3 "apt-get update failed"
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${apt[@]}" >&2 \
            || die 3 "apt-get install ${apt[*]} failed"
    fi
    if [ "$need_vng" = 1 ]; then
        [ "$INSTALL" = 1 ] || die 3 "vng (virtme-ng) missing (pip install virtme-ng)"
        say "installing virtme-ng $VIRTME_NG_VERSION from PyPI into $CACHE_DIR/venv"
        mkdir -p "$CACHE_DIR"
        python3 -m venv "$CACHE_DIR/venv" >&2 || die 3 "python3 -m venv failed"
        "$CACHE_DIR/venv/bin/pip" install -q "virtme-ng==$VIRTME_NG_VERSION" >&2 || die 3 "pip install virtme-ng failed"
        find_vng || die 3 "virtme-ng installed but vng not found"
    fi
    # vng runs its helper virtme-run from PATH.
    PATH="$(dirname "$VNG"):$PATH"
    if [ -z "$KERNEL" ]; then
        KERNEL=$(find_kernel) || die 3 "no /boot/vmlinuz-* with hci_vhci in /lib/modules (apt-get install linux-image-amd64)"
    fi
    [ -r "$KERNEL" ] || die 3 "kernel $KERNEL not readable"
}

ensure_vm_tools

# ---- the VM -------------------------------------------------------------------

# POSIX single-quote one word, for the command line the guest's shell runs.
q() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }

VM_PGID=""
# shellcheck disable=SC2329 # called by the EXIT trap
cleanup() {
    if [ -n "$VM_PGID" ] && kill -0 "$VM_PGID" 2>/dev/null; then
        say "stopping the VM (process group $VM_PGID)"
        kill -TERM -- "-$VM_PGID" 2>/dev/null || true
        sleep 2
        kill -KILL -- "-$VM_PGID" 2>/dev/null || true
    fi
    [ -n "${ERRCOPY:-}" ] && rm -f "$ERRCOPY"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ERRCOPY=$(mktemp "${TMPDIR:-/tmp}/bluez-vm-stderr.XXXXXX")

run_vm() {
    local guest=(/bin/bash "$HERE/guest-setup.sh" --attempts "$ATTEMPTS"
        --controller-timeout "$CONTROLLER_TIMEOUT" --host-start "$(date +%s.%N)")
    [ "$VERBOSE" = 1 ] && guest+=(--verbose)
    if [ "$CHECK" = 1 ]; then guest+=(--check); else guest+=(-- "$@"); fi
    local cmdline="" w
    for w in "${guest[@]}"; do cmdline+="$(q "$w") "; done

    local vng=("$VNG" --run "$KERNEL" --user root --name bluez-vm
        --memory "$MEMORY" --cpus "$CPUS")
    [ "$KVM" = 1 ] || vng+=(--disable-kvm)
    [ "$VERBOSE" = 1 ] && vng+=(--verbose)
    local d
    for d in "${RWDIRS[@]+"${RWDIRS[@]}"}"; do vng+=(--rwdir "$d"); done
    vng+=(--exec "$cmdline")

    # GNU timeout puts itself and vng/qemu in their own process group and
    # signals the whole group when the time is up; cleanup() kills that group.
    # qemu re-opens /proc/self/fd/1 and /proc/self/fd/2 by path: were they
    # regular files, that would truncate them (losing what was printed before)
    # and give qemu its own file offset. So both are always pipes (cat / tee).
    timeout -k 15 "$TIMEOUT" "${vng[@]}" </dev/null > >(cat) 2> >(tee -a "$ERRCOPY" >&2) &
    VM_PGID=$!
    local rc=0
    wait "$VM_PGID" || rc=$?
    VM_PGID=""
    return "$rc"
}

T0=$(date +%s.%N)
boot=0
rc=0
while :; do
    boot=$((boot + 1))
    : >"$ERRCOPY"
    say "booting $KERNEL under $([ "$KVM" = 1 ] && echo KVM || echo 'QEMU TCG') (boot $boot/$VM_ATTEMPTS, memory $MEMORY, $CPUS vCPUs, limit ${TIMEOUT}s)"
    tb=$(date +%s.%N)
    rc=0
    run_vm "$@" || rc=$?
    sleep 0.2 # let tee flush the stderr copy
    elapsed=$(awk -v a="$tb" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    # timeout(1) gives 124 (or 137 after its -k KILL); a command inside the VM
    # may exit 137 too, so go by the elapsed time as well.
    if { [ "$rc" = 124 ] || [ "$rc" = 137 ]; } && awk -v e="$elapsed" -v t="$TIMEOUT" 'BEGIN { exit !(e >= t) }'; then
        say "the VM did not finish within ${TIMEOUT}s (killed)"
        rc=124
    fi
    # Retry only when BlueZ never came up, i.e. before COMMAND ran.
    if [ "$rc" = 125 ] && grep -q 'FAILED: ' "$ERRCOPY" && ! grep -q 'BlueZ ready' "$ERRCOPY" && [ "$boot" -lt "$VM_ATTEMPTS" ]; then
        say "BlueZ did not come up in this VM (${elapsed}s); booting a fresh one"
        continue
    fi
    break
done
total=$(awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
say "VM exited with $rc after ${elapsed}s (total ${total}s, $boot boot(s))"
exit "$rc"
