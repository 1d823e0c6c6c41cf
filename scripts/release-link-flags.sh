#!/bin/sh
# Prints the extra `swift build` flags for LoginKit's release executables (`make release`, and the
# bench's static builds, which measure what `make release` ships): linked by lld with packed
# relative relocations (DT_RELR: the 39,000 R_X86_64_RELATIVE entries of a static-stdlib
# executable take 0.9 MB, read and kept resident at every start; packed they take a few KB),
# without exported symbols (scripts/executables.map), and with libstdc++ linked in (the Swift
# runtime is its only user here; the shared one costs ~0.9 MB resident, most of it its own start-up:
# locales and streams the runtime never uses). docs/benchmarks.md (2026-11-26, midday and
# afternoon) has the figures, docs/development.md what it asks of the machine that runs them.
#
# Usage: sh scripts/release-link-flags.sh [path to swift]. Prints nothing, and the build links as
# before, when that toolchain has no lld, when this C library is older than glibc 2.36 (the first
# to apply DT_RELR), or when the checkout's path holds whitespace (the flags name files in it).
# Leaves libstdc++ shared when the toolchain's clang finds no libstdc++.a.
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
flags="-Xswiftc -use-ld=lld -Xlinker -z -Xlinker pack-relative-relocs -Xlinker --version-script=$here/executables.map"
# libstdc++ linked in: the Swift runtime's link asks for `-lstdc++`, and the linker takes the first
# libstdc++ it finds in the search path, so a directory that holds only the archive goes first.
archive=$("$toolchain_bin/clang" -print-file-name=libstdc++.a 2>/dev/null || true)
case "$archive" in
  /*)
    static_cxx=$(dirname "$here")/.build-static-libstdc++
    # A checkout it cannot write to keeps libstdc++ shared, and the other flags.
    if [ -f "$archive" ] && mkdir -p "$static_cxx" 2>/dev/null && ln -sf "$archive" "$static_cxx/libstdc++.a" 2>/dev/null; then
      flags="$flags -Xswiftc -L$static_cxx"
    fi
    ;;
esac
echo "$flags"
