#!/usr/bin/env bash
# Builds and runs the reference programs beside symmem-perf on 2 local PEs/ranks and
# prints symmem-perf's JSON lines (metric names prefixed c_ / oshmem_ / mpi_): a bare C
# flag ping-pong (the hardware floor), Open MPI's OpenSHMEM, and MPI.
#
#   bash benches/compare/run.sh [--quick]
#
# Needs Open MPI (mpicc, mpirun, oshcc, oshrun). Open MPI 4.1's OSHMEM crashes in
# shmem_finalize unless the rdma one-sided component is excluded: --mca osc ^rdma.
# The socket transport's baselines (bare TCP, Open MPI over TCP) are in tcp.sh.
set -euo pipefail
cd "$(dirname "$0")"

iters=100000
case "${1:-}" in
  --quick) iters=2000 ;;
  "") ;;
  *) echo "usage: $0 [--quick]" >&2; exit 2 ;;
esac

for tool in mpicc mpirun oshcc oshrun; do
  command -v "$tool" >/dev/null || { echo "run.sh: $tool not found (install Open MPI)" >&2; exit 1; }
done

# Open MPI refuses to run as root without these; oversubscription allows small machines.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
oshcc -O2 -Wall -Wextra -Werror shmem_perf.c -o "$build/shmem_perf"
mpicc -O2 -Wall -Wextra -Werror mpi_perf.c -o "$build/mpi_perf"
cc -O2 -Wall -Wextra -Werror flag_pingpong.c -o "$build/flag_pingpong"

"$build/flag_pingpong" "$iters"

oshrun --mca osc ^rdma -np 2 "$build/shmem_perf" "$iters"
mpirun -np 2 "$build/mpi_perf" "$iters"
