#!/usr/bin/env bash
# Checks against a real bluetoothd, run inside the throw-away VM by run-in-vm.sh (Tools/test.sh
# does this after the unit tests). Arguments: the directory holding the built programs, and
# optionally a directory of .deb files (Tools/package.sh) to install and pay with as well.
# Ends with "N passed, N failed"; exit status 0 only if nothing failed.
set -u
bin=${1:?usage: bluez-checks.sh BIN_DIR [PACKAGES_DIR]}
packages=${2:-}
passed=0
failed=0

check() {
    local name=$1
    shift
    if "$@"; then
        passed=$((passed + 1))
        echo "ok    $name"
    else
        failed=$((failed + 1))
        echo "FAIL  $name"
    fi
}

status() { "$bin/horizon-terminal" status --radio bluez --json "$@" 2>&1; }
says() {
    local expected=$1
    shift
    local output
    output=$(status "$@")
    grep -q -- "$expected" <<<"$output" || {
        echo "      expected $expected in: $output"
        return 1
    }
}

check "the first powered adapter is found and reported powered on" \
    says '"availability" : "powered on"'
check "an adapter chosen by name (hci1)" says '"adapter" : "hci1"' --adapter hci1
btmgmt --index 0 power off >/dev/null 2>&1
check "a powered-off adapter is reported powered off" says '"availability" : "powered off"' --adapter hci0
check "with hci0 off, the default is the powered hci1" says '"adapter" : "hci1"'
btmgmt --index 0 power on >/dev/null 2>&1
check "powered on again" says '"availability" : "powered on"' --adapter hci0

# Payments between two processes, each on its own adapter.
source "$(dirname "${BASH_SOURCE[0]}")/bluez-payments.sh"
if setup_payments; then
    # The foreign central first: after the cancel check the wallet's controller sometimes hears
    # no advertisement at all for a minute (seen only under emulation; see the README there).
    check "a foreign central (bluetoothctl) writes garbage; the terminal still takes a payment" \
        check_foreign_central_writes_garbage
    check "a payment with tip completes (terminal on hci0, wallet on hci1)" check_payment_with_tip
    check "the wallet's adapter uses resolvable private addresses (the terminal sees one)" \
        check_wallet_uses_a_private_address
    check "notifications go over AcquireNotify sockets, on the terminal's side and the wallet's" \
        check_notifications_over_acquired_socket
    check "the customer declines: nothing charged" check_rejection
    check "the cashier cancels while the customer decides: nothing charged" check_cancel
    check "the terminal's adapter is power-cycled while it waits: it advertises again and is paid" \
        check_terminal_adapter_power_cycle
    check "terminal killed after settling, restarted: the pending payment resolves, charged once" \
        check_terminal_killed_mid_payment
else
    check "terminal and wallet set up (the wallet's adapter with privacy on)" false
fi

# The request proxy over real bluetoothd, with a server in the VM.
source "$(dirname "${BASH_SOURCE[0]}")/bluez-proxy.sh"
if setup_proxy; then
    check "a wallet without a route to its server gets its balance through the terminal, then pays it" \
        check_balance_through_terminal_then_pay
else
    check "a server, a terminal activated with it and a registered wallet are set up in the VM" false
    show_proxy
fi
proxy_stop_server

# The packages installed with dpkg -i, and a payment with the installed programs.
if [ -n "$packages" ]; then
    source "$(dirname "${BASH_SOURCE[0]}")/bluez-installed.sh"
    if install_packages "$packages"; then
        check "the Debian packages install: programs, man pages, user, unit (not enabled), policy" \
            check_packages_installed
        check "the installed terminal serves on hci0 as user horizon; the installed wallet pays it" \
            check_installed_serve_pays
    else
        check "the Debian packages install with dpkg -i" false
    fi
    installed_stop
fi

echo "bluez: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
