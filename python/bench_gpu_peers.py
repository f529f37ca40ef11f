"""The GPU peers of `bench.py`: torch's `_symmetric_memory` and NVSHMEM4Py (`nvshmem.core`),
measured on the same GPU PEs as symmem's own rows, each where the machine has it.

Each library is driven the way its Python API offers, so the rows say what a Python user
pays for the same task:

- torch's symmetric memory copies with `copy_` into (or out of) a peer's buffer from
  `get_buffer`, and signals with the handle's `put_signal`/`wait_signal` (kernels on the
  current stream);
- NVSHMEM4Py has only stream-ordered host operations (`put`, `get`, `put_signal`,
  `signal_wait`, `quiet` on a stream) between its own symmetric tensors;
- symmem's rows (in `bench.py`) are blocking host calls from host memory.

A row waits for completion where the task needs it (the stream is synchronized, as
`quiet` returns only after completion). A library that cannot start here (not installed,
or refusing 2 PEs on one GPU) is reported on stderr, never silently left out, and is
measured on every PE or on none (`agreed`).
"""

import re
import sys

MIB16 = 16 << 20


def note(me, text, everywhere=False):
    """A line on stderr, from PE 0 (or from this PE where `everywhere`: a failure of its
    own): why a library's rows are missing."""
    if me == 0 or everywhere:
        print(f"bench.py: PE {me}: {text}", file=sys.stderr, flush=True)


def library_rows(row, timed, reps, iters, what, finish, rows):
    """The rows of one library: `rows` holds (metric, how, body) for put_latency,
    get_latency, put_signal_pingpong_latency (reported one way) and put_bw; `finish()`
    ends every repetition (a barrier and a synchronized stream), so that a repetition
    ends only when every PE's queued work has."""
    for metric, how, body in rows:

        def run(k, body=body):
            body(k)
            finish()

        if metric == "put_bw":
            row(f"{metric} (16 MiB, {how})", MIB16 / timed(reps, 16, run) / 1e9, "GB/s", what)
        else:
            per_call = timed(reps, iters // 4, run) * 1e6
            one_way = per_call / 2 if "pingpong" in metric else per_call
            row(f"{metric} (8 B, {how})", one_way, "us", what)


def agreed(me, ok, what, torch):
    """Whether every PE's setup of `what` succeeded (`ok` on this one), over the gloo
    group: a library is measured on all PEs or on none, so that no PE waits in a barrier
    for a peer that gave up."""
    import torch.distributed as dist

    flag = torch.tensor([1 if ok else 0], dtype=torch.int64)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    if flag.item() == 1:
        return True
    if ok:
        note(me, f"{what} not measured: its setup failed on another PE (see its stderr)")
    return False


def cuda_device(torch, symmem):
    """The torch device of this PE's symmetric heap, made current."""
    found = re.match(r"GPU (\d+) ", symmem.device())
    dev = torch.device("cuda", int(found[1]) if found else 0)
    torch.cuda.set_device(dev)
    return dev


def torch_symmetric_memory_rows(timed, reps, iters, me, peer, row, torch, symmem):
    """Rows of torch's `_symmetric_memory` on the gloo group `bench.py` made."""
    import torch.distributed as dist

    what = f"torch {torch.__version__} _symmetric_memory"
    ok = True
    try:
        import torch.distributed._symmetric_memory as symm_mem

        dev = cuda_device(torch, symmem)
        buf = symm_mem.empty(MIB16 // 8, dtype=torch.int64, device=dev)
        handle = symm_mem.rendezvous(buf, dist.group.WORLD)
        peer_word = handle.get_buffer(peer, (1,), torch.int64)
        peer_big = handle.get_buffer(peer, (MIB16 // 8,), torch.int64)
        src_word = torch.ones(1, dtype=torch.int64, device=dev)
        src_big = torch.ones(MIB16 // 8, dtype=torch.int64, device=dev)
        host_word = torch.empty(1, dtype=torch.int64).pin_memory()
    except Exception as e:  # any failure of a peer library is reported, not fatal
        note(me, f"{what} not measured: {type(e).__name__}: {e}", everywhere=True)
        ok = False
    if not agreed(me, ok, what, torch):
        return
    stream = torch.cuda.current_stream()

    def put_sync(k):
        if me == 0:
            for _ in range(k):
                peer_word.copy_(src_word)
                stream.synchronize()

    def get(k):
        if me == 0:
            for _ in range(k):
                host_word.copy_(peer_word)  # blocking: device to pinned host memory
                stream.synchronize()

    def pingpong(k):
        # Stream-ordered: the data copy and the signal are queued; the host waits once.
        for _ in range(k):
            if me == 0:
                peer_word.copy_(src_word)
                handle.put_signal(peer)
                handle.wait_signal(peer)
            elif me == 1:
                handle.wait_signal(peer)
                peer_word.copy_(src_word)
                handle.put_signal(peer)
        stream.synchronize()

    def put_bw(k):
        if me == 0:
            for _ in range(k):
                peer_big.copy_(src_big)
            stream.synchronize()

    def finish():
        handle.barrier()
        stream.synchronize()

    try:
        library_rows(row, timed, reps, iters, what, finish, [
            ("put_latency", "copy_ to a peer's buffer, then sync", put_sync),
            ("get_latency", "copy_ from a peer's buffer to pinned host", get),
            ("put_signal_pingpong_latency", "copy_ + put_signal/wait_signal, stream-ordered",
             pingpong),
            ("put_bw", "device to a peer's buffer", put_bw),
        ])
        finish()
    except Exception as e:  # the rows so far are printed; the peer may wait for this PE
        note(me, f"{what}: stopped: {type(e).__name__}: {e}", everywhere=True)


def nvshmem4py_rows(timed, reps, iters, me, n, peer, row, torch, symmem):
    """Rows of NVSHMEM4Py, initialized by a unique id that PE 0 broadcasts over gloo."""
    import numpy as np
    import torch.distributed as dist

    what = "NVSHMEM4Py"
    ok = True
    try:
        import nvshmem as nvshmem_package
        import nvshmem.core as nvshmem
        from cuda.core import Device

        what = f"NVSHMEM4Py {nvshmem_package.__version__}"
        dev = cuda_device(torch, symmem)
        uid = nvshmem.get_unique_id(empty=(me != 0))
        raw = torch.from_numpy(uid._data.view(np.uint8).copy())
        dist.broadcast(raw, 0)
        uid._data[:] = raw.numpy().view(uid._data.dtype)
        nvshmem.init(device=Device(dev.index), uid=uid, rank=me, nranks=n,
                     initializer_method="uid")
        stream = torch.cuda.current_stream()
        word = nvshmem.tensor((1,), dtype=torch.int64)
        src_word = nvshmem.tensor((1,), dtype=torch.int64)
        big = nvshmem.tensor((MIB16 // 8,), dtype=torch.int64)
        src_big = nvshmem.tensor((MIB16 // 8,), dtype=torch.int64)
        sig = nvshmem.buffer(8)  # not zeroed by NVSHMEM: set to 0 below
        src_word.fill_(1)
        src_big.fill_(1)
        nvshmem.signal_op(sig, 0, nvshmem.SignalOp.SIGNAL_SET, me, stream=stream)
        nvshmem.barrier_all(stream=stream)
        stream.synchronize()
    except Exception as e:
        note(me, f"{what} not measured: {type(e).__name__}: {e}", everywhere=True)
        ok = False
    # A PE whose setup failed part way leaves NVSHMEM as it is: its finalize is collective.
    if not agreed(me, ok, what, torch):
        return
    rounds = [0]  # signal values keep growing across repetitions

    def put_quiet(k):
        if me == 0:
            for _ in range(k):
                nvshmem.put(word, src_word, peer, stream=stream)
                nvshmem.quiet(stream=stream)
                stream.synchronize()

    def get(k):
        if me == 0:
            for _ in range(k):
                nvshmem.get(word, src_word, peer, stream=stream)
                stream.synchronize()

    def pingpong(k):
        # Stream-ordered, as torch's row: the host queues the round trips and waits once.
        base = rounds[0]
        for i in range(1, k + 1):
            v = base + i
            if me == 0:
                nvshmem.put_signal(word, src_word, sig, v, nvshmem.SignalOp.SIGNAL_SET, peer,
                                   stream=stream)
                nvshmem.signal_wait(sig, v, nvshmem.ComparisonType.CMP_GE, stream=stream)
            elif me == 1:
                nvshmem.signal_wait(sig, v, nvshmem.ComparisonType.CMP_GE, stream=stream)
                nvshmem.put_signal(word, src_word, sig, v, nvshmem.SignalOp.SIGNAL_SET, peer,
                                   stream=stream)
        rounds[0] = base + k
        stream.synchronize()

    def put_bw(k):
        if me == 0:
            for _ in range(k):
                nvshmem.put_nbi(big, src_big, peer, stream=stream)
            nvshmem.quiet(stream=stream)
            stream.synchronize()

    def finish():
        nvshmem.barrier_all(stream=stream)
        stream.synchronize()

    try:
        library_rows(row, timed, reps, iters, what, finish, [
            ("put_latency", "then quiet, on a stream, then sync", put_quiet),
            ("get_latency", "on a stream, then sync", get),
            ("put_signal_pingpong_latency", "put_signal/signal_wait on a stream", pingpong),
            ("put_bw", "symmetric device source", put_bw),
        ])
    except Exception as e:  # the rows so far are printed; the peer may wait for this PE
        note(me, f"{what}: stopped: {type(e).__name__}: {e}", everywhere=True)
    finally:
        for t in (word, src_word, big, src_big):
            nvshmem.free_tensor(t)
        nvshmem.free(sig)
        nvshmem.finalize()
