#!/usr/bin/env python3
"""Table of tcp.sh's rows: the median over runs of each (metric, size), every run's value,
and the ratios to the goals (one-way <= 1.1x the bare TCP ping-pong, get and fetch_add <=
1.2x a bare TCP round trip, streaming put bandwidth >= 0.8x a bare TCP stream at the same
write size).

    python3 tcp_table.py ROWS.jsonl
"""
import json
import statistics
import sys
from collections import defaultdict

# (label, metric, size, trips): the latency rows, compared with `trips` one-way times of
# the bare TCP ping-pong (a get or fetching AMO is a round trip).
LATENCY = [
    ("bare TCP ping-pong, one-way", "c_tcp_pingpong_latency", 8, 1),
    ("Open MPI TCP send/recv ping-pong, one-way", "mpi_tcp_sendrecv_pingpong_latency", 8, 1),
    ("socket put_signal ping-pong, one-way", "put_signal_pingpong_latency", 8, 1),
    ("socket get (round trip)", "get_latency", 8, 2),
    ("socket atomic_fetch_add (round trip)", "atomic_fetch_add_latency", 8, 2),
    ("Open MPI TCP MPI_Get + flush (round trip)", "mpi_tcp_get_latency", 8, 2),
    ("Open MPI TCP MPI_Fetch_and_op + flush (round trip)", "mpi_tcp_fetch_and_op_latency", 8, 2),
]
BW_SIZES = [256 << 10, 1 << 20, 2 << 20, 16 << 20]
BANDWIDTH = [
    ("bare TCP stream", "c_tcp_stream_bw"),
    ("Open MPI TCP streaming send", "mpi_tcp_send_bw"),
    ("socket put_bw (put_nbi + quiet)", "put_bw"),
]


def human(size):
    if size >= 1 << 20:
        return f"{size >> 20} MiB"
    if size >= 1 << 10:
        return f"{size >> 10} KiB"
    return f"{size} B"


def main(path):
    runs = defaultdict(list)
    for line in open(path):
        line = line.strip()
        if line.startswith("{"):
            r = json.loads(line)
            runs[(r["metric"], r["size"])].append(r["value"])
    med = {k: statistics.median(v) for k, v in runs.items()}

    def raw(key):
        return ", ".join(f"{v:.2f}" for v in runs.get(key, [])) or "-"

    floor = med.get(("c_tcp_pingpong_latency", 8))
    print()
    print("| latency, 8 B | median µs | runs | vs bare TCP (same trips) |")
    print("|---|---|---|---|")
    for label, metric, size, trips in LATENCY:
        key = (metric, size)
        if key not in med:
            continue
        ratio = f"{med[key] / (trips * floor):.2f}×" if floor else "-"
        print(f"| {label} | {med[key]:.2f} | {raw(key)} | {ratio} |")
    print()
    print("| bandwidth | size | median GB/s | runs | vs bare TCP stream |")
    print("|---|---|---|---|---|")
    for size in BW_SIZES:
        base = med.get(("c_tcp_stream_bw", size))
        for label, metric in BANDWIDTH:
            key = (metric, size)
            if key not in med:
                continue
            ratio = f"{med[key] / base:.2f}×" if base else "-"
            print(f"| {label} | {human(size)} | {med[key]:.2f} | {raw(key)} | {ratio} |")
    one_way = med.get(("put_signal_pingpong_latency", 8))
    if floor and one_way:
        r = one_way / floor
        print(f"\ngoal one-way <= 1.1x bare TCP: {r:.2f}x ({'met' if r <= 1.1 else 'not met'})")
    for label, metric in (("get", "get_latency"), ("fetch_add", "atomic_fetch_add_latency")):
        rt = med.get((metric, 8))
        if floor and rt:
            r = rt / (2 * floor)
            print(f"goal {label} <= 1.2x a bare TCP round trip (2 x one-way): {r:.2f}x "
                  f"({'met' if r <= 1.2 else 'not met'})")
    ratios = [
        med[("put_bw", s)] / med[("c_tcp_stream_bw", s)]
        for s in BW_SIZES
        if ("put_bw", s) in med and ("c_tcp_stream_bw", s) in med
    ]
    if ratios:
        r = min(ratios)
        print(f"goal put_bw >= 0.8x bare TCP stream (worst size): {r:.2f}x "
              f"({'met' if r >= 0.8 else 'not met'})")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: tcp_table.py ROWS.jsonl")
    main(sys.argv[1])
