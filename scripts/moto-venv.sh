#!/usr/bin/env bash
# Makes .venv (git-ignored) with moto's server for the Cognito tests; does nothing when it is ready.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -x .venv/bin/python ] && .venv/bin/python -c 'import moto.server, boto3, flask, joserfc' 2>/dev/null; then
    exit 0
fi
echo "moto-venv: creating .venv with moto[server,cognitoidp]" >&2
python3 -m venv --system-site-packages .venv
.venv/bin/pip install --quiet --disable-pip-version-check 'moto[server,cognitoidp]>=5,<6'
