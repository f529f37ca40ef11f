#!/usr/bin/env bash
# Runs an independent OpenSHMEM test suite, the unit tests and spec examples of
# openshmem-org/tests-sos (Sandia OpenSHMEM's tests), against symmem's C API.
#
#   capi/conformance/run-sos-tests.sh [--np N] [--nodes K] [--src DIR] [--profile P]
#
#   --np N       PEs per test (default 4); run again with 2 for the 2-PE form
#   --nodes K    simulate K nodes (SYMMEM_SIMULATE_NODES=K, the socket transport between)
#   --src DIR    an existing tests-sos checkout; default: cloned into target/tests-sos at
#                the pinned commit below (needs network)
#   --profile P  the build to test, target/P (default release: cargo build --release
#                -p symmem-capi -p symmem; debug is several times slower over sockets)
#
# Every C and C++ unit test and every spec example is built with symcc (C11, with
# -DENABLE_DEPRECATED_TESTS, so the deprecated names are exercised too) and run under
# symrun with a 300 s limit. Left out, with the reason printed: the Fortran tests (symmem
# has no Fortran API), the hybrid MPI examples (they need an MPI build of the suite), and
# mt_lock.c (a helper of mt_lock_test, built with it). Prints one line per test and a
# summary; exits 1 if any failed.
set -euo pipefail

PIN=ca9cb12b13a10eda4b94844ccabdc119f6b48f88
root=$(cd "$(dirname "$0")/../.." && pwd)
np=4
nodes=
src=
profile=release
while [ $# -gt 0 ]; do
  case "$1" in
    --np) np=$2; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    --src) src=$2; shift 2 ;;
    --profile) profile=$2; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run-sos-tests.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
bin=$root/target/$profile
for tool in symcc symrun; do
  [ -x "$bin/$tool" ] || {
    echo "run-sos-tests.sh: $bin/$tool is missing: run cargo build --profile $profile -p symmem-capi -p symmem" >&2
    exit 2
  }
done
if [ -z "$src" ]; then
  src=$root/target/tests-sos
  if [ ! -d "$src/.git" ]; then
    git clone -q https://github.com/openshmem-org/tests-sos "$src"
  fi
  git -C "$src" checkout -q "$PIN"
fi
[ -d "$src/test/unit" ] || { echo "run-sos-tests.sh: $src has no test/unit" >&2; exit 2; }

out=$root/target/sos-tests/$profile
mkdir -p "$out"
flags=(-O1 -DENABLE_DEPRECATED_TESTS -I"$src/test/include" -pthread)
built=()
build() { # name, compiler, sources...
  local name=$1 cc=$2; shift 2
  if SYMCC_CC=$cc "$bin/symcc" "${flags[@]}" "$@" -o "$out/$name" -lm >"$out/$name.build.log" 2>&1; then
    built+=("$name")
  else
    echo "$name: BUILD FAILED ($out/$name.build.log)"
    failed=$((failed + 1))
  fi
}
failed=0
for f in "$src"/test/unit/*.c; do
  name=$(basename "$f" .c)
  case "$name" in
    mt_lock) continue ;;
    mt_lock_test) build "$name" cc -std=gnu11 "$f" "$src/test/unit/mt_lock.c" ;;
    *) build "$name" cc -std=gnu11 "$f" ;;
  esac
done
for f in "$src"/test/unit/*.cpp; do
  build "$(basename "$f" .cpp)" "${CXX:-c++}" "$f"
done
for f in "$src"/test/spec-example/*.c; do
  name=spec_$(basename "$f" .c)
  case "$name" in
    *hybrid_mpi*) echo "$name: skipped (needs the suite's MPI build)"; continue ;;
  esac
  build "$name" cc -std=gnu11 "$f"
done
echo "skipped: $(cd "$src/test/unit" && ls ./*.f90 | wc -l) Fortran tests (symmem has no Fortran API)"

env=(SYMMEM_TIMEOUT=100)
[ -n "$nodes" ] && env+=(SYMMEM_SIMULATE_NODES="$nodes" SYMMEM_REMOTE_TRANSPORT=socket)
passed=0
for name in "${built[@]}"; do
  start=$(date +%s.%N)
  set +e
  env "${env[@]}" timeout 300 "$bin/symrun" -np "$np" "$out/$name" >"$out/$name.np$np.log" 2>&1
  rc=$?
  set -e
  secs=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
  if [ "$rc" = 0 ]; then
    passed=$((passed + 1))
    echo "$name: ok (${secs} s)"
  else
    failed=$((failed + 1))
    echo "$name: FAILED, exit $rc after ${secs} s ($out/$name.np$np.log)"
  fi
done
echo "tests-sos @ ${PIN:0:12} ($profile) on $np PEs${nodes:+ over $nodes simulated nodes}: $passed passed, $failed failed"
[ "$failed" = 0 ]
