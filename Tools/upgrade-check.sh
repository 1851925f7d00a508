#!/usr/bin/env bash
# The upgrade check with a real previous version: builds horizon-server at an older commit (a
# release tag, say) in a worktree of its own, then runs Tools/scale-out.sh --rolling-upgrade with
# that binary as the running version and this tree's as the upgrade. The older program creates
# the database and serves; the upgraded one migrates it when it starts; the older one keeps
# serving on the migrated schema until it is replaced. No terminal may see a failed request.
#
#   Tools/upgrade-check.sh --from v1.4.0
#   Tools/upgrade-check.sh --from HEAD~20 --payments 2000
#   Tools/upgrade-check.sh --help
#
# The first build of the older commit takes 10-20 minutes on 2 cores; it is kept in
# .build-upgrade-check/ for the next run. Exit status: 0 when every check passed.
set -euo pipefail
cd "$(dirname "$0")/.."
source Tools/lib/setup.sh

usage() {
    cat <<'EOF'
usage: Tools/upgrade-check.sh --from REF [options] [-- Tools/scale-out.sh options]

Builds horizon-server at git REF (a worktree in .build-upgrade-check/), builds this tree's
horizon-server and horizon-bench, then runs Tools/scale-out.sh --rolling-upgrade with REF's
binary serving first and this tree's as the upgrade, on a throw-away PostgreSQL.

  --from REF          the version running before the upgrade (a tag, branch or commit)
  --payments N        payments in all (default 1200)
  --terminals N       terminals paying every 20 ms (default 8)
  --database URL      an empty database to use instead of a throw-away PostgreSQL, or `sqlite`
  -h, --help          this text
EOF
}

from=""
payments=1200
terminals=8
database=""
extra=()
number() { case "$2" in '' | *[!0-9]*) die "$1 needs a whole number (got '$2'); see --help" ;; esac; }
while [ $# -gt 0 ]; do
    case "$1" in
    --from) [ -n "${2:-}" ] || die "--from needs a git ref"; from=$2; shift 2 ;;
    --payments) number "$1" "${2:-}"; payments=$2; shift 2 ;;
    --terminals) number "$1" "${2:-}"; terminals=$2; shift 2 ;;
    --database) [ -n "${2:-}" ] || die "--database needs a URL or 'sqlite'"; database=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    *) usage >&2; die "unknown option $1" ;;
    esac
done
[ -n "$from" ] || { usage >&2; die "--from REF is required"; }
commit=$(git rev-parse --verify --quiet "$from^{commit}") || die "$from is not a commit of this repository"

ensure_swift
ensure_debian_packages "${HORIZON_PROXY_PACKAGES[@]}"
tree=.build-upgrade-check/tree
if [ -d "$tree" ]; then
    git -C "$tree" checkout -q --detach "$commit" || die "could not check out $from in $tree"
else
    mkdir -p .build-upgrade-check
    git worktree add -q --detach "$tree" "$commit" || die "could not make a worktree of $from in $tree"
fi
step "building horizon-server at $from (${commit:0:12}; a first build takes 10-20 minutes)"
(cd "$tree" && swift build --product horizon-server 2>&1 | filter_build_output)
old_bin=$(cd "$tree" && swift build --show-bin-path)
step "building this tree's horizon-server and horizon-bench"
swift build --product horizon-server 2>&1 | filter_build_output
swift build --product horizon-bench 2>&1 | filter_build_output
new_bin=$(swift build --show-bin-path)

arguments=(--bin "$old_bin" --upgrade-bin "$new_bin" --rolling-upgrade --payments "$payments" --terminals "$terminals")
[ -z "$database" ] || arguments+=(--database "$database")
step "rolling upgrade from $from to this tree"
exec Tools/scale-out.sh "${arguments[@]}" "${extra[@]}"
