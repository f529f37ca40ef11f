#!/usr/bin/env python3
"""One side-by-side table of symmem and its peers, from the JSON lines of run.sh.

    table.py ROWS... [--gpu SYMMEM_GPU_JSON [NVSHMEM_JSON]] [--json OUT.json] [--svg OUT.svg]
             [--machine TEXT] [--command TEXT]

ROWS are files of JSON lines as symmem-perf --json and the C programs of benches/peers print
them (metric, size, value, unit, transport, initiator), or a bench-results/peers-*.json
that this script wrote (its "rows" are read back). --gpu adds the rows of a GPU machine:
symmem-perf --json on GPU PEs and nvshmem_perf's rows (the two JSON files that
`scripts/gpu-check.sh run --perf` leaves in $GPU_CHECK_RESULTS: symmem.json, nvshmem.json),
compared per metric, initiator and size, with cuMemcpyDtoD (dtod_bw) as the limit of the
bandwidth rows. So a host run and a GPU run go into one table with

    python3 benches/peers/table.py bench-results/peers-DATE.json --gpu symmem.json nvshmem.json

Each cell of a peer is its value and, in brackets, the ratio symmem / peer; with rows of
several rounds (run.sh --rounds, rows tagged "round"), medians over the rounds and the
median and range of the ratios taken within each round. Which direction
is better is stated per row: lower for latency (µs; a ratio below 1 means symmem is
faster), higher for bandwidth (GB/s; a ratio above 1 means symmem moves more). --json
writes the table and every input row; --svg a chart of symmem's advantage over each peer
(standard library only).
"""
import argparse
import json
import math
import statistics
import sys
from datetime import datetime, timezone

# Peer columns, in order: (key, heading).
COLUMNS = [
    ("oshmem", "Open MPI OpenSHMEM"),
    ("mpi_rma", "MPI-3 RMA"),
    ("mpi_2sided", "MPI two-sided"),
    ("tcp", "bare TCP"),
    ("nvshmem", "NVSHMEM"),
    ("limit", "physical limit"),
    ("nt_copy", "non-temporal copy"),
]

# Host rows: (label, symmem metric, symmem transport, {column: (peer metric, factor)}).
# `factor` multiplies the peer's value: a get or a fetching AMO over TCP is a round trip,
# compared with twice the one-way time of the bare TCP ping-pong.
HOST_ROWS = [
    ("put_signal ping-pong, one-way", "put_signal_pingpong_latency", "p2p", {
        "oshmem": ("oshmem_p_wait_pingpong_latency", 1),
        "mpi_2sided": ("mpi_sendrecv_pingpong_latency", 1),
        "limit": ("c_flag_pingpong_separate_pages_latency", 1),
    }),
    ("put + quiet (p + quiet, MPI_Put + flush)", "put_latency", "p2p", {
        "oshmem": ("oshmem_p_latency", 1),
        "mpi_rma": ("mpi_put_latency", 1),
    }),
    ("get (g, MPI_Get + flush)", "get_latency", "p2p", {
        "oshmem": ("oshmem_g_latency", 1),
        "mpi_rma": ("mpi_get_latency", 1),
    }),
    ("atomic_fetch_add (MPI_Fetch_and_op + flush)", "atomic_fetch_add_latency", "p2p", {
        "oshmem": ("oshmem_atomic_fetch_add_latency", 1),
        "mpi_rma": ("mpi_fetch_and_op_latency", 1),
    }),
    ("barrier_all (MPI_Barrier)", "barrier_all_latency", "p2p", {
        "oshmem": ("oshmem_barrier_all_latency", 1),
        "mpi_2sided": ("mpi_barrier_latency", 1),
    }),
    ("put bandwidth (put_nbi + quiet; MPI_Put + flush; MPI_Isend; memcpy)", "put_bw", "p2p", {
        "oshmem": ("oshmem_put_bw", 1),
        "mpi_rma": ("mpi_put_bw", 1),
        "mpi_2sided": ("mpi_send_bw", 1),
        "limit": ("c_memcpy_bw", 1),
        "nt_copy": ("c_nt_copy_bw", 1),
    }),
    ("get bandwidth (get_nbi + quiet; MPI_Get + flush; memcpy)", "get_bw", "p2p", {
        "oshmem": ("oshmem_get_bw", 1),
        "mpi_rma": ("mpi_get_bw", 1),
        "limit": ("c_memcpy_bw", 1),
        "nt_copy": ("c_nt_copy_bw", 1),
    }),
    ("put_signal ping-pong, one-way", "put_signal_pingpong_latency", "socket", {
        "mpi_2sided": ("mpi_tcp_sendrecv_pingpong_latency", 1),
        "tcp": ("c_tcp_pingpong_latency", 1),
    }),
    ("put + quiet (MPI_Put + flush)", "put_latency", "socket", {
        "mpi_rma": ("mpi_tcp_put_latency", 1),
    }),
    ("get (round trip; bare TCP: 2 x one-way)", "get_latency", "socket", {
        "mpi_rma": ("mpi_tcp_get_latency", 1),
        "tcp": ("c_tcp_pingpong_latency", 2),
    }),
    ("atomic_fetch_add (round trip; bare TCP: 2 x one-way)", "atomic_fetch_add_latency", "socket", {
        "mpi_rma": ("mpi_tcp_fetch_and_op_latency", 1),
        "tcp": ("c_tcp_pingpong_latency", 2),
    }),
    ("barrier_all (MPI_Barrier)", "barrier_all_latency", "socket", {
        "mpi_2sided": ("mpi_tcp_barrier_latency", 1),
    }),
    ("put bandwidth (MPI_Put + flush; MPI_Isend; TCP stream)", "put_bw", "socket", {
        "mpi_rma": ("mpi_tcp_put_bw", 1),
        "mpi_2sided": ("mpi_tcp_send_bw", 1),
        "tcp": ("c_tcp_stream_bw", 1),
    }),
    ("get bandwidth (MPI_Get + flush; TCP stream)", "get_bw", "socket", {
        "mpi_rma": ("mpi_tcp_get_bw", 1),
        "tcp": ("c_tcp_stream_bw", 1),
    }),
]


def read_rows(path):
    """The JSON rows of `path`: JSON lines, or a peers-*.json written by this script."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        sys.exit(f"table.py: cannot read {path}: {e.strerror}")
    stripped = text.strip()
    if stripped.startswith("{") and "\n{" not in stripped:
        try:
            doc = json.loads(stripped)
        except json.JSONDecodeError as e:
            sys.exit(f"table.py: {path}: not JSON ({e})")
        if isinstance(doc, dict) and "rows" in doc:
            return list(doc["rows"])
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            sys.exit(f"table.py: {path}:{n}: not a JSON row ({e}): {line[:80]}")
    return rows


def human(size):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} B"


def better(unit):
    return "higher" if unit == "GB/s" else "lower"


def host_table(rows):
    """Table rows of the host comparison: one per (spec, size) with symmem's value.

    Rows of several rounds (run.sh --rounds) give medians: of symmem's values, of each
    peer's, and of the ratios taken within each round (paired, so that the machine's drift
    between rounds cancels), with the range of those ratios."""
    host = [r for r in rows if r.get("initiator", "host") == "host" and r.get("device", "cpu") != "cuda"]
    # (metric, transport, size) -> {round: row}
    value = {}
    for r in host:
        value.setdefault((r["metric"], r.get("transport", "p2p"), r["size"]), {})[r.get("round", 1)] = r
    out = []
    for label, metric, transport, peers in HOST_ROWS:
        peer_transport = "tcp" if transport == "socket" else "p2p"
        sizes = sorted({s for (m, t, s) in value if m == metric and t == transport})
        for size in sizes:
            mine = value[(metric, transport, size)]
            cells = {}
            for col, (pm, factor) in peers.items():
                theirs = value.get((pm, peer_transport, size))
                if theirs is None:
                    continue
                cell = {"metric": pm, "factor": factor,
                        "value": statistics.median(r["value"] * factor for r in theirs.values())}
                paired = [mine[k]["value"] / (theirs[k]["value"] * factor)
                          for k in sorted(mine.keys() & theirs.keys()) if theirs[k]["value"] > 0]
                if len(paired) > 1:
                    cell["ratio"] = statistics.median(paired)
                    cell["ratio_range"] = [min(paired), max(paired)]
                    cell["rounds"] = len(paired)
                cells[col] = cell
            # Sizes no peer measured say nothing side by side (symmem-perf's own tables
            # have them).
            if not cells:
                continue
            out.append({"label": label, "metric": metric, "transport": transport,
                        "initiator": "host", "size": size,
                        "unit": next(iter(mine.values()))["unit"], "rounds": len(mine),
                        "symmem": statistics.median(r["value"] for r in mine.values()),
                        "peers": cells})
    return out


def gpu_table(symmem_rows, nvshmem_rows):
    """Table rows of a GPU run: symmem-perf on GPU PEs beside NVSHMEM, the copy rows the limit."""
    theirs = {(r["metric"], r["initiator"], r["size"]): r for r in nvshmem_rows}
    limits = ("dtod_bw", "dtod_bw_rotating")
    limit = {(r["metric"], r["size"]): r["value"] for r in symmem_rows if r["metric"] in limits}
    out = []
    for r in sorted(symmem_rows, key=lambda r: (r["metric"], r["initiator"], r["size"])):
        if r["metric"] in limits:
            continue
        cells = {}
        t = theirs.get((r["metric"], r["initiator"], r["size"]))
        if t is not None:
            cells["nvshmem"] = {"metric": t["metric"], "value": t["value"], "factor": 1}
        # The rotating rows' limit is the copy through the same 256 MiB window.
        copy = "dtod_bw_rotating" if r["metric"].endswith("_rotating") else "dtod_bw"
        if r["unit"] == "GB/s" and (copy, r["size"]) in limit:
            cells["limit"] = {"metric": copy, "value": limit[(copy, r["size"])], "factor": 1}
        out.append({"label": f"{r['metric']} [{r['initiator']}]", "metric": r["metric"],
                    "transport": "gpu", "initiator": r["initiator"], "size": r["size"],
                    "unit": r["unit"], "symmem": r["value"], "peers": cells})
    return out


def add_ratios(table):
    """The ratio of each cell of one round; cells of several rounds have theirs."""
    for row in table:
        for cell in row["peers"].values():
            if "ratio" not in cell:
                cell["ratio"] = row["symmem"] / cell["value"] if cell["value"] > 0 else None


# The copy goal: every same-node put and get bandwidth row from 4 KiB to 16 MiB at 0.95x
# or more of the best of memcpy, the non-temporal copy and every peer at that size.
COPY_GOAL = (0.95, 4 << 10, 16 << 20, ("put_bw", "get_bw"))


def copy_goal(table):
    """The copy goal's verdict: the rows it covers, the worst ratio to the best cell, and
    every row below the bound; None when the table has none of its rows."""
    bound, smallest, largest, metrics = COPY_GOAL
    checked = []
    for row in table:
        if row["transport"] != "p2p" or row["metric"] not in metrics:
            continue
        if not smallest <= row["size"] <= largest:
            continue
        cells = [(c["ratio"], col) for col, c in row["peers"].items() if c.get("ratio")]
        if cells:
            ratio, col = min(cells)
            checked.append((ratio, row["metric"], row["size"], col))
    if not checked:
        return None
    below = sorted(c for c in checked if c[0] < bound)
    return {"bound": bound, "rows": len(checked), "worst": min(checked), "below": below}


def size_text(size):
    if size >= 1 << 20:
        return f"{size >> 20} MiB"
    return f"{size >> 10} KiB" if size >= 1 << 10 else f"{size} B"


def fmt(v):
    if v is None:
        return "-"
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    if v >= 0.1:
        return f"{v:.3f}"
    return f"{v:.4f}"


def markdown(table, columns):
    heads = ["metric", "transport", "size", "unit (better)", "symmem"] + [h for _, h in columns]
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for row in table:
        cells = [row["label"], row["transport"], human(row["size"]),
                 f"{row['unit']} ({better(row['unit'])})", f"**{fmt(row['symmem'])}**"]
        for key, _ in columns:
            c = row["peers"].get(key)
            if c is None:
                cells.append("")
            else:
                r = c["ratio"]
                num = (lambda v: f"{v:.2f}" if v >= 0.1 else f"{v:.2g}")
                spread = ""
                if "ratio_range" in c:
                    lo, hi = c["ratio_range"]
                    spread = f", {num(lo)}–{num(hi)}"
                ratio = "" if r is None else f" ({num(r)}{spread})"
                cells.append(f"{fmt(c['value'])}{ratio}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def advantage(row, cell):
    """How many times better symmem is than the peer (>1: symmem better)."""
    if not cell["value"] or not row["symmem"]:
        return None
    if row["unit"] == "GB/s":
        return row["symmem"] / cell["value"]
    return cell["value"] / row["symmem"]


COLORS = {"oshmem": "#4c72b0", "mpi_rma": "#dd8452", "mpi_2sided": "#55a868",
          "tcp": "#c44e52", "nvshmem": "#8172b3", "limit": "#7f7f7f", "nt_copy": "#bcbd22"}


def esc(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def svg(table, columns, title):
    """A horizontal bar chart, log scale: per table row, one bar per peer showing symmem's
    advantage (peer / symmem for latency, symmem / peer for bandwidth; > 1 = symmem better)."""
    groups = []
    for row in table:
        bars = [(key, advantage(row, row["peers"][key])) for key, _ in columns
                if key in row["peers"]]
        bars = [(k, a) for k, a in bars if a]
        if bars:
            label = f"{row['label'].split(' (')[0]}, {row['transport']}, {human(row['size'])}"
            groups.append((label, bars))
    values = [a for _, bars in groups for _, a in bars] or [1.0]
    lo = math.floor(math.log10(max(min(values + [1.0]), 1e-4)))
    hi = math.ceil(math.log10(min(max(values + [1.0]), 1e4)))
    if hi == lo:
        hi = lo + 1
    left, right, bar_h, gap, top = 330, 30, 9, 8, 70
    width = 1000
    plot_w = width - left - right
    height = top + sum(len(b) * bar_h + gap for _, b in groups) + 40
    x = lambda v: left + (math.log10(min(max(v, 10 ** lo), 10 ** hi)) - lo) / (hi - lo) * plot_w
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{left}" y="18" font-size="14" font-weight="bold">{esc(title)}</text>',
           f'<text x="{left}" y="34">symmem\'s advantage over each peer, log scale: peer / symmem '
           f'for latency, symmem / peer for bandwidth; right of 1 = symmem better</text>']
    lx = left
    for key, head in columns:
        if any(k == key for _, bars in groups for k, _ in bars):
            out.append(f'<rect x="{lx}" y="44" width="10" height="10" fill="{COLORS[key]}"/>')
            out.append(f'<text x="{lx + 14}" y="53">{esc(head)}</text>')
            lx += 14 + 7 * len(head) + 16
    axis_bottom = height - 30
    for e in range(lo, hi + 1):
        xe = x(10 ** e)
        out.append(f'<line x1="{xe:.1f}" y1="{top - 6}" x2="{xe:.1f}" y2="{axis_bottom}" '
                   f'stroke="{"black" if e == 0 else "#ddd"}"/>')
        out.append(f'<text x="{xe:.1f}" y="{axis_bottom + 14}" text-anchor="middle">'
                   f'{10 ** e:g}x</text>')
    y = top
    for label, bars in groups:
        out.append(f'<text x="{left - 6}" y="{y + len(bars) * bar_h / 2 + 4:.1f}" '
                   f'text-anchor="end">{esc(label)}</text>')
        for key, a in bars:
            x0, x1 = x(1.0), x(a)
            out.append(f'<rect x="{min(x0, x1):.1f}" y="{y}" width="{max(abs(x1 - x0), 1):.1f}" '
                       f'height="{bar_h - 1}" fill="{COLORS[key]}"><title>{esc(key)}: '
                       f'{a:.3g}x</title></rect>')
            y += bar_h
        y += gap
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("rows", nargs="*", help="JSON-lines files, or a peers-*.json")
    ap.add_argument("--gpu", nargs="+", metavar="JSON",
                    help="symmem-perf --json of GPU PEs, then (optional) nvshmem_perf's rows")
    ap.add_argument("--json", help="write the table and the input rows here")
    ap.add_argument("--svg", help="write the chart here")
    ap.add_argument("--machine", default="", help="where it ran, for the JSON and the chart")
    ap.add_argument("--command", default="", help="what produced the rows, for the JSON")
    args = ap.parse_args()
    if not args.rows and not args.gpu:
        ap.error("no input: give JSON-lines files and/or --gpu")
    if args.gpu and len(args.gpu) > 2:
        ap.error("--gpu takes the symmem JSON and at most one NVSHMEM JSON")
    rows = [r for path in args.rows for r in read_rows(path)]
    for r in rows:
        missing = [k for k in ("metric", "size", "value", "unit") if k not in r]
        if missing:
            sys.exit(f"table.py: a row lacks {', '.join(missing)}: {json.dumps(r)[:120]}")
    # GPU rows come back from a peers-*.json tagged with their source.
    symmem_gpu = [r for r in rows if r.get("source") == "symmem-gpu"]
    nvshmem = [r for r in rows if r.get("source") == "nvshmem"]
    rows = [r for r in rows if r.get("source") not in ("symmem-gpu", "nvshmem")]
    if args.gpu:
        symmem_gpu += [dict(r, source="symmem-gpu") for r in read_rows(args.gpu[0])]
        if len(args.gpu) > 1:
            nvshmem += [dict(r, source="nvshmem") for r in read_rows(args.gpu[1])]
    table = host_table(rows)
    if symmem_gpu:
        table += gpu_table(symmem_gpu, nvshmem)
    gpu_rows = symmem_gpu + nvshmem
    add_ratios(table)
    used = [(k, h) for k, h in COLUMNS if any(k in row["peers"] for row in table)]
    print(markdown(table, used))
    print("\nEach peer cell: its value (symmem / peer). Latency in µs: lower is better, a ratio "
          "below 1 means symmem is faster. Bandwidth in GB/s: higher is better, a ratio above 1 "
          "means symmem moves more.")
    rounds = max((row.get("rounds", 1) for row in table), default=1)
    if rounds > 1:
        print(f"{rounds} rounds: every value is the median over the rounds, every ratio the "
              "median of the ratios taken within each round, then their range.")
    goal = copy_goal(table)
    if goal:
        ratio, metric, size, col = goal["worst"]
        verdict = "met" if not goal["below"] else f"not met in {len(goal['below'])} rows"
        print(f"\ngoal: every p2p put/get bandwidth row from 4 KiB to 16 MiB >= "
              f"{goal['bound']}x the best of memcpy, the non-temporal copy and every peer "
              f"({goal['rows']} rows): worst {ratio:.2f}x ({metric} {size_text(size)} against "
              f"{col}): {verdict}")
        for ratio, metric, size, col in goal["below"]:
            print(f"  {metric} {size_text(size)}: {ratio:.2f}x {col}")
    date = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    if args.json:
        doc = {"date": date, "machine": args.machine, "command": args.command,
               "columns": dict(used), "table": table, "copy_goal": goal,
               "rows": rows + gpu_rows}
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
    if args.svg:
        title = f"symmem vs peers, {date[:10]}" + (f", {args.machine}" if args.machine else "")
        with open(args.svg, "w") as f:
            f.write(svg(table, used, title))


if __name__ == "__main__":
    main()
