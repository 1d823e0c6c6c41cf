#!/usr/bin/env bash
# Runs a command with a fresh moto Cognito server on 127.0.0.1 and a free port, a user pool, an app
# client and a user in it, described by LOGINKIT_TEST_COGNITO_* variables; stops moto in all cases.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/moto-venv.sh

port=$(python3 scripts/free-port.py)
workdir=$(mktemp -d)
log="$workdir/moto.log"
: >"$log"  # exists before tail opens it (the background job opens it only when it gets to run)
.venv/bin/python -m moto.server -H 127.0.0.1 -p "$port" >"$log" 2>&1 &
moto_pid=$!
cleanup() {
    kill "$moto_pid" 2>/dev/null || true
    wait "$moto_pid" 2>/dev/null || true
    rm -rf "$workdir"
}
trap cleanup EXIT INT TERM

# Wait (at most 60 s) for moto to say it is listening: read its log as it is written.
if ! timeout 60 grep -q -m1 'Running on' <(tail -n +1 -f "$log" --pid="$moto_pid"); then
    echo "with-moto: moto_server did not start:" >&2
    cat "$log" >&2
    exit 1
fi

env_file="$workdir/cognito.env"
.venv/bin/python scripts/moto_cognito_setup.py "http://127.0.0.1:$port" >"$env_file"
set -a
# shellcheck disable=SC1090
. "$env_file"
set +a
"$@"
