#!/usr/bin/env bash
# Builds the Debian packages horizon-server, horizon-terminal and horizon-wallet (.deb files, with
# dpkg-deb) from this package's programs. No network beyond what the Swift build itself needs.
#
#   Tools/package.sh                          release build (static Swift runtime), then package
#   Tools/package.sh --configuration debug    package the debug build (for CI: see below)
#   Tools/package.sh --skip-build             package the programs already built
#   Tools/package.sh --output DIR             where the .deb files go (default .build/packages)
#   Tools/package.sh --print-version          print the version the packages get, and exit
#
# The version is HorizonVersion.current (Sources/HorizonCore/Version.swift), the same string every
# program prints for --version; the packages are VERSION-1. What each package installs:
#   horizon-server    /usr/bin/horizon-server, its man page, horizon-server.service (not enabled),
#                     /etc/horizon/server.env (options for serve), the system user horizon-server
#                     and /var/lib/horizon-server
#   horizon-terminal  /usr/bin/horizon-terminal, its man page, horizon-terminal.service (not
#                     enabled), /etc/horizon/terminal.env, the udev rule for /dev/rfkill and USB
#                     dongles, the system-bus policy for org.horizon.Terminal, the system user
#                     horizon and /var/lib/horizon-terminal
#   horizon-wallet    /usr/bin/horizon-wallet and its man page
# Man pages come from the programs' own help (swift-argument-parser's generate-manual tool).
# Depends are computed by dpkg-shlibdeps from the libraries the binaries link.
#
# A release build links the Swift runtime statically, so the packages need nothing outside Debian.
# A debug build links the toolchain's Swift runtime (RUNPATH into it): its packages run only on a
# machine with the same toolchain at the same place, which is what CI's packaging check needs
# (Tools/test.sh packages its debug build and lints it instead of building release).
set -euo pipefail
cd "$(dirname "$0")/.."
source Tools/lib/setup.sh

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

configuration=release
output=.build/packages
skip_build=0
while [ $# -gt 0 ]; do
    case "$1" in
    --configuration)
        [ $# -ge 2 ] || { usage >&2; exit 2; }
        configuration=$2
        shift 2
        ;;
    --output)
        [ $# -ge 2 ] || { usage >&2; exit 2; }
        output=$2
        shift 2
        ;;
    --skip-build) skip_build=1; shift ;;
    --print-version) print_version=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *)
        printf 'error: unknown option %s\n\n' "$1" >&2
        usage >&2
        exit 2
        ;;
    esac
done
case "$configuration" in
release | debug) ;;
*) printf 'error: --configuration is release or debug, not %s\n' "$configuration" >&2; exit 2 ;;
esac

version=$(sed -n 's/^ *public static let current = "\([0-9][0-9A-Za-z.+~]*\)"$/\1/p' Sources/HorizonCore/Version.swift)
[ -n "$version" ] || die "no version found in Sources/HorizonCore/Version.swift (public static let current = \"X.Y.Z\")"
if [ -n "${print_version:-}" ]; then
    echo "$version"
    exit 0
fi
package_version="$version-1"

for tool in dpkg-deb dpkg-shlibdeps gzip strip; do
    command -v "$tool" >/dev/null 2>&1 || ensure_debian_packages dpkg-dev binutils
done
ensure_swift
arch=$(dpkg --print-architecture)

# One date for everything that carries one (changelog, man pages, file times): the last commit's,
# so that packaging the same commit twice gives the same files.
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
    SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || date +%s)
fi
export SOURCE_DATE_EPOCH

programs=(horizon-server horizon-terminal horizon-wallet)
build_flags=(-c "$configuration")
[ "$configuration" = release ] && build_flags+=(--static-swift-stdlib)
if [ "$skip_build" = 0 ]; then
    ensure_debian_packages
    for program in "${programs[@]}"; do
        step "building $program ($configuration)"
        swift build "${build_flags[@]}" --product "$program" 2>&1 | filter_build_output
    done
fi
bin=$(swift build "${build_flags[@]}" --show-bin-path)
for program in "${programs[@]}"; do
    [ -x "$bin/$program" ] || die "$bin/$program is not built (run without --skip-build)"
done

# swift-argument-parser's GenerateManual plugin runs its generate-manual tool over every
# executable after building them all in the configuration asked for; here only the three
# programs are wanted, already built, so the plugin only builds the tool (`--help` does that,
# from the checked-out dependency) and the tool is run on each binary.
step "building swift-argument-parser's generate-manual tool"
plugin_log=$(swift package plugin generate-manual --help 2>&1) || die "the generate-manual plugin failed: $plugin_log"
manual_tool="$(swift build --show-bin-path)/generate-manual-tool"
[ -x "$manual_tool" ] || die "generate-manual did not leave its tool at $manual_tool"

mkdir -p "$output"
work=$(mktemp -d "${TMPDIR:-/tmp}/horizon-package.XXXXXX")
trap 'rm -rf "$work"' EXIT

changelog_date=$(date -u -R -d "@$SOURCE_DATE_EPOCH")
maintainer="Horizon for Linux maintainers <maintainers@users.noreply.a-seed-d990680e.example>"

# The files every package has: the binary, its man page, the copyright and the changelog.
package_common() {
    local package=$1 root=$2
    install -d -m 0755 "$root/DEBIAN" "$root/usr/bin" "$root/usr/share/man/man1" "$root/usr/share/doc/$package"
    install -m 0755 "$bin/$package" "$root/usr/bin/$package"
    # Debian ships binaries without symbols (the debug build's too: it keeps its RUNPATH).
    strip --strip-unneeded --remove-section=.comment --remove-section=.note "$root/usr/bin/$package"

    mkdir -p "$work/man-$package"
    "$manual_tool" "$bin/$package" --output-directory "$work/man-$package" \
        --date "$(date -u -d "@$SOURCE_DATE_EPOCH" +%F)" --authors "$maintainer" >/dev/null
    # A blank line in a command's discussion becomes an empty input line, which mdoc warns about:
    # it is a paragraph break (.Pp).
    sed 's/^$/.Pp/' "$work/man-$package/$package.1" >"$root/usr/share/man/man1/$package.1"
    chmod 0644 "$root/usr/share/man/man1/$package.1"
    gzip -9n "$root/usr/share/man/man1/$package.1"

    # Each line of an override is preceded by its reason (lintian shows it with the tag).
    install -d -m 0755 "$root/usr/share/lintian/overrides"
    {
        echo "# swift-nio-extras (HTTP compression, used by AsyncHTTPClient and Hummingbird) compiles its own"
        echo "# copy of zlib into the program; SwiftPM has no way to link the system's libz for it instead."
        echo "embedded-library zlib [usr/bin/$package]"
        echo "# Built outside the Debian archive: there is no ITP bug for a first upload to close."
        echo "initial-upload-closes-no-bugs [usr/share/doc/$package/changelog.Debian.gz:1]"
        if [ "$configuration" = debug ]; then
            echo "# A debug build links the Swift runtime of the toolchain it was built with (no Debian package"
            echo "# has it); its packages are for CI's packaging check on that machine. Release builds link it"
            echo "# statically and have no such path."
            echo "custom-library-search-path RUNPATH $(readelf -d "$root/usr/bin/$package" |
                sed -n 's/.*Library runpath: \[\([^]:]*\).*/\1/p') [usr/bin/$package]"
        fi
    } >"$root/usr/share/lintian/overrides/$package"
    chmod 0644 "$root/usr/share/lintian/overrides/$package"

    sed "s/@PACKAGE@/$package/" Tools/packaging/copyright >"$root/usr/share/doc/$package/copyright"
    chmod 0644 "$root/usr/share/doc/$package/copyright"
    {
        echo "horizon ($package_version) unstable; urgency=medium"
        echo
        echo "  * Horizon for Linux $version: horizon-server, horizon-terminal and horizon-wallet"
        echo "    built with Tools/package.sh ($configuration build)."
        echo
        echo " -- $maintainer  $changelog_date"
    } | gzip -9n >"$root/usr/share/doc/$package/changelog.Debian.gz"
    chmod 0644 "$root/usr/share/doc/$package/changelog.Debian.gz"
}

# What the binary links, as Debian dependencies (dpkg-shlibdeps reads the ELF NEEDED entries and
# the libraries' symbols files). The debug build's Swift runtime belongs to no package; it is
# found through the toolchain's directory and left out.
shlib_depends() {
    local binary=$1 runtime
    runtime=$(dirname "$(command -v swift)")/../lib/swift/linux
    (
        mkdir -p "$work/shlibs/debian" && cd "$work/shlibs" && touch debian/control
        dpkg-shlibdeps -O --ignore-missing-info -l"$runtime" "$binary" 2>/dev/null |
            sed -n 's/^shlibs:Depends=//p'
    )
}

write_control() {
    local package=$1 root=$2 depends=$3 recommends=$4 summary=$5 description=$6
    local size
    size=$(du -k -s --exclude=DEBIAN "$root" | cut -f1)
    {
        echo "Package: $package"
        echo "Source: horizon"
        echo "Version: $package_version"
        echo "Architecture: $arch"
        echo "Maintainer: $maintainer"
        echo "Installed-Size: $size"
        echo "Depends: $depends"
        [ -n "$recommends" ] && echo "Recommends: $recommends"
        echo "Section: net"
        echo "Priority: optional"
        echo "Description: $summary"
        printf '%s\n' "$description" | fold -s -w 76 | sed 's/ *$//; s/^/ /'
    } >"$root/DEBIAN/control"
}

# The package's maintainer scripts (Tools/packaging/PACKAGE.postinst, .prerm, .postrm).
install_scripts() {
    local package=$1 root=$2 script
    for script in postinst prerm postrm; do
        [ -f "Tools/packaging/$package.$script" ] || continue
        install -m 0755 "Tools/packaging/$package.$script" "$root/DEBIAN/$script"
    done
}

# A unit from udev/, where it is written for a hand install in /usr/local/bin.
install_unit() {
    local unit=$1 root=$2
    install -d -m 0755 "$root/usr/lib/systemd/system"
    sed 's|^ExecStart=/usr/local/bin/|ExecStart=/usr/bin/|' "udev/$unit" >"$root/usr/lib/systemd/system/$unit"
    chmod 0644 "$root/usr/lib/systemd/system/$unit"
    grep -q '^ExecStart=/usr/bin/' "$root/usr/lib/systemd/system/$unit" || die "udev/$unit: no ExecStart in /usr/local/bin to adapt"
}

install_conffile() {
    local source=$1 root=$2
    install -d -m 0755 "$root/etc/horizon"
    install -m 0644 "Tools/packaging/$source" "$root/etc/horizon/$source"
    echo "/etc/horizon/$source" >>"$root/DEBIAN/conffiles"
}

finish_package() {
    local package=$1 root=$2
    (cd "$root" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum) \
        >"$root/DEBIAN/md5sums"
    chmod 0644 "$root/DEBIAN/md5sums" "$root/DEBIAN/control"
    [ -f "$root/DEBIAN/conffiles" ] && chmod 0644 "$root/DEBIAN/conffiles"
    find "$root" -depth -newermt "@$SOURCE_DATE_EPOCH" -print0 | xargs -0r touch --no-dereference --date="@$SOURCE_DATE_EPOCH"
    local deb="$output/${package}_${package_version}_${arch}.deb"
    # The debug build's binaries are large: a quick compression keeps CI's packaging check short.
    local compression=(-Zxz)
    [ "$configuration" = debug ] && compression=(-Zgzip -z1)
    dpkg-deb --root-owner-group "${compression[@]}" --build "$root" "$deb" >/dev/null
    echo "$deb"
}

step "packaging Horizon for Linux $package_version ($arch, $configuration build) into $output"

# horizon-server
root=$work/horizon-server
package_common horizon-server "$root"
install_unit horizon-server.service "$root"
install_conffile server.env "$root"
install_scripts horizon-server "$root"
write_control horizon-server "$root" "adduser, $(shlib_depends "$root/usr/bin/horizon-server")" "" \
    "Horizon payment server: merchants, terminals, wallets and their ledger" \
    "The Horizon server keeps the merchants, their terminals, the registered wallets, their accounts and every payment in a double-entry ledger (SQLite, or PostgreSQL for several processes), serves the HTTP API terminals and wallets settle through, and the merchant dashboard. The package installs the program, a systemd unit (not enabled), /etc/horizon/server.env and the system user horizon-server; run 'horizon-server init' as that user before enabling the service."
finish_package horizon-server "$root"

# horizon-terminal
root=$work/horizon-terminal
package_common horizon-terminal "$root"
install_unit horizon-terminal.service "$root"
install_conffile terminal.env "$root"
install -d -m 0755 "$root/usr/lib/udev/rules.d" "$root/usr/share/dbus-1/system.d"
install -m 0644 udev/70-horizon-bluetooth.rules "$root/usr/lib/udev/rules.d/70-horizon-bluetooth.rules"
install -m 0644 udev/org.horizon.Terminal.conf "$root/usr/share/dbus-1/system.d/org.horizon.Terminal.conf"
install_scripts horizon-terminal "$root"
write_control horizon-terminal "$root" "adduser, $(shlib_depends "$root/usr/bin/horizon-terminal")" "bluez, rfkill" \
    "Horizon payment terminal over Bluetooth LE (BlueZ)" \
    "A payment terminal for Linux: it advertises a payment over Bluetooth LE and lets the nearest wallet pay it, with a signed offer, a tip and a signed receipt. It runs as a single box with its own sandbox ledger, or activated with a Horizon server. The package installs the program, a systemd unit that serves the register over a control socket (not enabled), /etc/horizon/terminal.env, a udev rule and a system-bus policy for BlueZ, and the system user horizon."
finish_package horizon-terminal "$root"

# horizon-wallet
root=$work/horizon-wallet
package_common horizon-wallet "$root"
write_control horizon-wallet "$root" "$(shlib_depends "$root/usr/bin/horizon-wallet")" "bluez" \
    "Horizon wallet over Bluetooth LE (BlueZ)" \
    "A wallet for Linux that pays Horizon terminals nearby over Bluetooth LE: it finds the nearest terminal, checks its signed offer, asks for confirmation and a tip, and keeps the receipts. It registers with a Horizon server, or pays a sandbox terminal."
finish_package horizon-wallet "$root"
