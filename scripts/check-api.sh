#!/usr/bin/env bash
# Fails when the public API changed without docs/api.md being regenerated (`make api`): an API
# change must be a reviewed diff, never an accident. `make check-api` runs this.
#
# 1. Regenerates the API list into a temporary file (scripts/api-surface.sh) and compares it with
#    the committed docs/api.md.
# 2. Runs
#        swift package diagnose-api-breaking-changes <baseline> --products <the library products>
#    which builds the baseline in a scratch checkout and compares full signatures (types,
#    conformances, availability), not just names. The baseline is the commit named in the file
#    `api-baseline` at the root: a commit of this repository's own history (a clone carries its
#    commits, not its tags). Move it forward when an API change is accepted. `API_BASELINE=none`
#    skips this step (`make test` does: it builds the baseline from scratch, several minutes; CI runs
#    `make check-api` after `make test`). A deliberate break can be accepted by listing the exact
#    message in api-breakage-allowlist.txt (one per line), which is passed as
#    --breakage-allowlist-path.
set -euo pipefail
cd "$(dirname "$0")/.."

SWIFT=${SWIFT:-swift}
SWIFT_TRAITS=${SWIFT_TRAITS:---enable-all-traits}
BASELINE=${API_BASELINE:-$(sed -n '1{s/[[:space:]]//g;p;}' api-baseline 2>/dev/null)}
# The products an app embeds without a trait: SwiftPM builds the baseline's checkout with the
# default traits only (it takes no --traits for it), so the trait-gated products (LoginKitPostgres,
# LoginKitLifecycle, LoginKitDevServer) cannot be built there; their names are still checked
# against docs/api.md above.
PRODUCTS=(LoginKit LoginKitViewModel LoginKitMocks)

if [[ ! -f docs/api.md ]]; then
    echo "check-api: docs/api.md is missing; run \`make api\` and commit it" >&2
    exit 1
fi

generated=$(mktemp)
trap 'rm -f "$generated"' EXIT
SWIFT="$SWIFT" scripts/api-surface.sh "$generated"
if ! diff -u docs/api.md "$generated"; then
    echo "check-api: the public API differs from docs/api.md (diff above: - committed, + code)." >&2
    echo "check-api: if the change is intended, run \`make api\` and commit docs/api.md." >&2
    exit 1
fi
echo "check-api: the public API matches docs/api.md"

if [[ "$BASELINE" == none ]]; then
    echo "check-api: API_BASELINE=none; not comparing signatures with the baseline commit"
elif [[ -z "$BASELINE" ]]; then
    echo "check-api: no baseline: write a commit of this repository into api-baseline" >&2
    exit 1
elif ! git cat-file -e "$BASELINE^{commit}" 2>/dev/null; then
    echo "check-api: the baseline $BASELINE (api-baseline) is not a commit of this repository's history" >&2
    exit 1
else
    allowlist=()
    if [[ -s api-breakage-allowlist.txt ]]; then
        allowlist=(--breakage-allowlist-path api-breakage-allowlist.txt)
    fi
    echo "check-api: comparing with $BASELINE (api-baseline; swift package diagnose-api-breaking-changes)"
    "$SWIFT" package $SWIFT_TRAITS diagnose-api-breaking-changes "${allowlist[@]}" "$BASELINE" --products "${PRODUCTS[@]}"
fi
