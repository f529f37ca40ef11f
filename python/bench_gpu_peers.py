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
or refusing 2 PEs on one GPU) is reported by one line on stderr, never silently left out.
"""

import re
import sys

MIB16 = 16 << 20


def note(me, text):
    """A line on stderr from PE 0: why a library's rows are missing."""
    if me == 0:
        print(f"bench.py: {text}", file=sys.stderr, flush=True)


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


def cuda_device(torch, symmem):
    """The torch device of this PE's symmetric heap, made current."""
    found = re.match(r"GPU (\d+) ", symmem.device())
    dev = torch.device("cuda", int(found[1]) if found else 0)
    torch.cuda.set_device(dev)
    return dev


def torch_symmetric_memory_rows(timed, reps, iters, me, peer, row, torch, symmem):
    """Rows of torch's `_symmetric_memory` on the gloo group `bench.py` made."""
    import torch.distributed as dist

    try:
        import torch.distributed._symmetric_memory as symm_mem

        dev = cuda_device(torch, symmem)
        buf = symm_mem.empty(MIB16 // 8, dtype=torch.int64, device=dev)
        handle = symm_mem.rendezvous(buf, dist.group.WORLD)
    except Exception as e:  # any failure of a peer library is reported, not fatal
        note(me, f"torch _symmetric_memory not measured: {type(e).__name__}: {e}")
        return
    what = f"torch {torch.__version__} _symmetric_memory"
    stream = torch.cuda.current_stream()
    peer_word = handle.get_buffer(peer, (1,), torch.int64)
    peer_big = handle.get_buffer(peer, (MIB16 // 8,), torch.int64)
    src_word = torch.ones(1, dtype=torch.int64, device=dev)
    src_big = torch.ones(MIB16 // 8, dtype=torch.int64, device=dev)
    host_word = torch.empty(1, dtype=torch.int64).pin_memory()

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

    library_rows(row, timed, reps, iters, what, finish, [
        ("put_latency", "copy_ to a peer's buffer, then sync", put_sync),
        ("get_latency", "copy_ from a peer's buffer to pinned host", get),
        ("put_signal_pingpong_latency", "copy_ + put_signal/wait_signal, stream-ordered",
         pingpong),
        ("put_bw", "device to a peer's buffer", put_bw),
    ])
    handle.barrier()
    stream.synchronize()


def nvshmem4py_rows(timed, reps, iters, me, n, peer, row, torch, symmem):
    """Rows of NVSHMEM4Py, initialized by a unique id that PE 0 broadcasts over gloo."""
    import numpy as np
    import torch.distributed as dist

    try:
        import nvshmem.core as nvshmem
        from cuda.core import Device
    except Exception as e:
        note(me, f"NVSHMEM4Py not measured: {type(e).__name__}: {e}")
        return
    try:
        dev = cuda_device(torch, symmem)
        uid = nvshmem.get_unique_id(empty=(me != 0))
        raw = torch.from_numpy(uid._data.view(np.uint8).copy())
        dist.broadcast(raw, 0)
        uid._data[:] = raw.numpy().view(uid._data.dtype)
        nvshmem.init(device=Device(dev.index), uid=uid, rank=me, nranks=n,
                     initializer_method="uid")
    except Exception as e:
        note(me, f"NVSHMEM4Py not measured: init failed: {type(e).__name__}: {e}")
        return
    what = f"NVSHMEM4Py {getattr(nvshmem, '__version__', '')}".strip()
    stream = torch.cuda.current_stream()
    word = nvshmem.tensor((1,), dtype=torch.int64)
    src_word = nvshmem.tensor((1,), dtype=torch.int64)
    big = nvshmem.tensor((MIB16 // 8,), dtype=torch.int64)
    src_big = nvshmem.tensor((MIB16 // 8,), dtype=torch.int64)
    sig = nvshmem.buffer(8)
    src_word.fill_(1)
    src_big.fill_(1)
    torch.cuda.synchronize()
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
    finally:
        for t in (word, src_word, big, src_big):
            nvshmem.free_tensor(t)
        nvshmem.free(sig)
        nvshmem.finalize()
