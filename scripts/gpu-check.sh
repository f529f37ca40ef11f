#!/usr/bin/env bash
# The GPU check, in two halves, for GPU nodes without a Rust toolchain or network.
#
#   bash scripts/gpu-check.sh bundle     on any x86-64 machine (no GPU needed): builds every
#                                        GPU test program, example and perftest, with the
#                                        kernels' PTX embedded, into target/gpu-bundle/ and
#                                        packs it as target/gpu-bundle.tar.gz (what to copy:
#                                        tar -C target -xzf target/gpu-bundle.tar.gz there)
#   bash target/gpu-bundle/gpu-check.sh run [--mps] [--perf|--perf-first]
#                                        (GPU_CHECK_TIMEOUT: seconds per check, 300;
#                                        GPU_CHECKS: an extended regex; only checks whose
#                                        name matches it run, 'none' runs none;
#                                        GPU_PERF_ONLY: metrics for symmem-perf --only;
#                                        GPU_PERF_ROUNDS: rounds of the perf rows, 1)
#                                        on a machine with an NVIDIA GPU and only the driver:
#                                        runs the checks on GPU PEs (SYMMEM_DEVICE=cuda) and
#                                        prints one "N passed, N failed" line.
#
# --perf also runs symmem-perf on GPU PEs and, where nvcc and NVSHMEM (the
# nvidia-nvshmem-cu13 wheel) are found, the same rows with NVSHMEM, and prints them side
# by side with the copy limit, then python/bench.py on GPU PEs beside torch's
# _symmetric_memory and NVSHMEM4Py (its wheels are in the bundle); --perf-first does so
# before the checks (a run cut short still has its numbers).
# --mps starts a private MPS daemon first (so kernels of several PEs on one GPU run at
# the same time rather than taking turns) and stops it at the end.
set -uo pipefail

bundle() {
  set -e
  cd "$(dirname "$0")/.."
  local out=target/gpu-bundle
  # A bundle without PTX would only fail on the GPU machine: require it here.
  export SYMMEM_REQUIRE_PTX=1
  # Machine code for the H100/H200 beside the PTX: the driver's JIT of the test kernels
  # (7.6 MB of PTX) took over 75 s per process on an H100, so every check that loaded
  # them timed out (2026-11-26). Other GPUs still JIT the PTX.
  export SYMMEM_SASS_ARCH=${SYMMEM_SASS_ARCH:-sm_90}
  cargo build --release --locked \
    --bin symrun --bin symmem-test-pe --bin symmem-perf \
    -p symmem -p symmem-test-pe -p symmem-perf
  cargo build --release --locked -p symmem-device-tests --bins
  cargo build --release --locked -p symmem --example device_pipeline --example hello --example moe_dispatch
  cargo build --release --locked -p symmem --example put_signal_pipeline --example transpose
  cargo build --release --locked -p symmem-example-kernel-library
  rm -rf "$out"
  mkdir -p "$out/bin"
  local b
  for b in symrun symmem-test-pe symmem-perf device-test-pe gpu_check_pe; do
    cp "target/release/$b" "$out/bin/"
  done
  cp target/release/examples/device_pipeline target/release/examples/hello target/release/examples/moe_dispatch "$out/bin/"
  cp target/release/examples/put_signal_pipeline target/release/examples/transpose "$out/bin/"
  strip "$out"/bin/*
  cp scripts/gpu-check.sh "$out/gpu-check.sh"
  mkdir -p "$out/peers"
  cp benches/peers/nvshmem_perf.cu benches/peers/table.py "$out/peers/"
  # The Python package: its wheel (maturin, from the venv test-all.sh makes, else a new
  # one), pytest's wheels for a machine without network, the example kernels as a kernel
  # library, and the suites and examples. The maturin command is test-all.sh's (its Python
  # step tests this release wheel, installed): after that step cargo finds the extension
  # built, and maturin only packs the wheel again (2 s).
  local pyvenv=${SYMMEM_TOOLS_DIR:-${XDG_CACHE_HOME:-${HOME:-$PWD/target}/.cache}/symmem}/python-venv
  if [ ! -x "$pyvenv/bin/maturin" ]; then
    python3 -m venv "$pyvenv"
    "$pyvenv/bin/python" -m pip install --quiet --disable-pip-version-check maturin
  fi
  mkdir -p "$out/python/wheels"
  (cd python && CARGO_TARGET_DIR=../target "$pyvenv/bin/maturin" build --release --locked --quiet --out "../$out/python/wheels")
  "$pyvenv/bin/python" -m pip download --quiet --disable-pip-version-check --only-binary :all: \
    --dest "$out/python/wheels" pytest
  cp target/release/libsymmem_example_kernel_library.so "$out/python/"
  strip "$out/python/libsymmem_example_kernel_library.so"
  cp -r python/tests python/examples python/bench.py python/bench_gpu_peers.py "$out/python/"
  # NVSHMEM4Py and the CUDA Python packages it needs, for bench.py's GPU peer rows, for the
  # lent machines' python3 (3.12; NVSHMEM itself is there as nvidia-nvshmem-cu13).
  mkdir -p "$out/python/peer-wheels"
  "$pyvenv/bin/python" -m pip download --quiet --disable-pip-version-check --only-binary :all: --no-deps \
    --python-version 3.12 --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_34_x86_64 --dest "$out/python/peer-wheels" \
    nvshmem4py-cu13 "cuda-bindings>=13,<14" "cuda-core>=0.5" "cuda-pathfinder>=1.2.3"
  git rev-parse HEAD > "$out/COMMIT" 2>/dev/null || echo unknown > "$out/COMMIT"
  # What travels to the GPU machine is the archive (the device tool carries at most 64 MiB;
  # the binaries' embedded PTX is text and compresses about 4x).
  tar -C "$(dirname "$out")" -czf "$out.tar.gz" "$(basename "$out")"
  local size packed
  size=$(du -sm "$out" | cut -f1)
  packed=$(du -sm "$out.tar.gz" | cut -f1)
  ls -l "$out/bin"
  echo "bundle: $out, ${size} MiB; $out.tar.gz, ${packed} MiB; commit $(cat "$out/COMMIT")"
  if [ "$packed" -ge 60 ]; then
    echo "bundle archive is ${packed} MiB; it must stay under 60 MiB" >&2
    exit 1
  fi
}

run() {
  local here bin mps=0
  here="$(cd "$(dirname "$0")" && pwd)"
  bin="$here/bin"
  local perf=0 a
  for a in "$@"; do
    case "$a" in
      --mps) mps=1 ;;
      --perf) perf=1 ;;
      --perf-first) perf=2 ;;
      *) echo "unknown option $a" >&2; exit 2 ;;
    esac
  done
  if [ ! -x "$bin/gpu_check_pe" ]; then
    echo "no bundle at $here (run 'bash scripts/gpu-check.sh bundle' first, then this script from target/gpu-bundle)" >&2
    exit 2
  fi
  echo "=== symmem GPU check, commit $(cat "$here/COMMIT" 2>/dev/null), $(date -u +%Y-%m-%dT%H:%MZ)"
  if ! nvidia-smi -L; then
    echo "SKIPPED: nvidia-smi finds no GPU; the GPU check needs one" >&2
    echo "0 passed, 0 failed (skipped: no GPU)"
    exit 3
  fi
  nvidia-smi --query-gpu=name,driver_version,compute_mode,memory.total --format=csv,noheader
  local gpus
  gpus=$(nvidia-smi -L | wc -l)
  if [ "$mps" = 1 ]; then
    export CUDA_MPS_PIPE_DIRECTORY=/tmp/symmem-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/symmem-mps-log
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    if nvidia-cuda-mps-control -d; then
      echo "MPS daemon started (pipe $CUDA_MPS_PIPE_DIRECTORY)"
      trap 'echo quit | nvidia-cuda-mps-control; echo "MPS daemon stopped"' EXIT
    else
      echo "MPS could not be started; running without it"
      unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    fi
  fi
  export SYMMEM_DEVICE=cuda SYMMEM_TIMEOUT=${SYMMEM_TIMEOUT:-120} SYMMEM_BOOTSTRAP_TIMEOUT=${SYMMEM_BOOTSTRAP_TIMEOUT:-120}
  export SYMMEM_SYMMETRIC_SIZE=${SYMMEM_SYMMETRIC_SIZE:-256M}
  local passed=0 failed=0 failures=()
  if [ "$perf" = 2 ]; then
    perf_rows "$here" "$bin"
  fi
  check() {
    local name=$1
    shift
    local t0 rc log ms
    if [ -n "${GPU_CHECKS:-}" ] && ! grep -Eq -- "$GPU_CHECKS" <<< "$name"; then
      return 0
    fi
    t0=$(date +%s%N)
    log=$(timeout -k 5 "${GPU_CHECK_TIMEOUT:-300}" "$@" 2>&1)
    rc=$?
    if [ $rc = 124 ] || [ $rc = 137 ]; then
      # A client killed mid-kernel leaves the MPS server failing the next clients'
      # context creation (CUDA_ERROR_LAUNCH_FAILED): clear out the PEs and restart it.
      pkill -9 -f "^$bin/" 2>/dev/null
      sleep 1
      if [ "$mps" = 1 ]; then
        echo quit | nvidia-cuda-mps-control
        sleep 2
        nvidia-cuda-mps-control -d || echo "MPS could not be restarted"
      fi
    fi
    ms=$((($(date +%s%N) - t0) / 1000000))
    if [ $rc = 0 ]; then
      passed=$((passed + 1))
      printf 'PASS %-48s %6d ms\n' "$name" "$ms"
    else
      failed=$((failed + 1))
      failures+=("$name")
      printf 'FAIL %-48s %6d ms (exit %d)\n' "$name" "$ms" "$rc"
    fi
    echo "$log" | sed 's/^/    /' | tail -n "${GPU_CHECK_LOG_LINES:-12}"
  }
  local pes_list="2"
  [ "$gpus" -ge 2 ] && pes_list="2 4"
  check "bad module (1 PE)" "$bin/gpu_check_pe" --pes 1 bad_module
  check "cooperative launch: occupancy limit (2 PEs)" "$bin/gpu_check_pe" --pes 2 cooperative
  check "device put to a PE that does not exist traps (2 PEs)" "$bin/gpu_check_pe" --pes 2 trap
  check "a kernel panic names file:line, block and thread (2 PEs)" "$bin/gpu_check_pe" --pes 2 panic
  check "device printf prints each PE's line (2 PEs)" bash -c "out=\$(\"$bin/gpu_check_pe\" --pes 2 printf) && echo \"\$out\" && grep -qx 'printf: PE 0: x=7 y=2.50 text' <<< \"\$out\" && grep -qx 'printf: PE 1: x=7 y=2.50 text' <<< \"\$out\""
  check "device ops to another node through the GPU proxy channel (2 nodes)" env SYMMEM_SIMULATE_NODES=2 "$bin/gpu_check_pe" --pes 2 remote
  local n
  for n in $pes_list; do
    check "IPC mapping + device put_signal ($n PEs)" "$bin/gpu_check_pe" --pes "$n" ipc
    check "stream-ordered put_signal vs consumer kernel ($n PEs)" "$bin/gpu_check_pe" --pes "$n" stream
    check "device_pipeline example ($n PEs)" "$bin/device_pipeline" --pes "$n"
    # Its table (device path vs host alltoall, GPU numbers) is in the log lines shown.
    check "moe_dispatch example ($n PEs)" env SYMMEM_SYMMETRIC_SIZE=1G "$bin/moe_dispatch" --pes "$n" --tokens 1024,4096 --experts 8 --hidden 512
    # Each PE its own node: runs staged and sent as one put each through the GPU proxy.
    check "moe_dispatch example across simulated nodes ($n PEs)" env SYMMEM_SIMULATE_NODES="$n" SYMMEM_SYMMETRIC_SIZE=1G "$bin/moe_dispatch" --pes "$n" --tokens 1024 --experts 8 --hidden 512
    # Deterministic mode with drops: each step against the host model of the (source PE,
    # token) receive order; the digest lines should match a CPU-PE run's.
    check "moe_dispatch --deterministic with drops ($n PEs)" env SYMMEM_SYMMETRIC_SIZE=1G "$bin/moe_dispatch" --pes "$n" --tokens 1024 --experts 8 --hidden 512 --mode device --deterministic --capacity 256 --on-overflow drop --skew 2
    check "put_signal_pipeline example, GPU numbers ($n PEs)" "$bin/put_signal_pipeline" --pes "$n" --chunk-kib 64,1024 --chunks 64
    check "transpose example, GPU numbers ($n PEs)" "$bin/transpose" --pes "$n" --sizes 1024,2048 --iters 5
  done
  # The host-API suite on GPU PEs (the same scenarios CI runs on CPU PEs).
  local api
  for api in rma put_signal signals wait_test wait_arrays atomics fence_quiet barrier_sync errors stress teams team_errors collectives collective_errors stream_collectives stream_collective_errors stream_alltoallv stream_rma litmus align; do
    check "host API on GPU PEs: $api (2 PEs)" env SYMMEM_TEST_EXPECT_PES=2 "$bin/symrun" -n 2 "$bin/symmem-test-pe" "api_$api"
  done
  # The same scenarios with each PE its own simulated node: GPU heaps served by the socket
  # transport (staged copies, helper kernels for AMOs and signals).
  for api in rma put_signal signals wait_test atomics fence_quiet barrier_sync teams collectives stream_alltoallv stream_rma litmus; do
    check "host API on GPU PEs over sockets: $api (2 nodes)" env SYMMEM_TEST_EXPECT_PES=2 SYMMEM_SIMULATE_NODES=2 "$bin/symrun" -n 2 "$bin/symmem-test-pe" "api_$api"
  done
  if "$bin/device-test-pe" --list-gpu >/dev/null 2>&1; then
    local s
    for s in $("$bin/device-test-pe" --list-gpu); do
      if [ "$s" = silent_peer ]; then
        # The deadline of device waits: a 2 s one, which the scenario expects to expire.
        check "device ops: $s (2 PEs, SYMMEM_TIMEOUT=2)" env SYMMEM_TIMEOUT=2 "$bin/device-test-pe" --pes 2 "$s"
      else
        check "device ops: $s (2 PEs)" "$bin/device-test-pe" --pes 2 "$s"
      fi
    done
  else
    echo "NOTE: this device-test-pe has no --list-gpu: device-op suite not run on the GPU"
  fi
  # The device-op suite with each PE its own simulated node: every device operation to
  # the partner goes through the GPU proxy channel (mapped ring, staged payloads) and the
  # socket transport; proxy_flood fills a 2-slot ring (back-pressure).
  if "$bin/device-test-pe" --list-gpu-2-nodes >/dev/null 2>&1; then
    local slots
    for s in $("$bin/device-test-pe" --list-gpu-2-nodes); do
      slots=1024
      [ "$s" = proxy_flood ] && slots=2
      check "device ops through the proxy: $s (2 nodes)" env SYMMEM_SIMULATE_NODES=2 SYMMEM_PROXY_SLOTS=$slots "$bin/device-test-pe" --pes 2 "$s"
    done
  else
    echo "NOTE: this device-test-pe has no --list-gpu-2-nodes: device ops through the GPU proxy channel not run"
  fi
  python_checks "$here"
  if [ "$perf" = 1 ]; then
    perf_rows "$here" "$bin"
  fi
  echo
  echo "$passed passed, $failed failed"
  [ "$failed" = 0 ] || { printf 'failed: %s\n' "${failures[@]}"; return 1; }
}

# The Python package on GPU PEs, where the machine's python3 has torch: the bundle's wheel
# and pytest installed (from the bundle, no network) into a folder on PYTHONPATH, so that
# python3 keeps every package it finds today (a venv made from it, even with
# --system-site-packages, hid torch and numpy on the lent H100, whose python3 is itself a
# venv's); pytest from the bundle only where python3 has none. Sets python_site (empty when
# python3 has no torch or the install failed); installs once per run.
python_install() {
  local here=$1
  [ -n "${python_site+set}" ] && return 0
  python_site=""
  if ! python3 -c 'import torch' 2>/dev/null; then
    echo "NOTE: python3 has no torch here: the Python checks and rows are not run"
    return 0
  fi
  python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available())'
  local site wheels=("$here"/python/wheels/symmem-*.whl)
  site=$(mktemp -d)/site
  python3 -c 'import pytest' 2>/dev/null || wheels=("$here"/python/wheels/*.whl)
  if ! python3 -m pip install --quiet --no-index --no-deps --target "$site" "${wheels[@]}"; then
    failed=$((failed + 1))
    failures+=("Python package install")
    echo "FAIL Python package install (the bundle's wheels into $site)"
    return 0
  fi
  python_site=$site
}

# The suites on CUDA tensors, and the MoE example's Rust kernels driven from torch.
python_checks() {
  local here=$1
  python_install "$here"
  [ -n "$python_site" ] || return 0
  local library="$here/python/libsymmem_example_kernel_library.so"
  check "Python suite on GPU PEs (2 PEs)" env PYTHONPATH="$python_site${PYTHONPATH:+:$PYTHONPATH}" \
    SYMMEM_KERNEL_LIBRARY="$library" python3 -m symmem.run -n 2 -m pytest "$here/python/tests" -q -p no:cacheprovider
  check "Python MoE example, Rust kernels from torch (2 PEs)" env PYTHONPATH="$python_site${PYTHONPATH:+:$PYTHONPATH}" \
    python3 -m symmem.run -n 2 "$here/python/examples/moe.py" "$library"
  # A Triton kernel on the rendezvous handle's pointer arrays (python/tests/test_triton.py,
  # in the suite above, runs it too, and pairs a Triton barrier with the host's).
  if python3 -c "import triton" 2>/dev/null; then
    check "Python Triton one-shot all-reduce example (2 PEs)" env PYTHONPATH="$python_site${PYTHONPATH:+:$PYTHONPATH}" \
      python3 -m symmem.run -n 2 "$here/python/examples/triton_allreduce.py"
  else
    echo "NOTE: python3 has no triton: the Triton example and test_triton.py's kernels did not run"
  fi
}

# python/bench.py on GPU PEs: symmem from Python beside torch's _symmetric_memory and
# NVSHMEM4Py. NVSHMEM4Py and the CUDA Python packages come from the bundle where python3
# lacks them or has a version NVSHMEM4Py 0.4 cannot use (each checked alone: torch may
# bring cuda-bindings already, perhaps a 12.x one).
python_bench() {
  local here=$1
  python_install "$here"
  [ -n "$python_site" ] || return 0
  local w wheels=() usable
  for w in "nvshmem4py_cu13:import nvshmem.core" \
    "cuda_bindings:import cuda.bindings as m; assert int(m.__version__.split('.')[0]) >= 13" \
    "cuda_core:import cuda.core as m; assert tuple(map(int, m.__version__.split('.')[:2])) >= (0, 5)" \
    "cuda_pathfinder:import cuda.pathfinder as m; assert tuple(map(int, m.__version__.split('.')[:2])) >= (1, 2)"; do
    usable=${w#*:}
    python3 -c "$usable" 2>/dev/null || wheels+=("$here"/python/peer-wheels/"${w%%:*}"-*.whl)
  done
  if [ "${#wheels[@]}" -gt 0 ] && ! python3 -m pip install --quiet --no-index --no-deps --target "$python_site" "${wheels[@]}"; then
    echo "NOTE: NVSHMEM4Py could not be installed from the bundle: bench.py reports it missing"
  fi
  echo
  echo "=== python/bench.py on GPU PEs (2 PEs), beside torch _symmetric_memory and NVSHMEM4Py"
  NVSHMEM_IGNORE_CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=1 PYTHONPATH="$python_site${PYTHONPATH:+:$PYTHONPATH}" \
    timeout "${GPU_PERF_TIMEOUT:-600}" python3 -m symmem.run -n 2 "$here/python/bench.py" --iters "${GPU_PY_ITERS:-4000}" --reps 5 ||
    echo "python/bench.py failed (exit $?)"
}

# symmem-perf on GPU PEs, NVSHMEM's numbers for the same rows, and the table.
perf_rows() {
  local here=$1 bin=$2 work
  work=$(mktemp -d)
  echo
  echo "=== performance on GPU PEs (2 PEs on GPU 0)"
  local nvs inc lib nvcc_pid=""
  nvs=$(python3 -c 'import nvidia.nvshmem, os; print(list(nvidia.nvshmem.__path__)[0])' 2>/dev/null || true)
  if command -v nvcc >/dev/null && [ -n "$nvs" ] && [ -d "$nvs/include" ]; then
    inc="$nvs/include"
    lib="$nvs/lib"
    # Compiled while symmem-perf runs (on the CPUs; the GPU rows are not disturbed much).
    nvcc -O2 -rdc=true -arch=sm_90 -I"$inc" "$here/peers/nvshmem_perf.cu" -o "$work/nvshmem_perf" \
      "$lib/libnvshmem_device.a" -L"$lib" -l:libnvshmem_host.so.3 -Xlinker -rpath,"$lib" -lcuda \
      > "$work/nvcc.log" 2>&1 &
    nvcc_pid=$!
  fi
  local only=()
  [ -n "${GPU_PERF_ONLY:-}" ] && only=(--only "$GPU_PERF_ONLY")
  # NVSHMEM's program: compiling (nvcc_pid), built (nvshmem=1), or not there (empty).
  local nvshmem=""
  [ -z "$nvcc_pid" ] && echo "NVSHMEM comparison skipped: needs nvcc and the nvidia-nvshmem-cu13 wheel (python3 -c 'import nvidia.nvshmem')"
  # GPU_PERF_ROUNDS rounds (default 1), each symmem-perf then NVSHMEM, each process with
  # fresh allocations: a row that moves between rounds depends on where its words landed.
  local round rounds=${GPU_PERF_ROUNDS:-1}
  for round in $(seq 1 "$rounds"); do
    [ "$rounds" -gt 1 ] && echo "--- round $round of $rounds"
    local sj="$work/symmem-$round.json" nj="$work/nvshmem-$round.json"
    # 1 GiB of heap: the rotating bandwidth rows move through two 256 MiB buffers per PE.
    SYMMEM_SYMMETRIC_SIZE=1G timeout "${GPU_PERF_TIMEOUT:-600}" "$bin/symmem-perf" --pes 2 --json --reps 5 --iters "${GPU_PERF_ITERS:-5000}" "${only[@]}" > "$sj" 2> "$work/symmem-$round.err" ||
      { echo "symmem-perf failed:"; tail -5 "$work/symmem-$round.err"; }
    if [ "$round" = 1 ]; then
      # The stream rows again with helper kernels instead of stream memory operations.
      SYMMEM_STREAM_MEMOPS=0 timeout "${GPU_PERF_TIMEOUT:-600}" "$bin/symmem-perf" --pes 2 --json --reps 5 --iters "${GPU_PERF_ITERS:-5000}" \
        --only put_signal_pingpong_latency 2> /dev/null | grep '"stream"' | sed 's/^/without stream memops: /'
    fi
    if [ -n "$nvcc_pid" ]; then
      if wait "$nvcc_pid"; then
        nvshmem=1
      else
        echo "NVSHMEM comparison not built (nvcc failed):"
        tail -20 "$work/nvcc.log"
      fi
      nvcc_pid=""
    fi
    if [ -n "$nvshmem" ]; then
      rm -f "$work/uid"
      # Under MPS, NVSHMEM allows its full API to several PEs on one GPU only if their
      # MPS thread percentages add up to 100 or this is set; symmem's PEs run unlimited
      # too, so the comparison is like for like.
      export NVSHMEM_IGNORE_CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=1
      ( timeout "${GPU_PERF_TIMEOUT:-600}" "$work/nvshmem_perf" 0 2 "$work/uid" > "$nj" 2> "$work/nvshmem0-$round.err" ) &
      local p0=$!
      timeout "${GPU_PERF_TIMEOUT:-600}" "$work/nvshmem_perf" 1 2 "$work/uid" > /dev/null 2> "$work/nvshmem1-$round.err"
      wait $p0 || { echo "nvshmem_perf failed:"; tail -n 5 "$work/nvshmem0-$round.err" "$work/nvshmem1-$round.err"; }
    fi
    # The side-by-side table of benches/peers (the same script as the host comparison; its
    # --gpu rows can be merged with a host run's bench-results/peers-*.json, see its --help).
    local gpu_json=("$sj")
    [ -s "$nj" ] && gpu_json+=("$nj")
    if [ -s "$sj" ]; then
      python3 "$here/peers/table.py" --gpu "${gpu_json[@]}"
    else
      echo "no symmem-perf rows: no table"
    fi
  done
  python_bench "$here"
  if [ -n "${GPU_CHECK_RESULTS:-}" ]; then mkdir -p "$GPU_CHECK_RESULTS" && cp "$work"/*.json "$work"/*.err "$GPU_CHECK_RESULTS/" 2>/dev/null; fi
}

case "${1:-}" in
  bundle) bundle ;;
  run) shift; run "$@" ;;
  *) echo "usage: $0 bundle | run [--mps]" >&2; exit 2 ;;
esac
