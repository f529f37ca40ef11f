#!/usr/bin/env bash
# symmem's OFI (libfabric) transport beside the libfabric floor and Sandia OpenSHMEM (SOS)
# on the same provider (default tcp;ofi_rxm), 2 PEs/processes on this machine:
#
#   - `symmem-perf --transport ofi` (SYMMEM_OFI_PROVIDER=PROVIDER) with its progress thread
#     blocking while idle (SYMMEM_OFI_PROGRESS=block), polling (=poll), and relying on efa's
#     order only (SYMMEM_OFI_ASSUME_ORDER=weakest, blocking), and, for reference,
#     `symmem-perf --transport socket`: put_signal ping-pong, put + quiet, get, fetch-add,
#     barrier (8 B), put bandwidth (put_nbi x n + quiet) 4 KiB..16 MiB in x8 steps;
#   - SOS (shmem_perf.c built with SOS's oshcc, launched by MPICH's mpiexec.hydra through
#     SOS's simple PMI; SHMEM_OFI_PROVIDER=PROVIDER);
#   - the floor: libfabric-bin's fi_pingpong (RDM send/recv ping-pong, 8 B, busy-polling
#     its CQ), fabtests' fi_rdm_pingpong (the same with warm-up, waiting in fi_cq_sread:
#     -c sread), and fabtests' fi_rma_bw with FI_DELIVERY_COMPLETE (-U) and -c sread:
#     `-o writedata` (one way, client to server) and `-o write` (both sides write at once;
#     per side), each size one run, as many writes as the other programs. Why sread: on
#     2 loaded cores two busy-polling fabtests processes starve the kernel's TCP work;
#     there fi_rma_bw measured 4-5x less with its default spin than with sread (16 MiB:
#     0.23-0.5 vs 0.9-1.0 GB/s), far below symmem and SOS over the same provider.
#
# Every program runs RUNS times, interleaved (drift hits all alike), each bounded by
# `timeout`. fabtests' text is parsed into JSON lines; all rows go to
# target/peers-ofi/ofi-compare.jsonl; then one markdown table of medians over the runs with
# the ratios symmem-ofi / each peer (ofi_table.py; lower is better for latency, higher for
# bandwidth): `python3 benches/peers/ofi_table.py target/peers-ofi/ofi-compare.jsonl`.
#
#   bash benches/peers/ofi.sh [--runs N] [--quick] [--provider P] [--perf PATH]
#                             [--libfabric-src DIR] [--sos-src DIR]
#
#   --runs N             runs of every program (default 3)
#   --quick              smoke run: few iterations, small byte budgets (the values mean little)
#   --provider P         libfabric provider for all three (default "tcp;ofi_rxm")
#   --perf PATH          use this symmem-perf (built with --features ofi) instead of building
#                        it with `cargo build --release --features ofi --bin symmem-perf`
#   --libfabric-src DIR  a libfabric source tree at the tag of the installed libfabric
#                        (fi_info --version); its fabtests/ is built into
#                        target/peers-ofi/fabtests unless already there
#   --sos-src DIR        an SOS source tree (with its tests-sos submodule); built into
#                        target/peers-ofi/sos unless already there
#
# Needs libfabric's headers and tools (Debian: libfabric-dev libfabric-bin), MPICH's
# mpiexec.hydra, a C compiler, python3, cargo unless --perf is given, and, to build the
# peers, autoconf, automake and libtool. Without the builds in target/peers-ofi and without
# the source options it prints how to fetch the sources. Nothing else heavy should run
# meanwhile. Each program is stopped after $PEERS_TIMEOUT seconds (default 300).
#
# What the rows measure, and where they differ (all latencies in µs per operation, medians):
#   put + quiet    symmem put_latency at 8 B: put of 8 bytes, then quiet. SOS: shmem_long_p
#                  (an 8-byte fi_inject_write) + shmem_quiet. Not the same work: SOS's quiet
#                  waits for its put counter, which an inject bumps once the write is handed
#                  to the provider, so on tcp;ofi_rxm it is no round trip (it measured below SOS's
#                  own one-way ping-pong); the floor column assumes a round trip.
#   get            symmem get_latency at 8 B (blocking get); SOS shmem_long_g. Round trip.
#   fetch-add      symmem atomic_fetch_add_latency (u64); SOS shmem_long_atomic_fetch_add.
#                  Round trip.
#   ping-pong      symmem put_signal_pingpong_latency: put_signal of 8 B + signal_wait_until,
#                  answered alike; round trip / 2. SOS, two rows: the same with
#                  shmem_putmem_signal (SHMEM_SIGNAL_SET) + shmem_signal_wait_until (the
#                  like-for-like row: SOS too writes, waits for the write's completion, then
#                  sends the signal atomic), and shmem_long_p of a sequence number +
#                  shmem_long_wait_until (one 8-byte write per direction, no signal).
#                  fi_pingpong / fi_rdm_pingpong print usec/xfer = elapsed / iterations / 2
#                  (util/pingpong.c and fabtests' benchmark_shared.c pass xfers_per_iter = 2),
#                  i.e. also round trip / 2; but two-sided send/recv, not RMA.
#                  The floor column of the round-trip rows above is 2 x that one-way time.
#   barrier        barrier_all on both PEs, per barrier; no libfabric floor.
#   put bandwidth  symmem put_bw: back-to-back put_nbi of SIZE from one buffer, then one
#                  quiet; SOS: shmem_putmem_nbi x n + shmem_quiet (SOS asks for
#                  FI_DELIVERY_COMPLETE). n = BYTES/SIZE clamped to [8, ITERS] in both.
#                  fi_rma_bw: fi_write (writedata: fi_writedata, the server reaping a CQ
#                  entry per write) of SIZE with -U (FI_DELIVERY_COMPLETE), at most 64
#                  outstanding (its window; symmem and SOS have no such cap), time from the
#                  first write after 10 warm-ups to the last completion; MB/sec there is
#                  10^6 B/s, shown here as GB/s (10^9 B/s). `-o write` runs both directions
#                  at once (fabtests: "read/write bw tests are bidirectional"), so it is not
#                  the one-way figure: it is listed, but the ratio is to writedata.
#   symmem's latency rows time a bare run and a second, batched run per repetition (11
#   repetitions, median of the bare runs); shmem_perf runs 11 repetitions after a warm-up
#   (median); fi_pingpong is one run without warm-up; fi_rdm_pingpong and fi_rma_bw one
#   run after 10 warm-ups. SOS (configured with hard polling and manual progress) and
#   fi_pingpong busy-poll in their waits; fi_rdm_pingpong and fi_rma_bw block in
#   fi_cq_sread.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
peers="$root/target/peers-ofi"

runs=3 quick=0 provider="tcp;ofi_rxm" perf="" lf_src="" sos_src=""
usage="usage: $0 [--runs N] [--quick] [--provider P] [--perf PATH] [--libfabric-src DIR] [--sos-src DIR]"
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="${2:?--runs needs a number}"; shift ;;
    --quick) quick=1 ;;
    --provider) provider="${2:?--provider needs a libfabric provider name}"; shift ;;
    --perf) perf="${2:?--perf needs the path of a symmem-perf binary}"; shift ;;
    --libfabric-src) lf_src="${2:?--libfabric-src needs a directory}"; shift ;;
    --sos-src) sos_src="${2:?--sos-src needs a directory}"; shift ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
  shift
done
case "$runs" in '' | *[!0-9]* | 0) echo "ofi.sh: --runs wants a positive number" >&2; exit 2 ;; esac

# Latency iterations per repetition (one operation over loopback TCP costs tens of µs),
# bandwidth byte budget per repetition, fi_pingpong iterations.
if [ "$quick" = 1 ]; then
  iters=200 bytes=$((16 << 20)) pp_iters=1000 limit=${PEERS_TIMEOUT:-120} perf_opts=(--quick)
else
  iters=2000 bytes=$((256 << 20)) pp_iters=10000 limit=${PEERS_TIMEOUT:-300} perf_opts=()
fi
bw_sizes=(4096 32768 262144 2097152 16777216)
bw_list=$(IFS=,; echo "${bw_sizes[*]}")

for tool in cc fi_info fi_pingpong mpiexec.hydra python3 timeout ss; do
  command -v "$tool" >/dev/null || {
    echo "ofi.sh: $tool not found (needs libfabric-dev libfabric-bin, MPICH's mpiexec.hydra, a C compiler, python3, iproute2)" >&2
    exit 3
  }
done
lf_version=$(fi_info --version | sed -n 's/^libfabric: *//p')

# ---- builds (kept in target/peers-ofi; reused when there) ----
mkdir -p "$peers"
fabtests="$peers/fabtests"
if [ ! -x "$fabtests/bin/fi_rma_bw" ]; then
  if [ -z "$lf_src" ]; then
    cat >&2 <<EOF
ofi.sh: fabtests are not built in $fabtests. Get the libfabric source at the installed
version ($lf_version) and pass it:
  git clone --depth 1 --branch v$lf_version https://github.com/ofiwg/libfabric $peers/src/libfabric-$lf_version
  bash $0 --libfabric-src $peers/src/libfabric-$lf_version ...
(fabtests/ is built with ./autogen.sh && ./configure --with-libfabric=/usr --prefix=$fabtests
&& make -j2 && make install; needs autoconf, automake, libtool.)
EOF
    exit 3
  fi
  [ -f "$lf_src/fabtests/autogen.sh" ] || { echo "ofi.sh: $lf_src/fabtests/autogen.sh not found" >&2; exit 3; }
  echo "# building fabtests from $lf_src/fabtests into $fabtests (log: $peers/fabtests-build.log)" >&2
  (cd "$lf_src/fabtests" && ./autogen.sh && ./configure --with-libfabric=/usr --prefix="$fabtests" \
    && make -j2 && make install) >"$peers/fabtests-build.log" 2>&1 \
    || { echo "ofi.sh: the fabtests build failed; see $peers/fabtests-build.log" >&2; exit 1; }
fi
sos="$peers/sos"
if [ ! -x "$sos/bin/oshcc" ]; then
  if [ -z "$sos_src" ]; then
    cat >&2 <<EOF
ofi.sh: SOS is not built in $sos. Get the source of its latest release with its test
submodule and pass it:
  git clone --recursive --depth 1 --shallow-submodules --branch v1.5.3 https://github.com/Sandia-OpenSHMEM/SOS $peers/src/SOS-1.5.3
  bash $0 --sos-src $peers/src/SOS-1.5.3 ...
(built with ./autogen.sh && ./configure --prefix=$sos --with-ofi=/usr --enable-pmi-simple
--without-xpmem --without-cma --disable-shr-atomics --disable-fortran --enable-hard-polling
--enable-manual-progress --enable-ofi-manual-progress && make -j2 && make install.)
EOF
    exit 3
  fi
  [ -f "$sos_src/autogen.sh" ] || { echo "ofi.sh: $sos_src/autogen.sh not found" >&2; exit 3; }
  echo "# building SOS from $sos_src into $sos (log: $peers/sos-build.log)" >&2
  # OFI only between the PEs: no XPMEM, no CMA, no shared-memory atomics. Hard polling:
  # without it SOS asks for FI_RMA_EVENT (target counters), which ofi_rxm does not offer
  # (fi_getinfo: "No data available"); manual progress: waits and completions call into
  # the provider, whose data progress under rxm is manual.
  (cd "$sos_src" && ./autogen.sh && ./configure --prefix="$sos" --with-ofi=/usr --enable-pmi-simple \
    --without-xpmem --without-cma --disable-shr-atomics --disable-fortran --enable-hard-polling \
    --enable-manual-progress --enable-ofi-manual-progress && make -j2 && make install) \
    >"$peers/sos-build.log" 2>&1 \
    || { echo "ofi.sh: the SOS build failed; see $peers/sos-build.log" >&2; exit 1; }
fi
mkdir -p "$peers/bin"
"$sos/bin/oshcc" -O2 -Wall -Wextra -Werror "$here/shmem_perf.c" -o "$peers/bin/shmem_perf"
if [ -z "$perf" ]; then
  (cd "$root" && cargo build --quiet -j2 --release --features ofi --bin symmem-perf)
  # A copy: a later build without --features ofi (run.sh, tcp.sh, anyone's cargo build)
  # replaces target/release/symmem-perf with one that has no ofi transport.
  cp "$root/target/release/symmem-perf" "$peers/bin/symmem-perf"
  perf="$peers/bin/symmem-perf"
fi
[ -x "$perf" ] || { echo "ofi.sh: $perf is not an executable file" >&2; exit 2; }

# ---- running ----
rows="$peers/ofi-compare.jsonl"
logs="$peers/logs"
mkdir -p "$logs"
: >"$rows"
failed=()
# Runs one program bounded by `limit`, its output in logs/NAME.out; a failure is reported
# and recorded (the table shows the row as missing) but the other programs still run.
bounded() {
  local name=$1
  shift
  if ! timeout -k 10 "$limit" "$@" >"$logs/$name.out" 2>&1; then
    echo "ofi.sh: $name failed or ran past ${limit}s: $*" >&2
    tail -n 5 "$logs/$name.out" | sed 's/^/    /' >&2
    failed+=("$name")
    return 1
  fi
}
# JSON lines of a program's log, tagged with the run and the source.
keep() { # LOG SOURCE
  grep '^{' "$1" | sed "s/^{/{\"run\":$run,\"source\":\"$2\",/" >>"$rows" || true
}
# One line of fabtests' table output (the last with numbers) as a JSON line:
# METRIC SIZE and which column (lat: usec/xfer, bw: MB/sec as GB/s).
fab_row() { # LOG SOURCE METRIC SIZE KIND
  awk -v run="$run" -v src="$2" -v metric="$3" -v size="$4" -v kind="$5" '
    $1 ~ /^[0-9]/ && NF >= 7 { lat = $(NF - 1); bw = $(NF - 2) }
    END {
      if (lat == "") exit 1
      if (kind == "lat") printf "{\"run\":%d,\"source\":\"%s\",\"metric\":\"%s\",\"size\":%d,\"value\":%.4f,\"unit\":\"us\",\"transport\":\"ofi\"}\n", run, src, metric, size, lat
      else printf "{\"run\":%d,\"source\":\"%s\",\"metric\":\"%s\",\"size\":%d,\"value\":%.4f,\"unit\":\"GB/s\",\"transport\":\"ofi\"}\n", run, src, metric, size, bw / 1000
    }' "$1" >>"$rows" || echo "ofi.sh: no result line in $1" >&2
}
# Waits until something listens on TCP port $1 (at most 10 s).
listening() {
  for _ in $(seq 100); do
    ss -Htln "sport = :$1" | grep -q . && return 0
    sleep 0.1
  done
  return 1
}
port=47300
# A fabtests/fi_pingpong server and client pair: NAME SERVER_PORT_FLAG CLIENT_PORT_FLAG
# CLIENT_ADDR_ARGS PROGRAM ARGS...; the client's output is logs/NAME.out.
pair() {
  local name=$1 sflag=$2 cflag=$3 caddr=$4
  shift 4
  port=$((port + 1))
  timeout -k 5 "$limit" "$@" "$sflag" "$port" >"$logs/$name.server.out" 2>&1 &
  local server=$!
  if ! listening "$port"; then
    echo "ofi.sh: $name: the server did not listen on port $port" >&2
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    failed+=("$name")
    return 1
  fi
  local rc=0
  # shellcheck disable=SC2086 # caddr is a word list on purpose
  bounded "$name" "$@" "$cflag" "$port" $caddr || { rc=1; kill "$server" 2>/dev/null || true; }
  wait "$server" 2>/dev/null || echo "ofi.sh: $name: the server failed (logs/$name.server.out)" >&2
  return "$rc"
}
# Transfers per bandwidth repetition, as common.h and symmem-perf: BYTES/SIZE in [8, ITERS].
transfers() { local n=$((bytes / $1)); [ "$n" -lt 8 ] && n=8; [ "$n" -gt "$iters" ] && n=$iters; echo "$n"; }

lat_metrics=put_signal_pingpong_latency,put_latency,get_latency,atomic_fetch_add_latency,barrier_all_latency
started=$(date -u +%FT%TZ)
load=$(cut -d' ' -f1-3 /proc/loadavg)
for run in $(seq 1 "$runs"); do
  echo "# run $run of $runs: $(date -u +%FT%TZ), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  # ofi with its progress thread blocking while idle (what auto picks here: each PE is
  # bound to one core), ofi with it polling, ofi relying on efa's order only
  # (SYMMEM_OFI_ASSUME_ORDER=weakest, blocking), and sockets.
  for t in ofi ofi-poll ofi-weakest socket; do
    progress=block order=provider
    [ "$t" = ofi-poll ] && progress=poll
    [ "$t" = ofi-weakest ] && order=weakest
    # Latency rows at 8 B only (-b 8 -e 8; put_latency and get_latency sweep otherwise),
    # then put_bw over the bandwidth sizes.
    bounded "symmem-$t-lat.$run" env SYMMEM_OFI_PROVIDER="$provider" SYMMEM_OFI_PROGRESS="$progress" \
      SYMMEM_OFI_ASSUME_ORDER="$order" "$perf" --pes 2 --transport "${t%%-*}" \
      --json "${perf_opts[@]}" --iters "$iters" -b 8 -e 8 --only "$lat_metrics" \
      && keep "$logs/symmem-$t-lat.$run.out" "symmem-$t"
    bounded "symmem-$t-bw.$run" env SYMMEM_OFI_PROVIDER="$provider" SYMMEM_OFI_PROGRESS="$progress" \
      SYMMEM_OFI_ASSUME_ORDER="$order" "$perf" --pes 2 --transport "${t%%-*}" \
      --json "${perf_opts[@]}" --iters "$iters" --bytes "$bytes" -b 4K -e 16M -f 8 --only put_bw \
      && keep "$logs/symmem-$t-bw.$run.out" "symmem-$t"
  done
  bounded "sos.$run" env SHMEM_OFI_PROVIDER="$provider" mpiexec.hydra -n 2 "$peers/bin/shmem_perf" \
    "$iters" "$bytes" "$bw_list" && keep "$logs/sos.$run.out" sos
  pair "fi_pingpong.$run" -B -P 127.0.0.1 fi_pingpong -p "$provider" -e rdm -S 8 -I "$pp_iters" \
    && fab_row "$logs/fi_pingpong.$run.out" fabtests fi_pingpong_latency 8 lat
  pair "fi_rdm_pingpong.$run" -B -P 127.0.0.1 "$fabtests/bin/fi_rdm_pingpong" -p "$provider" \
    -S 8 -I "$pp_iters" -c sread -s 127.0.0.1 && fab_row "$logs/fi_rdm_pingpong.$run.out" fabtests fi_rdm_pingpong_latency 8 lat
  for op in writedata write; do
    for size in "${bw_sizes[@]}"; do
      n=$(transfers "$size")
      w=$((n < 64 ? n : 64))
      pair "fi_rma_bw-$op-$size.$run" -B -P 127.0.0.1 "$fabtests/bin/fi_rma_bw" -p "$provider" -e rdm \
        -o "$op" -U -c sread -S "$size" -I "$n" -W "$w" -s 127.0.0.1 \
        && fab_row "$logs/fi_rma_bw-$op-$size.$run.out" fabtests "fi_rma_bw_$op" "$size" bw
    done
  done
done

echo >&2
echo "# $(date -u +%F): started $started, $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), load average at start $load; provider $provider; libfabric $lf_version; runs $runs$([ "$quick" = 1 ] && echo ', --quick' || true)"
python3 "$here/ofi_table.py" "$rows"
if [ ${#failed[@]} -gt 0 ]; then
  echo "ofi.sh: failed: ${failed[*]} (logs in $logs)" >&2
  exit 1
fi
