#!/usr/bin/env bash
# Checks what an app pays to embed LoginKit: a package that depends on one library product by URL
# and version resolves at most MAXIMUM packages besides LoginKit (default 6). The products checked
# are the ones an app embeds with no trait: LoginKit, LoginKitViewModel, LoginKitMocks. Prints the
# count and the names for each; exits 1 when one is over. `make test` runs it.
#
# How: the working tree (tracked files and untracked ones git does not ignore, as they are now) is
# committed into a scratch git repository and tagged, and a scratch app depends on it by URL
# (`.package(url:from:)`), as a user's app would; `swift package resolve` then writes the pins.
set -euo pipefail
cd "$(dirname "$0")/.."

SWIFT=${SWIFT:-swift}
MAXIMUM=${MAXIMUM:-6}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

mkdir "$scratch/LoginKit"
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' file; do
    [[ -e "$file" ]] && printf '%s\0' "$file"
done | tar -cf - --null -T - | tar -xf - -C "$scratch/LoginKit"
git -C "$scratch/LoginKit" init -q
git -C "$scratch/LoginKit" add -A
git -C "$scratch/LoginKit" -c user.name=check -c user.email=check@localhost commit -q -m snapshot
git -C "$scratch/LoginKit" tag 1.0.0

status=0
for product in LoginKit LoginKitViewModel LoginKitMocks; do
    app="$scratch/app-$product"
    mkdir -p "$app/Sources/App"
    echo "import $product" >"$app/Sources/App/main.swift"
    cat >"$app/Package.swift" <<MANIFEST
// swift-tools-version:6.2
import PackageDescription
let package = Package(
    name: "App",
    dependencies: [.package(url: "$scratch/LoginKit", from: "1.0.0")],
    targets: [.executableTarget(name: "App", dependencies: [.product(name: "$product", package: "LoginKit")])]
)
MANIFEST
    if ! (cd "$app" && "$SWIFT" package resolve >"$app/resolve.log" 2>&1); then
        cat "$app/resolve.log" >&2
        echo "check-closure: an app depending on $product does not resolve" >&2
        exit 1
    fi
    pins=$(python3 -c '
import json, sys
pins = [pin["identity"] for pin in json.load(open(sys.argv[1]))["pins"] if pin["identity"] != "loginkit"]
print(len(pins), " ".join(sorted(pins)))' "$app/Package.resolved")
    count=${pins%% *}
    echo "check-closure: an app on $product resolves $count packages besides LoginKit: ${pins#* }"
    if (( count > MAXIMUM )); then
        echo "check-closure: more than $MAXIMUM; a dependency reached the kit's products (docs/architecture.md, \"Weight\")" >&2
        status=1
    fi
done
exit $status
