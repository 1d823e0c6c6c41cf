#!/usr/bin/env bash
# Counts public declarations the way the surface budget is stated (docs/architecture.md, "Weight"):
# every source line, outside comments, that declares something `public` or `open`; not `@_spi`
# declarations (they are not public API) and not imports (`public import` declares nothing; their
# count is printed beside). Prints the count for Sources/LoginKit and for the whole package
# (Sources/ and Mocks/), and fails when either is over its budget: LOGINKIT_BUDGET (default 400) and
# PACKAGE_BUDGET (default 700).
set -euo pipefail
cd "$(dirname "$0")/.."

count() {
    # Strip block-comment lines and line comments, then match the modifier as a whole word at the
    # start of a declaration (after attributes and other modifiers).
    find "$@" -name '*.swift' -print0 | xargs -0 cat \
        | sed -e 's#//.*$##' \
        | grep -vE '^\s*(\*|/\*)' \
        | grep -vE '@_spi\(' \
        | grep -vE '^\s*(@_exported\s+)?public\s+import\s' \
        | grep -cE '^\s*(@[A-Za-z_]+(\([^)]*\))?\s+)*(((private|fileprivate|internal|package)\(set\)|final|static|class|override|nonisolated|mutating|nonmutating|indirect|convenience|required|dynamic|lazy|weak|unowned)\s+)*(public|open)(\(set\))?\s' || true
}

imports() {
    find "$@" -name '*.swift' -print0 | xargs -0 cat | grep -cE '^\s*(@_exported\s+)?public\s+import\s' || true
}

kit=$(count Sources/LoginKit)
package=$(count Sources Mocks)
echo "public declarations: Sources/LoginKit $kit (budget ${LOGINKIT_BUDGET:-400}), package $package (budget ${PACKAGE_BUDGET:-700})"
echo "public imports beside them: Sources/LoginKit $(imports Sources/LoginKit), package $(imports Sources Mocks)"
status=0
if (( kit > ${LOGINKIT_BUDGET:-400} )); then echo "api-count: Sources/LoginKit is over its budget" >&2; status=1; fi
if (( package > ${PACKAGE_BUDGET:-700} )); then echo "api-count: the package is over its budget" >&2; status=1; fi
exit $status
