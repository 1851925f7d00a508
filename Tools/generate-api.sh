#!/usr/bin/env bash
# Regenerates Sources/HorizonAPI/Generated from openapi.yaml with swift-openapi-generator.
#
# The generated code is committed so that builds (and CI) do not compile the generator; run
# this after every change to openapi.yaml. `ServerContractTests` fails while the committed code
# is older than the document, or was edited by hand (it compares the digests recorded here).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
api="$root/Sources/HorizonAPI"
work="$root/.build-openapi-generator"
mkdir -p "$work"
cat > "$work/Package.swift" <<'SWIFT'
// swift-tools-version: 6.0
import PackageDescription
let package = Package(
    name: "generator",
    dependencies: [.package(url: "https://github.com/apple/swift-openapi-generator", exact: "1.14.3")])
SWIFT
echo "Building swift-openapi-generator 1.14.3 (first time: about a minute)…" >&2
swift build --package-path "$work" --product swift-openapi-generator >&2
rm -rf "$api/Generated"
mkdir -p "$api/Generated"
"$work/.build/debug/swift-openapi-generator" generate "$api/openapi.yaml" \
    --config "$api/openapi-generator-config.yaml" --output-directory "$api/Generated" >&2
# The first line: the inputs' digest. Then each generated file's, so that a hand edit of
# generated code fails the same test as a document changed without regenerating.
{
    cat "$api/openapi.yaml" "$api/openapi-generator-config.yaml" | sha256sum | cut -d' ' -f1
    (cd "$api/Generated" && LC_ALL=C sha256sum -- *.swift)
} > "$api/Generated/openapi.sha256"
echo "Regenerated $api/Generated from openapi.yaml" >&2
