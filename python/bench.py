"""Per-call cost of symmem from Python, beside torch.distributed (gloo) on the same PEs.

    python -m symmem.run -n 2 python/bench.py [--iters N] [--json]

PE 0 prints one row per measurement (median of 11 repetitions): put of 8 B then quiet, get
of 8 B, the put_signal ping-pong (one way), put bandwidth of a 16 MiB array (back-to-back
put_nbi, then one quiet, 16 per repetition: as symmem-perf's put_bw row), reduce (sum)
of 8 B and 16 MiB and alltoall of 16 MiB; and, where torch is installed, the same through
torch.distributed on gloo: send/recv ping-pong (one way), all_reduce of 8 B and 16 MiB,
all_to_all_single of 16 MiB; all_to_all_v at MoE sizes beside gloo's all_to_all_single
(`all_to_all_v_rows`). Issue 50's rows on CPU PEs (`cpu_pe_symmem_rows`,
`cpu_pe_gloo_rows`): the stream put ping-pong, which on CPU PEs is the host put_signal
ping-pong of a torch tensor (the stream-ordered forms are the host forms there), beside
gloo's send/recv ping-pong above; a one-shot all-reduce (symmem.reduce, sum, float32: on
one node each PE loads every PE's data directly) of 8 KiB and 1 MiB beside gloo's
all_reduce of the same tensors. On GPU PEs, also torch's `_symmetric_memory` and NVSHMEM4Py
where the machine has them (`bench_gpu_peers.py`). Set the Rust rows beside them with
`symmem-perf --pes 2 --only put_latency,get_latency,put_signal_pingpong_latency,put_bw`:
the difference is the Python layer's cost per call.
"""

import argparse
import json
import statistics
import sys
import time

# This script sits beside the package's sources (python/symmem/, which lack the built
# extension when symmem is installed from its wheel): its directory goes last on the
# path, so the installed symmem comes first and bench_gpu_peers still imports from here.
sys.path.append(sys.path.pop(0))

import numpy as np  # noqa: E402

import symmem  # noqa: E402

MIB16 = 16 << 20
# The one-shot all-reduce sizes of issue 50's table.
ALL_REDUCE_SIZES = ((8 << 10, "8 KiB"), (1 << 20, "1 MiB"))


def timed(reps, iters, body):
    """Median over `reps` repetitions of the seconds per iteration of `body(iters)`."""
    samples = []
    for _ in range(reps + 1):
        symmem.barrier_all()
        t0 = time.perf_counter()
        body(iters)
        samples.append((time.perf_counter() - t0) / iters)
    return statistics.median(samples[1:])  # the first is a warm-up


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=11)
    ap.add_argument("--json", action="store_true", help="JSON lines instead of a table")
    a = ap.parse_args()
    symmem.init()
    me, n = symmem.my_pe(), symmem.n_pes()
    if n < 2:
        raise SystemExit("bench.py needs 2 PEs: python -m symmem.run -n 2 python/bench.py")
    peer = 1 - me if me < 2 else me
    if me == 0 and not a.json:
        print(f"{'metric':48} {'value':>10}  unit  library  ({n} PEs, {symmem.device()})")

    def row(metric, value, unit, what):
        """Prints one measurement on PE 0 at once (a later failure keeps it)."""
        if me != 0:
            return
        if a.json:
            print(json.dumps({"metric": metric, "value": value, "unit": unit, "library": what}),
                  flush=True)
        else:
            print(f"{metric:48} {value:10.3f}  {unit:5} {what}", flush=True)

    word = symmem.zeros((1,), "uint64")
    sig = symmem.zeros((1,), "uint64")
    big = symmem.zeros((MIB16 // 8,), "uint64")
    one = np.ones(1, np.uint64)
    local_big = np.ones(MIB16 // 8, np.uint64)

    def put_quiet(k):
        if me == 0:
            for _ in range(k):
                symmem.put(word, one, peer)
                symmem.quiet()

    def get(k):
        if me == 0:
            out = np.empty(1, np.uint64)
            for _ in range(k):
                symmem.get(out, word, peer)

    def pingpong(k):
        base = symmem.signal_fetch(sig)
        symmem.barrier_all()
        for i in range(1, k + 1):
            if me == 0:
                symmem.put_signal(word, one, sig, base + i, peer)
                symmem.signal_wait_until(sig, "ge", base + i)
            elif me == 1:
                symmem.signal_wait_until(sig, "ge", base + i)
                symmem.put_signal(word, one, sig, base + i, peer)

    def put_bw(k):
        if me == 0:
            for _ in range(k):
                symmem.put_nbi(big, local_big, peer)
            symmem.quiet()

    big_dst = symmem.zeros((MIB16 // 8,), "uint64")
    word_dst = symmem.zeros((1,), "uint64")

    def reduce(dst, src):
        return lambda k: [symmem.reduce(dst, src, "sum") for _ in range(k)]

    def alltoall(k):
        for _ in range(k):
            symmem.alltoall(big_dst, big)

    row("put_latency (8 B, then quiet)", timed(a.reps, a.iters, put_quiet) * 1e6, "us", "symmem")
    row("get_latency (8 B)", timed(a.reps, a.iters, get) * 1e6, "us", "symmem")
    row("put_signal_pingpong_latency (8 B, one way)",
        timed(a.reps, a.iters // 4, pingpong) * 1e6 / 2, "us", "symmem")
    bw_iters = 16
    row("put_bw (16 MiB)", MIB16 / timed(a.reps, bw_iters, put_bw) / 1e9, "GB/s", "symmem")
    ci = max(a.iters // 20, 100)
    row("reduce_latency (sum, 8 B)", timed(a.reps, ci, reduce(word_dst, word)) * 1e6, "us",
        "symmem")
    row("reduce_bw (sum, 16 MiB)", MIB16 / timed(a.reps, 5, reduce(big_dst, big)) / 1e9,
        "GB/s", "symmem")
    row("alltoall_bw (16 MiB)", MIB16 / timed(a.reps, 5, alltoall) / 1e9, "GB/s", "symmem")
    cpu_pe_symmem_rows(a.reps, a.iters, me, peer, row)
    for b in (word_dst, big_dst, word, sig, big):
        b.free()

    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        torch = None
    if torch is not None:
        # gloo on the same PEs: rank = PE, a TCP store on PE 0.
        port = 29500 + (int(time.time()) % 1000)
        port = int(symmem_broadcast_port(port))
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=me,
                                world_size=n)
        t8 = torch.ones(1, dtype=torch.int64)
        t16 = torch.ones(MIB16 // 8, dtype=torch.int64)

        def gloo_pingpong(k):
            for _ in range(k):
                if me == 0:
                    dist.send(t8, 1)
                    dist.recv(t8, 1)
                elif me == 1:
                    dist.recv(t8, 0)
                    dist.send(t8, 0)

        def allreduce(t):
            return lambda k: [dist.all_reduce(t) for _ in range(k)]

        gi = max(a.iters // 20, 100)
        row("send/recv pingpong_latency (8 B, one way)",
            timed(a.reps, gi, gloo_pingpong) * 1e6 / 2, "us", "torch.distributed gloo")
        row("all_reduce_latency (8 B)", timed(a.reps, gi, allreduce(t8)) * 1e6, "us",
            "torch.distributed gloo")
        row("all_reduce_bw (16 MiB)", MIB16 / timed(a.reps, 5, allreduce(t16)) / 1e9, "GB/s",
            "torch.distributed gloo")
        t16_out = torch.empty_like(t16)
        row("all_to_all_single_bw (16 MiB)",
            MIB16 / timed(a.reps, 5, lambda k: [dist.all_to_all_single(t16_out, t16)
                                               for _ in range(k)]) / 1e9,
            "GB/s", "torch.distributed gloo")
        all_to_all_v_rows(timed, a.reps, row, me, n, torch, dist)
        cpu_pe_gloo_rows(a.reps, a.iters, row, torch, dist)
        if symmem.device() != "cpu":
            import bench_gpu_peers as gpu

            gpu.torch_symmetric_memory_rows(timed, a.reps, a.iters, me, peer, row, torch,
                                            symmem)
            gpu.nvshmem4py_rows(timed, a.reps, a.iters, me, n, peer, row, torch, symmem)
        dist.destroy_process_group()

    symmem.barrier_all()


def all_to_all_v_rows(timed, reps, row, me, n, torch, dist):
    """MoE dispatch sizes: 4096 tokens of hidden 7168 in bf16, each sent to top-8 experts
    (rows to PEs uniformly at random), as torch.ops.symmem.all_to_all_v (splits on the
    device) and gloo's all_to_all_single with the same splits (host lists, CPU tensors).
    Scaled to 256 tokens on CPU PEs (28 MiB sent per PE). GB/s of rows sent per PE."""
    import symmem.torch  # noqa: F401 (registers torch.ops.symmem.*)
    from symmem import torch_ops

    tokens = 4096 if symmem.device() != "cpu" else 256
    hidden, top_k = 7168, 8
    rows = tokens * top_k

    def splits(pe):
        g = torch.Generator().manual_seed(4242 + pe)
        return torch.bincount(torch.randint(0, n, (rows,), generator=g), minlength=n)

    received = sum(int(splits(p)[me]) for p in range(n))
    dev = "cpu" if symmem.device() == "cpu" else f"cuda:{torch.cuda.current_device()}"
    x = torch.ones((rows, hidden), dtype=torch.bfloat16, device=dev)
    out = torch.empty((received, hidden), dtype=torch.bfloat16, device=dev)
    in_splits, so = splits(me).to(dev), torch.empty((2, n), dtype=torch.int64, device=dev)

    def symmem_a2av(k):
        for _ in range(k):
            torch.ops.symmem.all_to_all_v(x, out, in_splits, so)
        if dev != "cpu":
            torch.cuda.synchronize()

    sent = rows * hidden * 2
    what = f"all_to_all_v_bw (MoE: {tokens} tokens, hidden {hidden}, top-{top_k}, bf16)"
    row(what, sent / timed(reps, 3, symmem_a2av) / 1e9, "GB/s", "symmem")
    xc, outc = x.cpu(), out.cpu()
    ins, outs = splits(me).tolist(), [int(splits(p)[me]) for p in range(n)]
    row(what.replace("all_to_all_v", "all_to_all_single"),
        sent / timed(reps, 3, lambda k: [dist.all_to_all_single(outc, xc, outs, ins)
                                         for _ in range(k)]) / 1e9,
        "GB/s", "torch.distributed gloo")
    del x, out
    torch_ops.free_workspace()


def all_reduce_iters(iters, nbytes):
    """Iterations per repetition of an all-reduce of `nbytes`: about a 20th of `iters` for
    the small size, fewer as the size grows (at least 10)."""
    return max(iters // 20 * (8 << 10) // max(nbytes, 8 << 10), 10)


def cpu_pe_symmem_rows(reps, iters, me, peer, row):
    """Issue 50's symmem rows: the stream put ping-pong and the one-shot all-reduce of
    8 KiB and 1 MiB (sum, float32). The ping-pong runs on CPU PEs only, where symmem's
    stream-ordered forms are its host forms: an 8-byte torch tensor put with put_signal,
    then signal_wait_until, one way (without torch, a numpy array)."""
    if symmem.device() == "cpu":
        try:
            import torch

            src = torch.ones(1, dtype=torch.int64)
        except ImportError:
            src = np.ones(1, np.int64)
        dst = symmem.zeros((1,), "int64")
        sig = symmem.zeros((1,), "uint64")

        def pingpong(k):
            base = symmem.signal_fetch(sig)
            symmem.barrier_all()
            for i in range(1, k + 1):
                if me == 0:
                    symmem.put_signal(dst, src, sig, base + i, peer)
                    symmem.signal_wait_until(sig, "ge", base + i)
                elif me == 1:
                    symmem.signal_wait_until(sig, "ge", base + i)
                    symmem.put_signal(dst, src, sig, base + i, peer)

        row("stream_put_pingpong_latency (8 B, one way)",
            timed(reps, iters // 4, pingpong) * 1e6 / 2, "us",
            "symmem: CPU PE, so host put_signal + signal_wait_until")
        sig.free()
        dst.free()
    for nbytes, size in ALL_REDUCE_SIZES:
        src = symmem.zeros((nbytes // 4,), "float32")
        dst = symmem.zeros((nbytes // 4,), "float32")
        k = all_reduce_iters(iters, nbytes)
        row(f"all_reduce_latency (sum, float32, {size})",
            timed(reps, k, lambda k: [symmem.reduce(dst, src, "sum") for _ in range(k)]) * 1e6,
            "us", "symmem.reduce (one-shot: direct loads)")
        dst.free()
        src.free()


def cpu_pe_gloo_rows(reps, iters, row, torch, dist):
    """Issue 50's gloo rows beside `cpu_pe_symmem_rows`: torch.distributed.all_reduce
    (sum, float32) of 8 KiB and 1 MiB on gloo."""
    for nbytes, size in ALL_REDUCE_SIZES:
        t = torch.ones(nbytes // 4, dtype=torch.float32)
        k = all_reduce_iters(iters, nbytes)
        row(f"all_reduce_latency (sum, float32, {size})",
            timed(reps, k, lambda k: [dist.all_reduce(t) for _ in range(k)]) * 1e6, "us",
            "torch.distributed gloo")


def symmem_broadcast_port(port):
    """PE 0's port choice, on every PE (through a symmetric word)."""
    w = symmem.zeros((1,), "uint64")
    if symmem.my_pe() == 0:
        for pe in range(symmem.n_pes()):
            symmem.atomic_set(w, port, pe)
    symmem.barrier_all()
    got = symmem.atomic_fetch(w, symmem.my_pe())
    symmem.barrier_all()
    w.free()
    return got


if __name__ == "__main__":
    main()
