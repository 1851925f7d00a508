# Shared set-up for the Tools/ scripts: checks the Swift toolchain and installs the Debian
# packages the build needs when they are missing. Sourced, not run.

# Debian packages the targets link against or test with (dbus-daemon: the D-Bus tests start a
# private bus; libbluetooth-dev: the kernel's controller list for adapter availability).
HORIZON_DEBIAN_PACKAGES=(pkg-config libsqlite3-dev libdbus-1-dev dbus-daemon libbluetooth-dev)
# What Tools/test.sh's browser check adds: headless Chromium (driven over its DevTools pipe by
# Tools/lib/dashboard_browser.py) and a font for its screenshots (Chromium only recommends one).
HORIZON_BROWSER_PACKAGES=(chromium fonts-dejavu-core)
# What Tools/package.sh and Tools/test.sh's packaging check add: dpkg-shlibdeps (the packages'
# Depends) and lintian (Debian's own checks of the .deb files).
HORIZON_PACKAGING_PACKAGES=(dpkg-dev lintian)
# What the server's mail tests add: a real SMTP server (Python's aiosmtpd) and msmtp, the
# sendmail-style command the tests hand mail to, as an administrator's MTA would take it.
HORIZON_MAIL_TEST_PACKAGES=(python3-aiosmtpd msmtp)
# What the rolling-upgrade check adds: a real proxy in front of two servers (Tools/scale-out.sh
# --rolling-upgrade drains and restarts them through its admin socket).
HORIZON_PROXY_PACKAGES=(haproxy)

step() { printf '\n==> %s\n' "$*" >&2; }

die() {
    printf 'error: %s\n' "$*" >&2
    exit 1
}

ensure_swift() {
    if ! command -v swift >/dev/null 2>&1; then
        for candidate in /opt/swift/usr/bin /usr/share/swift/usr/bin; do
            if [ -x "$candidate/swift" ]; then
                export PATH="$candidate:$PATH"
                break
            fi
        done
    fi
    command -v swift >/dev/null 2>&1 ||
        die "Swift 6.1 or newer is required and was not found; install it from swift.org (Debian ships no Swift 6) and put it on PATH"
    local version
    version=$(swift --version 2>&1 | sed -n 's/.*Swift version \([0-9]*\)\.\([0-9]*\).*/\1.\2/p' | head -n1)
    case "$version" in
    "" ) die "could not read the Swift version from 'swift --version'" ;;
    [0-5].* | 6.0) die "Swift $version is too old; this package needs Swift 6.1 or newer" ;;
    esac
}

# Installs HORIZON_DEBIAN_PACKAGES and any packages named as arguments, when missing.
ensure_debian_packages() {
    local missing=()
    for package in "${HORIZON_DEBIAN_PACKAGES[@]}" "$@"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    command -v apt-get >/dev/null 2>&1 ||
        die "missing packages ${missing[*]} and no apt-get to install them; install them by hand"
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || die "missing packages ${missing[*]}; run as root or install sudo"
        sudo=(sudo)
    fi
    step "installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -qq || die "apt-get update failed; check the network or the apt sources"
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
        die "apt-get could not install ${missing[*]}"
}

# Keeps build logs short: compiler diagnostics and the final line, not every "Compiling" line.
filter_build_output() {
    if [ -t 1 ] && [ -z "${CI:-}" ]; then
        cat
    else
        grep -v -E '^\[[0-9]+/[0-9]+\] (Compiling|Write|Emitting|Linking|Building|Wrapping|Applying)' || true
    fi
}

# Builds horizon-server and horizon-bench in configuration $1 (debug or release), installing the
# toolchain and packages first when missing, and sets `bin` to the folder they are in.
build_server_and_bench() {
    ensure_swift
    ensure_debian_packages
    step "building horizon-server and horizon-bench ($1; a first build takes 10-20 minutes on 2 cores)"
    swift build -c "$1" --product horizon-server 2>&1 | filter_build_output
    swift build -c "$1" --product horizon-bench 2>&1 | filter_build_output
    bin=$(swift build -c "$1" --show-bin-path)
}
