#!/usr/bin/env bash
# symmem side by side with its peers on this machine, 2 PEs/ranks/processes, in one run:
#
#   - symmem-perf (host initiator): p2p rows, and socket rows (--transport socket);
#   - Open MPI's OpenSHMEM (shmem_perf.c, oshrun --mca osc ^rdma);
#   - MPI-3 RMA passive target (MPI_Put / MPI_Get / MPI_Fetch_and_op + MPI_Win_flush) and
#     MPI two-sided (send/recv ping-pong, MPI_Barrier, MPI_Isend stream): mpi_perf.c,
#     over shared memory and again over Open MPI's TCP BTL;
#   - bare TCP over loopback (tcp_pingpong.c): ping-pong and stream;
#   - the physical limits: a C flag ping-pong through shared memory (flag_pingpong.c) and
#     one core's memcpy bandwidth (memcpy_bw.c);
#   - with --ofi, then ofi.sh: symmem over libfabric (tcp;ofi_rxm) beside its socket
#     transport, Sandia OpenSHMEM on the same provider and libfabric's own floor (fabtests),
#     in a table of its own (see ofi.sh for what it needs).
#
# Prints one table (table.py: metric, size, symmem, each peer with the ratio symmem/peer;
# lower is better for latency, higher for bandwidth) and writes OUT/peers-<UTC date>.json
# (the table and every row) and OUT/peers-<UTC date>.svg (a chart).
#
#   bash benches/peers/run.sh [--quick] [--rounds N] [--perf PATH] [--out DIR] [--ofi]
#
#   --quick      smoke run: few iterations, small byte budgets, fewer sizes (seconds, not
#                minutes; the values mean little)
#   --rounds N   run every program N times, round by round (default 1); each cell is then
#                the median over the rounds and each ratio the median of the rounds' ratios,
#                with their range: on a VM whose speed drifts over minutes, only ratios
#                taken within one round compare like with like
#   --perf PATH  use this symmem-perf binary instead of building it with cargo --release
#   --out DIR    where the JSON and the chart go (default bench-results/ in the repository)
#   --ofi        also run ofi.sh (one run; --quick passed on)
#
# Needs a C compiler, Open MPI (mpicc, mpirun, oshcc, oshrun), python3, and cargo unless
# --perf is given. Nothing else heavy should run meanwhile: every value is a median over
# repetitions of one run on a shared machine. Each program is stopped after $PEERS_TIMEOUT
# seconds (default 900; quick 180) so that nothing hangs.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"

quick=0 perf="" out="$root/bench-results" ofi=0 rounds=1
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --perf) perf="${2:?--perf needs the path of a symmem-perf binary}"; shift ;;
    --out) out="${2:?--out needs a directory}"; shift ;;
    --ofi) ofi=1 ;;
    --rounds) rounds="${2:?--rounds needs a number}"; shift ;;
    *) echo "usage: $0 [--quick] [--rounds N] [--perf PATH] [--out DIR] [--ofi]" >&2; exit 2 ;;
  esac
  shift
done

case "$rounds" in
  '' | *[!0-9]* | 0) echo "run.sh: --rounds $rounds: give a whole number of rounds, 1 or more" >&2; exit 2 ;;
esac

# Iterations per repetition: `iters` over shared memory, `sock_iters` over TCP, where one
# operation costs 100 to 1000 times more.
if [ "$quick" = 1 ]; then
  iters=300 sock_iters=100 bytes=$((1 << 20)) limit=${PEERS_TIMEOUT:-180}
  p2p_sizes=4096,262144 sock_sizes=262144 perf_opts=(--quick)
else
  iters=100000 sock_iters=5000 bytes=$((256 << 20)) limit=${PEERS_TIMEOUT:-900}
  p2p_sizes=4096,32768,262144,2097152,16777216 sock_sizes=262144,2097152,16777216 perf_opts=()
fi

# Open MPI's own compiler and launcher, where MPICH is installed beside it.
pick() { if command -v "$1.openmpi" >/dev/null; then echo "$1.openmpi"; else echo "$1"; fi; }
mpicc=${MPICC:-$(pick mpicc)} mpirun=$(pick mpirun) oshcc=oshcc oshrun=oshrun
for tool in cc "$mpicc" "$mpirun" "$oshcc" "$oshrun" python3 timeout; do
  command -v "$tool" >/dev/null || { echo "run.sh: $tool not found (the peers need Open MPI, a C compiler and python3)" >&2; exit 3; }
done
[ -n "$perf" ] || command -v cargo >/dev/null || { echo "run.sh: cargo not found (or pass --perf PATH)" >&2; exit 3; }

# Open MPI refuses to run as root without these; oversubscription allows small machines.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

if [ -n "$perf" ]; then
  [ -x "$perf" ] || { echo "run.sh: --perf $perf is not an executable file" >&2; exit 2; }
  perf="$(cd "$(dirname "$perf")" && pwd)/$(basename "$perf")"
fi
mkdir -p "$out"
out="$(cd "$out" && pwd)"

build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
cd "$here"
cc -O2 -Wall -Wextra -Werror flag_pingpong.c -o "$build/flag_pingpong"
cc -O2 -Wall -Wextra -Werror memcpy_bw.c -o "$build/memcpy_bw"
cc -O2 -Wall -Wextra -Werror tcp_pingpong.c -o "$build/tcp_pingpong"
"$oshcc" -O2 -Wall -Wextra -Werror shmem_perf.c -o "$build/shmem_perf"
"$mpicc" -O2 -Wall -Wextra -Werror mpi_perf.c -o "$build/mpi_perf"
if [ -z "$perf" ]; then
  (cd "$root" && cargo build --quiet --release --bin symmem-perf)
  perf="$root/target/release/symmem-perf"
fi

rows="$build/rows.jsonl"
: >"$rows"
# Runs one program (bounded by `limit` seconds), tagging its JSON lines with `source` and
# the round; its other output goes to stderr. A program that fails stops the run, naming it.
round=1
measure() {
  local source=$1
  shift
  echo "# round $round, $source: $*" >&2
  local log="$build/$source.out"
  if ! timeout -k 10 "$limit" "$@" >"$log"; then
    echo "run.sh: $source failed or ran past ${limit}s: $*" >&2
    cat "$log" >&2
    exit 1
  fi
  grep '^{' "$log" | sed "s/^{/{\"source\":\"$source\",\"round\":$round,/" >>"$rows" || true
  grep -v '^{' "$log" >&2 || true
}

started=$(date -u +%FT%TZ)
load=$(cut -d' ' -f1-3 /proc/loadavg)
symmem_metrics=put_signal_pingpong_latency,put_latency,get_latency,atomic_fetch_add_latency,put_bw,get_bw,barrier_all_latency
for round in $(seq 1 "$rounds"); do
  measure limits-flags "$build/flag_pingpong" "$iters"
  measure limits-memcpy "$build/memcpy_bw" "$iters" "$bytes" "$p2p_sizes"
  # Alone, as the C programs run: interleaved with its memcpy baseline, a 16 MiB put moved
  # 20-25% less.
  measure symmem-p2p "$perf" --pes 2 --json --no-baseline "${perf_opts[@]}" --iters "$iters" \
    --bytes "$bytes" --only "$symmem_metrics"
  measure symmem-socket "$perf" --pes 2 --transport socket --json "${perf_opts[@]}" --iters "$sock_iters" \
    --bytes "$bytes" --only "$symmem_metrics"
  measure oshmem "$oshrun" --mca osc ^rdma -np 2 "$build/shmem_perf" "$iters" "$bytes" "$p2p_sizes"
  measure mpi "$mpirun" -np 2 "$build/mpi_perf" "$iters" p2p "$bytes" "$p2p_sizes"
  # ob1 + the TCP BTL (not UCX, not shared memory) for sends; pt2pt one-sided over it.
  measure mpi-tcp "$mpirun" --mca pml ob1 --mca btl tcp,self --mca osc pt2pt -np 2 \
    "$build/mpi_perf" "$sock_iters" tcp "$bytes" "$sock_sizes"
  measure tcp "$build/tcp_pingpong" "$sock_iters" "$bytes" "$sock_sizes"
done

day=$(date -u +%F)
machine="$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), load average at start $load"
mode=$([ "$quick" = 1 ] && echo " --quick" || true)$([ "$rounds" -gt 1 ] && echo " --rounds $rounds" || true)
python3 "$here/table.py" "$rows" --json "$out/peers-$day.json" --svg "$out/peers-$day.svg" \
  --machine "$machine" --command "bash benches/peers/run.sh$mode (started $started)"
echo "wrote $out/peers-$day.json and $out/peers-$day.svg" >&2
if [ "$ofi" = 1 ]; then
  bash "$here/ofi.sh" --runs 1 $([ "$quick" = 1 ] && echo --quick || true)
fi
