#!/usr/bin/env bash
# symmem's socket transport beside its baselines on this machine, 2 PEs/processes over
# loopback: a bare busy-polling TCP ping-pong and a bare TCP stream (tcp_pingpong.c, the
# floor), Open MPI two-sided over its TCP BTL (mpi_perf.c in tcp mode), and
# `symmem-perf --transport socket`. Each of the three runs RUNS times, interleaved (so
# drift hits all alike); prints every run's JSON lines, then a table of medians over the
# runs with the ratios to the issue's goals (tcp_table.py). The rows stay in
# target/tcp-compare.jsonl (`python3 benches/peers/tcp_table.py target/tcp-compare.jsonl`).
#
#   bash benches/peers/tcp.sh [--quick] [--runs N]
#
# Needs Open MPI (mpicc, mpirun) and python3. Nothing else heavy should run meanwhile.
set -euo pipefail
cd "$(dirname "$0")"

runs=3 iters=20000 bytes=$((256 << 20)) perf_quick=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) iters=2000 bytes=$((16 << 20)) perf_quick=(--quick) ;;
    --runs) runs="$2"; shift ;;
    *) echo "usage: $0 [--quick] [--runs N]" >&2; exit 2 ;;
  esac
  shift
done

for tool in mpicc mpirun python3 cargo; do
  command -v "$tool" >/dev/null || { echo "tcp.sh: $tool not found" >&2; exit 1; }
done

# Open MPI refuses to run as root without these; oversubscription allows small machines.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
cc -O2 -Wall -Wextra -Werror tcp_pingpong.c -o "$build/tcp_pingpong"
mpicc -O2 -Wall -Wextra -Werror mpi_perf.c -o "$build/mpi_perf"
(cd ../.. && cargo build --quiet --release --bin symmem-perf)
perf=../../target/release/symmem-perf

# Every run's rows are kept (target/ is not tracked) for tcp_table.py to re-read.
mkdir -p ../../target
rows=../../target/tcp-compare.jsonl
: >"$rows"
for run in $(seq 1 "$runs"); do
  # The load before each run: other work on the machine shows up here, and in the values.
  echo "# run $run: $(date -u +%FT%TZ), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  tag() { sed -u "s/^{/{\"run\":$run,/" | tee -a "$rows"; }
  "$build/tcp_pingpong" "$iters" "$bytes" | tag
  # ob1 + the TCP BTL (not UCX, not shared memory) for sends; pt2pt one-sided over it.
  mpirun --mca pml ob1 --mca btl tcp,self --mca osc pt2pt -np 2 \
    "$build/mpi_perf" "$iters" tcp "$bytes" | tag
  "$perf" --pes 2 --transport socket --json "${perf_quick[@]}" --iters "$iters" --bytes "$bytes" \
    --only put_signal_pingpong_latency,get_latency,atomic_fetch_add_latency,put_bw | tag
done
python3 tcp_table.py "$rows"
