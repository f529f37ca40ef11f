#!/usr/bin/env python3
"""Side-by-side GPU table: symmem-perf --json and nvshmem_perf rows of the same metric,
initiator and size, with the copy limit (dtod_bw) for bandwidth rows and the ratios.

usage: gpu_table.py SYMMEM_JSON [NVSHMEM_JSON]
"""
import json
import sys


def load(path):
    rows = {}
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    r = json.loads(line)
                    rows[(r["metric"], r["initiator"], r["size"])] = r
    except FileNotFoundError:
        pass
    return rows


def size(b):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return f"{b >> shift} {unit}"
    return f"{b} B"


def main():
    ours = load(sys.argv[1])
    theirs = load(sys.argv[2]) if len(sys.argv) > 2 else {}
    limit = {k[2]: r["value"] for k, r in ours.items() if k[0] == "dtod_bw"}
    print(f"{'metric':<30} {'initiator':<9} {'size':>8} {'symmem':>10} {'nvshmem':>10} "
          f"{'limit':>9} {'vs nvshmem':>11} {'vs limit':>9}")
    for key in sorted(set(ours) | set(theirs)):
        metric, initiator, sz = key
        if metric == "dtod_bw":
            continue
        o, t = ours.get(key), theirs.get(key)
        unit = (o or t)["unit"]
        lim = limit.get(sz) if unit == "GB/s" else None
        cell = lambda r: f"{r['value']:.3f}" if r else "-"
        ratio = ""
        if o and t and t["value"] > 0:
            # >1 means symmem is better: faster (latency) or more bandwidth.
            better = t["value"] / o["value"] if unit == "us" else o["value"] / t["value"]
            ratio = f"{better:.2f}x"
        vs_lim = f"{o['value'] / lim:.2f}x" if o and lim else ""
        print(f"{metric:<30} {initiator:<9} {size(sz):>8} {cell(o):>10} {cell(t):>10} "
              f"{(f'{lim:.1f}' if lim else '-'):>9} {ratio:>11} {vs_lim:>9}   {unit}")
    print("(vs nvshmem > 1: symmem is faster / moves more; vs limit: put bandwidth / cuMemcpyDtoD)")


if __name__ == "__main__":
    main()
