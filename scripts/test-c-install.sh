#!/usr/bin/env bash
# Installs the C library into a temporary prefix (scripts/install-c.sh) and uses it as a
# user would: the installed files and the soname; capi/tests/install/ring.c built with
# `cc $(pkg-config --cflags --libs symmem)`, with the installed oshcc, and linked with
# libsymmem.a (oshcc -static-symmem, and cc with pkg-config's Libs.private); each program
# run on 2 PEs under the installed oshrun with no LD_LIBRARY_PATH.
# Usage: bash scripts/test-c-install.sh   (needs cc, pkg-config, readelf; CARGO_TARGET_DIR
# is honoured)
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d "${TMPDIR:-/tmp}/symmem-c-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

fail() {
  echo "test-c-install: $*" >&2
  exit 1
}

echo "== install into $prefix"
bash scripts/install-c.sh --prefix "$prefix"

echo "== the installed files"
version=$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --modversion symmem)
for f in "lib/libsymmem.so.$version" lib/libsymmem.so.0 lib/libsymmem.so lib/libsymmem.a \
  lib/pkgconfig/symmem.pc include/shmem.h include/shmemx.h include/nvshmem.h \
  include/mpp/shmem.h bin/symcc bin/symrun bin/symmem-info bin/oshcc bin/oshrun \
  share/man/man1/symrun.1 share/man/man1/symmem-info.1 share/man/man1/oshrun.1; do
  [ -e "$prefix/$f" ] || fail "$prefix/$f is missing"
done
[ "$(readlink "$prefix/lib/libsymmem.so")" = libsymmem.so.0 ] || fail "libsymmem.so does not link to libsymmem.so.0"
[ "$(readlink "$prefix/lib/libsymmem.so.0")" = "libsymmem.so.$version" ] || fail "libsymmem.so.0 does not link to libsymmem.so.$version"
grep -q 'SONAME.*\[libsymmem\.so\.0\]' <<< "$(readelf -d "$prefix/lib/libsymmem.so.$version")" ||
  fail "libsymmem.so.$version has no soname libsymmem.so.0"
[ "$(readlink "$prefix/bin/oshcc")" = symcc ] || fail "oshcc is not a link to symcc"
[ "$(readlink "$prefix/bin/oshrun")" = symrun ] || fail "oshrun is not a link to symrun"
# The installed wrapper names the installed paths, never this checkout's.
[ "$("$prefix/bin/oshcc" --showme:compile)" = "-I$prefix/include" ] || fail "oshcc --showme:compile: $("$prefix/bin/oshcc" --showme:compile)"
if grep -qF "$PWD" "$prefix/bin/symcc" "$prefix/lib/pkgconfig/symmem.pc"; then
  fail "symcc or symmem.pc names $PWD"
fi
# The man pages come from the tools' own definitions: each names its options.
grep -q 'bind' "$prefix/share/man/man1/symrun.1" || fail "symrun.1 does not describe --bind-to"
grep -q 'json' "$prefix/share/man/man1/symmem-info.1" || fail "symmem-info.1 does not describe --json"
"$prefix/bin/symmem-info" --version | grep -q "$version" || fail "symmem-info --version does not say $version"
echo "ok: libraries, soname, headers, symmem.pc, symcc, symrun, symmem-info, oshcc, oshrun, man pages"

export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
src=capi/tests/install/ring.c
cflags=(-std=c11 -Wall -Wextra -Werror -O2)
libdir=$(pkg-config --variable=libdir symmem)

# Runs PROGRAM on 2 PEs under the installed oshrun, without LD_LIBRARY_PATH; every PE
# must report.
run2() {
  local out
  out=$(env -u LD_LIBRARY_PATH SYMMEM_TIMEOUT=60 "$prefix/bin/oshrun" -n 2 "$1") ||
    fail "oshrun -n 2 $1 failed: $out"
  for pe in 0 1; do
    grep -qx "PE $pe of 2: ring ok" <<< "$out" || fail "$1: no line from PE $pe in: $out"
  done
  echo "ok: $(basename "$1") on 2 PEs under oshrun"
}
# Whether PROGRAM needs libsymmem.so.0 at run time.
needs_shared() {
  grep -q 'NEEDED.*\[libsymmem\.so\.0\]' <<< "$(readelf -d "$1")"
}

echo "== cc with pkg-config (shared; -Wl,-rpath for a prefix the loader does not search)"
# shellcheck disable=SC2046 # pkg-config prints a list of flags
cc "${cflags[@]}" "$src" -o "$work/ring-pc" $(pkg-config --cflags --libs symmem) -Wl,-rpath,"$libdir"
needs_shared "$work/ring-pc" || fail "ring-pc does not need libsymmem.so.0"
run2 "$work/ring-pc"
# Without the rpath, the loader finds the library only through LD_LIBRARY_PATH (unless a
# libsymmem.so.0 is installed in a system directory too).
# shellcheck disable=SC2046
cc "${cflags[@]}" "$src" -o "$work/ring-pc-norpath" $(pkg-config --cflags --libs symmem)
if ! grep -q 'libsymmem\.so\.0 ' <<< "$(/sbin/ldconfig -p)" &&
  env -u LD_LIBRARY_PATH "$work/ring-pc-norpath" > /dev/null 2>&1; then
  fail "a program linked without the rpath found libsymmem.so.0 outside the prefix"
fi
out=$(LD_LIBRARY_PATH=$libdir SYMMEM_TIMEOUT=60 "$prefix/bin/oshrun" -n 2 "$work/ring-pc-norpath")
grep -qx "PE 1 of 2: ring ok" <<< "$out" || fail "ring-pc-norpath with LD_LIBRARY_PATH: $out"
echo "ok: without the rpath it runs with LD_LIBRARY_PATH=$libdir only"

echo "== the installed oshcc (shared, with its rpath)"
"$prefix/bin/oshcc" "${cflags[@]}" "$src" -o "$work/ring-oshcc"
needs_shared "$work/ring-oshcc" || fail "ring-oshcc does not need libsymmem.so.0"
run2 "$work/ring-oshcc"

echo "== libsymmem.a: oshcc -static-symmem, and cc with pkg-config's Libs.private"
"$prefix/bin/oshcc" -static-symmem "${cflags[@]}" "$src" -o "$work/ring-oshcc-static"
! needs_shared "$work/ring-oshcc-static" || fail "ring-oshcc-static needs libsymmem.so.0"
run2 "$work/ring-oshcc-static"
private=$(pkg-config --static --libs-only-l symmem)
private=${private/-lsymmem/}
# shellcheck disable=SC2046,SC2086 # lists of flags
cc "${cflags[@]}" $(pkg-config --cflags symmem) "$src" -o "$work/ring-pc-static" "$libdir/libsymmem.a" $private
! needs_shared "$work/ring-pc-static" || fail "ring-pc-static needs libsymmem.so.0"
run2 "$work/ring-pc-static"

echo "test-c-install: all checks passed"
