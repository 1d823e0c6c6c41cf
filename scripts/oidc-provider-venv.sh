#!/usr/bin/env bash
# Makes .venv-oidc (git-ignored) with oidc-provider-mock, the third-party OpenID provider of the
# browser-login test (scripts/with-oidc-provider.sh), pinned by scripts/oidc-provider-requirements.txt;
# does nothing when it is ready (the venv holds the provider and was made from the current pins).
# oidc-provider-mock 0.4 needs Python 3.12 or later: the venv is made with the first of
# $LOGINKIT_OIDC_PYTHON, python3, python3.12, python3.13 and pyenv's installed versions (oldest
# first) that is recent enough.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-oidc
requirements=scripts/oidc-provider-requirements.txt
stamp="$venv/requirements.installed"
if [ -x "$venv/bin/oidc-provider-mock" ] && cmp -s "$requirements" "$stamp"; then
    exit 0
fi

recent_enough() { "$1" -c 'import sys, venv; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; }
candidates=()
if [ -n "${LOGINKIT_OIDC_PYTHON:-}" ]; then candidates+=("$LOGINKIT_OIDC_PYTHON"); fi
candidates+=(python3 python3.12 python3.13)
if command -v pyenv >/dev/null 2>&1; then
    root=$(pyenv root)
    while IFS= read -r version; do
        candidates+=("$root/versions/$version/bin/python3")
    done < <(pyenv versions --bare 2>/dev/null | grep -E '^3\.[0-9]+(\.[0-9]+)?$' | sort -V)
fi
python=
for candidate in "${candidates[@]}"; do
    if recent_enough "$candidate"; then
        python=$candidate
        break
    fi
done
if [ -z "$python" ]; then
    echo "oidc-provider-venv: oidc-provider-mock needs Python 3.12 or later with venv, and none was found" >&2
    echo "oidc-provider-venv: tried ${candidates[*]}; name one in LOGINKIT_OIDC_PYTHON" >&2
    exit 3  # scripts/with-oidc-provider.sh tells this apart from a failed install
fi

echo "oidc-provider-venv: creating $venv with oidc-provider-mock ($("$python" -V 2>&1))" >&2
"$python" -m venv --clear "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check --only-binary=:all: -r "$requirements"
cp "$requirements" "$stamp"
