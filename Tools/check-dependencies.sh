#!/usr/bin/env bash
# Compares each target's imports with the dependencies Package.swift declares for it and prints
# every difference: a module imported but not declared, or a dependency declared but imported by
# none of the target's files. Exits 1 when there is a difference, 0 when they match exactly.
#
#   Tools/check-dependencies.sh
#
# Executables a test target depends on are exempt from "declared but not imported": the tests run
# them as processes, and the dependency is what makes `swift build --build-tests` build them.
# The compiler checks the other direction too (`--explicit-target-dependency-import-check error`
# in Tools/test.sh); this script also finds what is declared and never used.
set -euo pipefail
cd "$(dirname "$0")/.."

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
# A scratch directory of its own: no build needed, and no wait for one running in .build.
swift package --scratch-path "$scratch" describe --type json | python3 -c '
import json, os, re, sys

package = json.load(sys.stdin)
targets = {t["name"]: t for t in package["targets"]}
# Modules of the toolchain and the platform: never declared in Package.swift.
system = {
    "Foundation", "FoundationEssentials", "FoundationNetworking", "Dispatch", "Glibc", "Musl",
    "Darwin", "Testing", "XCTest", "Synchronization", "_Concurrency", "Observation",
    "RegexBuilder", "os", "SwiftShims", "FoundationXML",
}
pattern = re.compile(
    r"^\s*(?:@[\w]+(?:\([^)]*\))?\s+)*(?:(?:public|package|internal|fileprivate|private)\s+)?"
    r"import\s+(?:(?:typealias|struct|class|enum|protocol|let|var|func)\s+)?([A-Za-z_][\w]*)"
)

differences = 0
for name in sorted(targets):
    target = targets[name]
    if target.get("module_type") != "SwiftTarget":
        continue
    imported = set()
    for source in target.get("sources", []):
        with open(os.path.join(target["path"], source), encoding="utf-8") as file:
            for line in file:
                match = pattern.match(line)
                if match:
                    imported.add(match.group(1))
    imported -= system
    imported.discard(target["c99name"])
    declared = set(target.get("target_dependencies", [])) | set(target.get("product_dependencies", []))
    # A dependency on another executable target is how a test gets a program built.
    exempt = {d for d in declared if targets.get(d, {}).get("type") == "executable"}
    modules = {targets[d]["c99name"] if d in targets else d: d for d in declared}
    for module in sorted(imported - set(modules)):
        print(f"{name}: imports {module}, which is not declared")
        differences += 1
    for module, dependency in sorted(modules.items()):
        if module not in imported and dependency not in exempt:
            print(f"{name}: declares {dependency}, which no file imports")
            differences += 1

if differences:
    print(f"{differences} difference(s) between imports and declared dependencies", file=sys.stderr)
    sys.exit(1)
print("every target imports exactly what it declares")
'
