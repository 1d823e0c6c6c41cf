#!/usr/bin/env bash
# Fails when the public API changed without docs/api.md being regenerated (`make api`): an API
# change must be a reviewed diff, never an accident. `make check-api` runs this.
#
# 1. Regenerates the API list into a temporary file (scripts/api-surface.sh) and compares it with
#    the committed docs/api.md.
# 2. Once the 0.2.0 release is tagged, also runs
#        swift package diagnose-api-breaking-changes 0.2.0 --products <the library products>
#    which builds 0.2.0 in a scratch checkout and compares full signatures (types, conformances,
#    availability), not just names. Until `git tag -l 0.2.0` lists the tag, that step is skipped
#    with a message; `API_BASELINE=none` skips it too (`make test` does: it would build the tag
#    from scratch, ~10 minutes; CI runs `make check-api` after `make test`). A deliberate break can be accepted by listing the exact message in
#    api-breakage-allowlist.txt (one per line), which is passed as --breakage-allowlist-path.
set -euo pipefail
cd "$(dirname "$0")/.."

SWIFT=${SWIFT:-swift}
BASELINE=${API_BASELINE:-0.2.0}
# LoginKitLifecycle is new since 0.2.0: no baseline to compare with until the next tag.
PRODUCTS=(LoginKit LoginKitViewModel LoginKitMocks LoginKitPostgres LoginKitDevServer)

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
    echo "check-api: API_BASELINE=none; not comparing signatures with a release tag"
elif [[ -n "$(git tag -l "$BASELINE" 2>/dev/null)" ]]; then
    allowlist=()
    if [[ -f api-breakage-allowlist.txt ]]; then
        allowlist=(--breakage-allowlist-path api-breakage-allowlist.txt)
    fi
    echo "check-api: comparing with $BASELINE (swift package diagnose-api-breaking-changes)"
    "$SWIFT" package diagnose-api-breaking-changes "${allowlist[@]}" "$BASELINE" --products "${PRODUCTS[@]}"
else
    echo "check-api: no $BASELINE tag yet; skipping \`swift package diagnose-api-breaking-changes $BASELINE\`"
fi
