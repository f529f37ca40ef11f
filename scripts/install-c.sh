#!/usr/bin/env bash
# Builds symmem's C library in release and installs it like an OpenSHMEM:
#   PREFIX/lib/libsymmem.so.X.Y.Z (soname libsymmem.so.X) and the links libsymmem.so.X and
#     libsymmem.so, PREFIX/lib/libsymmem.a, PREFIX/lib/pkgconfig/symmem.pc
#   PREFIX/include/shmem.h, shmemx.h, nvshmem.h, mpp/shmem.h
#   PREFIX/bin/symcc (with the installed paths), symrun, symmem-info, and oshcc -> symcc,
#     oshrun -> symrun
#   PREFIX/share/man/man1/symrun.1, symmem-info.1 (symmem-mangen writes them from the
#     tools' own command-line definitions), and oshrun.1 -> symrun.1
#
# Usage: bash scripts/install-c.sh [--prefix DIR] [--features LIST] [--man-dir DIR] [--no-build]
#   --prefix DIR     where to install (default: $PREFIX, else /usr/local)
#   --features LIST  the fabric transports to build in, comma-separated: ofi (libfabric:
#                    needs libfabric-dev), ib (ibverbs: needs cmake and libclang)
#   --man-dir DIR    install the man pages (*.1) of DIR instead of generating them
#   --no-build       install what an earlier build by this script left in the target directory
# DESTDIR, when set, is prepended to every installed path (for packaging); the files keep
# naming PREFIX. CARGO_TARGET_DIR is honoured.
set -euo pipefail
cd "$(dirname "$0")/.."

prefix=${PREFIX:-/usr/local}
man_dir=
features=
build=yes
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix=${2:?--prefix needs a directory}; shift 2 ;;
    --prefix=*) prefix=${1#--prefix=}; shift ;;
    --features) features=${2:?--features needs a list: ofi, ib}; shift 2 ;;
    --features=*) features=${1#--features=}; shift ;;
    --man-dir) man_dir=${2:?--man-dir needs a directory}; shift 2 ;;
    --man-dir=*) man_dir=${1#--man-dir=}; shift ;;
    --no-build) build=no; shift ;;
    -h|--help) sed -n '2,17s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "install-c.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$prefix" in
  /*) ;;
  *) echo "install-c.sh: --prefix must be an absolute path, not $prefix" >&2; exit 2 ;;
esac
# `--features ofi,ib` for the C library and for the tools (symmem-info reports what the
# library was built with).
capi_features=()
tool_features=()
for feature in ${features//,/ }; do
  case "$feature" in
    ofi | ib) ;;
    *) echo "install-c.sh: --features: unknown feature $feature (the C library has ofi and ib)" >&2; exit 2 ;;
  esac
  capi_features+=("$feature")
  tool_features+=("symmem/$feature")
done
if [ "$build" = no ] && [ -n "$features" ]; then
  echo "install-c.sh: --features goes with a build, not with --no-build (which installs the earlier build's features)" >&2
  exit 2
fi
if [ -n "$man_dir" ] && [ ! -d "$man_dir" ]; then
  echo "install-c.sh: --man-dir $man_dir is not a directory" >&2
  exit 2
fi

# The target directory and the C library's version, as cargo sees them.
metadata=$(cargo metadata --format-version 1 --no-deps | python3 -c '
import json, sys
m = json.load(sys.stdin)
capi = [p for p in m["packages"] if p["name"] == "symmem-capi"][0]
print(m["target_directory"], capi["version"])')
read -r target_dir version <<< "$metadata"
major=${version%%.*}
soname=libsymmem.so.$major

release=$target_dir/release
# The system libraries libsymmem.a needs (pkg-config's Libs.private, what symcc
# -static-symmem links): rustc lists them when it links the static library
# (`--print native-static-libs`), and the build keeps its list here.
static_libs_file=$release/libsymmem.a.libs
if [ "$build" = yes ]; then
  cargo build --release -p symmem --bin symrun --bin symmem-info \
    ${tool_features[*]:+--features "${tool_features[*]}"}
  cargo build --release -p symmem-mangen
  # (Output captured first: a pipe into sed would hide cargo's exit status.)
  capi_build=$(cargo rustc --release -p symmem-capi --lib \
    ${capi_features[*]:+--features "${capi_features[*]}"} -- --print native-static-libs 2>&1) || {
    echo "$capi_build" >&2
    exit 1
  }
  static_libs=$(sed -n 's/^note: native-static-libs: //p' <<< "$capi_build" | tail -n 1)
  if [ -z "$static_libs" ]; then
    echo "$capi_build" >&2
    echo "install-c.sh: rustc listed no native-static-libs for libsymmem.a (above)" >&2
    exit 1
  fi
  echo "$static_libs" > "$static_libs_file"
fi
for built in libsymmem_capi.so libsymmem_capi.a symrun symmem-info symmem-mangen libsymmem.a.libs; do
  if [ ! -f "$release/$built" ]; then
    echo "install-c.sh: $release/$built is missing: build in release first with this script (drop --no-build)" >&2
    exit 1
  fi
done
static_libs=$(cat "$static_libs_file")
# (Output captured first: grep -q may quit before readelf finishes, failing the pipe.)
dynamic=$(readelf -d "$release/libsymmem_capi.so")
if ! grep -q "SONAME.*\[$soname\]" <<< "$dynamic"; then
  echo "install-c.sh: $release/libsymmem_capi.so does not have the soname $soname" >&2
  exit 1
fi

dest=${DESTDIR:-}$prefix
libdir=$prefix/lib
includedir=$prefix/include
mkdir -p "$dest/lib/pkgconfig" "$dest/include/mpp" "$dest/bin"

# The libraries.
install -m 755 "$release/libsymmem_capi.so" "$dest/lib/libsymmem.so.$version"
ln -sfn "libsymmem.so.$version" "$dest/lib/$soname"
ln -sfn "$soname" "$dest/lib/libsymmem.so"
install -m 644 "$release/libsymmem_capi.a" "$dest/lib/libsymmem.a"

# The headers: shmemx.h, nvshmem.h and mpp/shmem.h include shmem.h.
install -m 644 capi/include/shmem.h capi/include/shmemx.h capi/include/nvshmem.h "$dest/include/"
install -m 644 capi/include/mpp/shmem.h "$dest/include/mpp/"

# pkg-config. Libs.private: the system libraries libsymmem.a needs, as rustc listed them
# above (symcc -static-symmem links the same); scripts/test-c-install.sh links with them.
cat > "$dest/lib/pkgconfig/symmem.pc" <<EOF
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: symmem
Description: OpenSHMEM 1.5 (shmem.h) and the NVSHMEM host API (nvshmem.h) over symmem's symmetric-memory runtime
Version: $version
Cflags: -I\${includedir}
Libs: -L\${libdir} -lsymmem
Libs.private: $static_libs
EOF

# The compiler wrapper, with the installed paths, and the launcher.
sed -e "s|@INCLUDE@|$includedir|g" -e "s|@LIBDIR@|$libdir|g" -e "s|@STATIC_LIBS@|$static_libs|g" \
  capi/symcc.in > "$dest/bin/symcc"
chmod 755 "$dest/bin/symcc"
install -m 755 "$release/symrun" "$release/symmem-info" "$dest/bin/"
# OpenSHMEM's names for them.
ln -sfn symcc "$dest/bin/oshcc"
ln -sfn symrun "$dest/bin/oshrun"

# The man pages of the installed tools, from the definitions they parse their command
# lines with (symmem-perf's page is not installed: the benchmark is not).
mkdir -p "$dest/share/man/man1"
if [ -n "$man_dir" ]; then
  pages=("$man_dir"/*.1)
  if [ ! -e "${pages[0]}" ]; then
    echo "install-c.sh: no *.1 page in $man_dir" >&2
    exit 1
  fi
else
  generated=$(mktemp -d)
  trap 'rm -rf "$generated"' EXIT
  "$release/symmem-mangen" "$generated" > /dev/null
  pages=("$generated/symrun.1" "$generated/symmem-info.1")
fi
install -m 644 "${pages[@]}" "$dest/share/man/man1/"
if [ -e "$dest/share/man/man1/symrun.1" ]; then
  ln -sfn symrun.1 "$dest/share/man/man1/oshrun.1"
fi

echo "installed symmem $version's C library under $dest"
case "$libdir" in
  /usr/lib | /usr/local/lib)
    # The loader finds a new library in a system directory through its cache.
    if [ -z "${DESTDIR:-}" ] && [ "$(id -u)" = 0 ]; then
      ldconfig
    else
      echo "run ldconfig as root, so that the loader finds $soname in $libdir"
    fi
    ;;
  *) echo "programs linked with pkg-config find $soname at run time with -Wl,-rpath,$libdir (symcc and oshcc add it) or LD_LIBRARY_PATH=$libdir" ;;
esac
