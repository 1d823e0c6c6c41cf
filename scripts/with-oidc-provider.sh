#!/usr/bin/env bash
# Runs a command with a fresh oidc-provider-mock (scripts/oidc-provider-venv.sh) on 127.0.0.1 and a
# free port: an OpenID provider LoginKit has no code for, signed in to through its own HTML form.
# Its issuer is in LOGINKIT_TEST_OIDC_ISSUER. It accepts any client ID with any redirect URI and
# also registers clients (RFC 7591) at its registration_endpoint, which then match their redirect
# URIs exactly. The provider is stopped in all cases.
#
# Without a Python 3.12 or later (Debian bookworm has 3.11; this project's machines have pyenv's),
# the command runs without the provider and without LOGINKIT_REQUIRE_OIDC_PROVIDER, after a warning:
# the third-party provider's tests are then skipped, visibly, rather than failing `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
scripts/oidc-provider-venv.sh || status=$?
if [ "$status" -eq 3 ]; then
    echo "with-oidc-provider: WARNING: no Python 3.12+, so the tests against oidc-provider-mock are skipped" >&2
    unset LOGINKIT_REQUIRE_OIDC_PROVIDER
    exec "$@"
elif [ "$status" -ne 0 ]; then
    exit "$status"
fi

port=$(python3 scripts/free-port.py)
workdir=$(mktemp -d)
log="$workdir/oidc-provider.log"
: >"$log"  # exists before tail opens it (the background job opens it only when it gets to run)
NO_COLOR=1 .venv-oidc/bin/oidc-provider-mock --host 127.0.0.1 --port "$port" >"$log" 2>&1 &
provider_pid=$!
cleanup() {
    kill "$provider_pid" 2>/dev/null || true
    wait "$provider_pid" 2>/dev/null || true
    rm -rf "$workdir"
}
trap cleanup EXIT INT TERM

# Wait (at most 60 s) for uvicorn to say it is listening: read its log as it is written.
if ! timeout 60 grep -q -m1 "Uvicorn running on http://127.0.0.1:$port" <(tail -n +1 -f "$log" --pid="$provider_pid"); then
    echo "with-oidc-provider: oidc-provider-mock did not start:" >&2
    cat "$log" >&2
    exit 1
fi

export LOGINKIT_TEST_OIDC_ISSUER="http://127.0.0.1:$port"
"$@"
