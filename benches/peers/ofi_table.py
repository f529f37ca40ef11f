#!/usr/bin/env python3
"""Table of ofi.sh's rows: for each row, the median over runs of symmem over ofi (its
progress thread blocking while idle, and polling: SYMMEM_OFI_PROGRESS), symmem over its
socket transport, Sandia OpenSHMEM (SOS) on the same provider and the libfabric
floor (fi_pingpong / fi_rdm_pingpong for latency, fabtests' fi_rma_bw for bandwidth), with
the ratios symmem-ofi / each and polling / SOS (lower is better for latency, higher for bandwidth).

    python3 ofi_table.py ROWS.jsonl

The floor of a round-trip row (put + quiet, get, fetch-add) is `trips` times the one-way
ping-pong time; see ofi.sh's header for what each program measures.
"""
import json
import statistics
import sys
from collections import defaultdict

from tcp_table import human

# (label, symmem metric, SOS metric, trips of the ping-pong floor or None)
LATENCY = [
    ("put_signal ping-pong, one-way (8 B)", "put_signal_pingpong_latency",
     "oshmem_put_signal_pingpong_latency", 1),
    ("p + wait_until ping-pong, one-way (8 B; symmem: put_signal)", "put_signal_pingpong_latency",
     "oshmem_p_wait_pingpong_latency", 1),
    ("put 8 B + quiet", "put_latency", "oshmem_p_latency", 2),
    ("get 8 B", "get_latency", "oshmem_g_latency", 2),
    ("atomic fetch-add u64", "atomic_fetch_add_latency", "oshmem_atomic_fetch_add_latency", 2),
    ("barrier_all, 2 PEs", "barrier_all_latency", "oshmem_barrier_all_latency", None),
]
BW_SIZES = [4 << 10, 32 << 10, 256 << 10, 2 << 20, 16 << 20]


def main(path):
    runs = defaultdict(list)
    n_runs = set()
    for line in open(path):
        line = line.strip()
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        runs[(r["source"], r["metric"], r["size"])].append(r["value"])
        n_runs.add(r.get("run"))
    med = {k: statistics.median(v) for k, v in runs.items()}

    def get(source, metric, size):
        return med.get((source, metric, size)) if metric else None

    def cell(v):
        return "-" if v is None else (f"{v:.2f}" if v >= 0.1 else f"{v:.3f}")

    def ratio(a, b):
        return "-" if a is None or b is None or b == 0 else f"{a / b:.2f}×"

    print()
    print(f"Medians over {len(n_runs)} run(s); ratio = symmem-ofi / peer "
          "(latency: lower is better; bandwidth: higher is better).")
    print()
    print("| row | symmem-ofi | ofi, polling | ofi, weakest order | weakest/ofi | symmem-socket | ofi/socket | SOS | ofi/SOS "
          "| polling/SOS | fi_pingpong (spin) floor | ofi/floor | polling/floor "
          "| fi_rdm_pingpong (sread) floor | ofi/floor |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for label, metric, sos_metric, trips in LATENCY:
        ofi = get("symmem-ofi", metric, 8)
        poll = get("symmem-ofi-poll", metric, 8)
        weak = get("symmem-ofi-weakest", metric, 8)
        sock = get("symmem-socket", metric, 8)
        sos = get("sos", sos_metric, 8)
        floors = []
        for m in ("fi_pingpong_latency", "fi_rdm_pingpong_latency"):
            f = get("fabtests", m, 8)
            floors.append(None if f is None or trips is None else f * trips)
        tag = "" if trips in (None, 1) else f" ({trips}× one-way)"
        print(f"| {label}, µs | {cell(ofi)} | {cell(poll)} | {cell(weak)} | {ratio(weak, ofi)} | {cell(sock)} | {ratio(ofi, sock)} "
              f"| {cell(sos)} | {ratio(ofi, sos)} | {ratio(poll, sos)} "
              f"| {cell(floors[0])}{tag if floors[0] else ''} | {ratio(ofi, floors[0])} "
              f"| {ratio(poll, floors[0])} | {cell(floors[1])}{tag if floors[1] else ''} "
              f"| {ratio(ofi, floors[1])} |")
    print()
    print("| put bandwidth, GB/s | symmem-ofi | ofi, polling | ofi, weakest order | weakest/ofi | symmem-socket | ofi/socket | SOS "
          "| ofi/SOS | polling/SOS | fi_rma_bw writedata (one way) | ofi/floor "
          "| fi_rma_bw write (both ways, per side) | ofi/that |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for size in BW_SIZES:
        ofi = get("symmem-ofi", "put_bw", size)
        poll = get("symmem-ofi-poll", "put_bw", size)
        weak = get("symmem-ofi-weakest", "put_bw", size)
        sock = get("symmem-socket", "put_bw", size)
        sos = get("sos", "oshmem_put_bw", size)
        wd = get("fabtests", "fi_rma_bw_writedata", size)
        w = get("fabtests", "fi_rma_bw_write", size)
        print(f"| {human(size)} | {cell(ofi)} | {cell(poll)} | {cell(weak)} | {ratio(weak, ofi)} | {cell(sock)} | {ratio(ofi, sock)} "
              f"| {cell(sos)} | {ratio(ofi, sos)} | {ratio(poll, sos)} | {cell(wd)} "
              f"| {ratio(ofi, wd)} | {cell(w)} | {ratio(ofi, w)} |")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: ofi_table.py ROWS.jsonl")
    main(sys.argv[1])
