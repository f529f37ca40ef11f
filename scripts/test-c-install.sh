#!/usr/bin/env bash
# Installs the C library into a temporary prefix (scripts/install-c.sh) and uses it as a
# user would: the installed files and the soname; capi/tests/install/ring.c built with
# `cc $(pkg-config --cflags --libs symmem)`, with the installed oshcc, and linked with
# libsymmem.a (oshcc -static-symmem, and cc with pkg-config's Libs.private); each program
# run on 2 PEs under the installed oshrun with no LD_LIBRARY_PATH. With `--features ofi`
# the library is built with the ofi transport and each program also runs on 2 simulated
# nodes over libfabric's tcp provider, every PE logging that path.
# Usage: bash scripts/test-c-install.sh [--features LIST]   (needs cc, pkg-config, readelf;
# `ofi` needs libfabric-dev; CARGO_TARGET_DIR is honoured)
set -euo pipefail
cd "$(dirname "$0")/.."

features=
case "${1:-}" in
  "") ;;
  --features) features=${2:?--features needs a list}; [ $# -eq 2 ] || { echo "test-c-install: unexpected arguments after $1 $2" >&2; exit 2; } ;;
  *) echo "test-c-install: unknown argument $1 (--features LIST)" >&2; exit 2 ;;
esac
over_ofi=no
case ",$features," in *,ofi,*) over_ofi=yes ;; esac

work=$(mktemp -d "${TMPDIR:-/tmp}/symmem-c-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

fail() {
  echo "test-c-install: $*" >&2
  exit 1
}

echo "== install into $prefix${features:+, with --features $features}"
bash scripts/install-c.sh --prefix "$prefix" ${features:+--features "$features"}

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
if [ "$over_ofi" = yes ]; then
  # libfabric, as rustc listed it for libsymmem.a, and as the shared library needs it.
  grep -qw -- -lfabric <<< "$(pkg-config --static --libs-only-l symmem)" ||
    fail "Libs.private lacks -lfabric: $(pkg-config --static --libs-only-l symmem)"
  grep -q 'NEEDED.*\[libfabric\.so' <<< "$(readelf -d "$libdir/libsymmem.so.0")" ||
    fail "libsymmem.so.0 does not need libfabric"
  grep -q '^build features: .*ofi on' <<< "$("$prefix/bin/symmem-info")" ||
    fail "the installed symmem-info does not report the ofi feature: $("$prefix/bin/symmem-info" | grep '^build features')"
  echo "ok: built with the ofi transport (Libs.private names -lfabric, symmem-info says ofi on)"
fi

# Runs PROGRAM on 2 PEs under the installed oshrun, without LD_LIBRARY_PATH; every PE
# must report. With the ofi transport built in, it runs again with each PE its own
# (simulated) node, so that every put and barrier goes through libfabric's tcp provider,
# and every PE must log that path.
run2() {
  local out log
  out=$(env -u LD_LIBRARY_PATH SYMMEM_TIMEOUT=60 "$prefix/bin/oshrun" -n 2 "$1") ||
    fail "oshrun -n 2 $1 failed: $out"
  for pe in 0 1; do
    grep -qx "PE $pe of 2: ring ok" <<< "$out" || fail "$1: no line from PE $pe in: $out"
  done
  echo "ok: $(basename "$1") on 2 PEs under oshrun"
  [ "$over_ofi" = yes ] || return 0
  log=$work/ofi.log
  out=$(env -u LD_LIBRARY_PATH SYMMEM_TIMEOUT=60 SYMMEM_SIMULATE_NODES=2 \
    SYMMEM_REMOTE_TRANSPORT=ofi SYMMEM_OFI_PROVIDER='tcp;ofi_rxm' SYMMEM_DEBUG=info \
    "$prefix/bin/oshrun" -n 2 "$1" 2> "$log") ||
    fail "oshrun -n 2 $1 over ofi failed: $out $(cat "$log")"
  for pe in 0 1; do
    grep -qx "PE $pe of 2: ring ok" <<< "$out" || fail "$1 over ofi: no line from PE $pe in: $out"
    grep -q "PE $pe: ofi transport over tcp;ofi_rxm" "$log" ||
      fail "$1 over ofi: PE $pe did not log the ofi transport: $(cat "$log")"
  done
  echo "ok: $(basename "$1") on 2 simulated nodes over ofi (tcp;ofi_rxm)"
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
