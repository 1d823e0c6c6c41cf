#!/bin/sh
# Prints the extra `swift build` flags for LoginKit's release executables (`make release`, and the
# bench's static builds, which measure what `make release` ships): linked by lld with packed
# relative relocations (DT_RELR: the 39,000 R_X86_64_RELATIVE entries of a static-stdlib
# executable take 0.9 MB, read and kept resident at every start; packed they take a few KB), and
# without exported symbols (scripts/executables.map). docs/benchmarks.md (2026-11-26, midday) has the
# figures, docs/development.md what it asks of the machine that runs the executables.
#
# Usage: sh scripts/release-link-flags.sh [path to swift]. Prints nothing, and the build links as
# before, when that toolchain has no lld, when this C library is older than glibc 2.36 (the first
# to apply DT_RELR), or when the checkout's path holds whitespace (the flags name a file in it).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
case "$here" in
  *[[:space:]]*) exit 0 ;;
esac
swift=${1:-swift}
swift_path=$(command -v "$swift" 2>/dev/null || true)
[ -n "$swift_path" ] || exit 0
toolchain_bin=$(dirname "$(readlink -f "$swift_path")")
[ -x "$toolchain_bin/ld.lld" ] || exit 0
glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}' || true)
[ -n "$glibc" ] || exit 0
major=${glibc%%.*}
minor=${glibc#*.}
minor=${minor%%.*}
case "$major$minor" in
  *[!0-9]*) exit 0 ;;
esac
if [ "$major" -lt 2 ] || { [ "$major" -eq 2 ] && [ "$minor" -lt 36 ]; }; then
  exit 0
fi
echo "-Xswiftc -use-ld=lld -Xlinker -z -Xlinker pack-relative-relocs -Xlinker --version-script=$here/executables.map"
