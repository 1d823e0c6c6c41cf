#!/usr/bin/env bash
# Builds the DocC reference of LoginKit, LoginKitViewModel and LoginKitMocks with swift-docc-plugin,
# warnings as errors: a symbol link (``Name``) that does not resolve, in a catalog article or in a
# doc comment of those modules, fails the run. `make docs` runs this; so does `make test`.
#
# Output: .build/docs/<Target>.doccarchive (git-ignored).
#
# The catalogs: Sources/LoginKit/LoginKit.docc, Sources/LoginKitViewModel/LoginKitViewModel.docc,
# Mocks/LoginKitMocks.docc. Each module is built on its own, so a catalog can link (``Name``) only
# to its own module's public symbols; name other modules' types in code voice (`AuthService`).
set -euo pipefail
cd "$(dirname "$0")/.."

SWIFT=${SWIFT:-swift}
# Every trait on, as `make` builds (Package.swift; docs/architecture.md, "Weight").
SWIFT_TRAITS=${SWIFT_TRAITS:---enable-all-traits}
OUTPUT=.build/docs
TARGETS=(LoginKit LoginKitViewModel LoginKitMocks)

rm -rf "$OUTPUT"
mkdir -p "$OUTPUT"

arguments=()
for target in "${TARGETS[@]}"; do arguments+=(--target "$target"); done

log=$(mktemp)
trap 'rm -f "$log"' EXIT

# --warnings-as-errors is passed through to `docc convert`. Members a type inherits from protocol
# extensions (`AuthService.validIDToken()` from `AuthServiceProtocol`) are documented on the type
# too, with the doc comment of the extension.
set +e
"$SWIFT" package $SWIFT_TRAITS --allow-writing-to-directory "$OUTPUT" generate-documentation \
    "${arguments[@]}" \
    --output-path "$OUTPUT" \
    --warnings-as-errors 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e

# The plugin reports a failed `docc convert` as an error diagnostic; check for it as well as the
# exit status, and that every archive is there.
failed=0
if [[ $status -ne 0 ]] || grep -q "'docc convert' invocation failed" "$log"; then failed=1; fi
for target in "${TARGETS[@]}"; do
    if [[ ! -d "$OUTPUT/$target.doccarchive" ]]; then
        echo "docs: no archive for $target in $OUTPUT" >&2
        failed=1
    fi
done
if [[ $failed -ne 0 ]]; then
    echo "docs: FAILED: fix the warnings above (an unresolved \`\`link\`\` is the usual one; use code voice for symbols of other modules)" >&2
    exit 1
fi
echo "docs: built ${TARGETS[*]} into $OUTPUT"
