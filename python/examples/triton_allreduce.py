"""A one-shot all-reduce written in Triton over symmem buffers, as torch's Triton
symmetric-memory examples write it: each PE's kernel loads every PE's copy of the input
through the handle's ``buffer_ptrs_dev`` (peers' memory, by address), sums, and stores
the result in a local tensor, between two signal-pad barriers.

    python -m symmem.run -n 4 python/examples/triton_allreduce.py

The handle gives the kernel two integers: ``buffer_ptrs_dev`` and ``signal_pad_ptrs_dev``,
the addresses of ``world_size`` uint64 words (each PE's copy of the buffer, each PE's
signal pad) in memory the kernel reads. The kernel casts them to pointers, loads a peer's
word and casts that to a typed pointer.

The barrier (``blockwise_barrier``) is program ``b``'s handshake with program ``b`` of
every PE: it sets word ``b * world_size + rank`` of each PE's pad from 0 to 1
(compare-and-swap, release, system scope; it waits while the receiver has not taken the
previous signal), then takes each PE's signal to it, word ``b * world_size + pe`` of its
own pad, from 1 back to 0 (acquire). These are the words of ``handle.barrier(channel=b)``,
so the pads end as they started: zero. The first barrier makes every PE's input visible
before any PE reads it; the second keeps every PE from overwriting its input (the next
step) while a peer may still read it.

On GPU PEs Triton compiles the kernel for the GPU. On CPU PEs it runs under Triton's
interpreter (``TRITON_INTERPRET=1``, set here when this PE is a CPU PE), whose loads,
stores and atomics act on raw addresses: a peer's pointer is its heap mapped into this
process, and the integer atomics are the processor's (lock-free ``std::atomic``), so
they are atomic between processes too. (The interpreter's float16 atomic add takes a lock
in one process, so it is not; this example does none.)
"""

import contextlib
import os

import symmem

symmem.init()
ON_GPU = symmem.device() != "cpu"
if not ON_GPU:
    # Before the kernels below are decorated: on CPU PEs they run interpreted. They call
    # only triton.language's builtins (tl.full, not tl.zeros): its @triton.jit helpers
    # were decorated when triton was first imported, interpreted only if this was set by
    # then, and torch.compile, for one, imports triton early.
    os.environ.setdefault("TRITON_INTERPRET", "1")
elif os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
    raise SystemExit("triton_allreduce: this PE's buffers are on a GPU; unset TRITON_INTERPRET")

import torch  # noqa: E402 (after TRITON_INTERPRET)
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import symmem.torch  # noqa: E402


@triton.jit
def blockwise_barrier(signal_pad_ptrs, rank, world_size: tl.constexpr):
    """Program ``b`` of every PE meets here (see the module's docstring)."""
    pads = signal_pad_ptrs.to(tl.pointer_type(tl.uint64))
    word = tl.program_id(0) * world_size
    # Compiled, a compare-and-swap takes operands of its pointer's type exactly.
    zero = tl.full([], 0, tl.uint64)
    one = tl.full([], 1, tl.uint64)
    for pe in tl.static_range(world_size):
        peer_pad = tl.load(pads + pe).to(tl.pointer_type(tl.uint64))
        while tl.atomic_cas(peer_pad + word + rank, zero, one, sem="release", scope="sys") != 0:
            pass
    my_pad = tl.load(pads + rank).to(tl.pointer_type(tl.uint64))
    for pe in tl.static_range(world_size):
        while tl.atomic_cas(my_pad + word + pe, one, zero, sem="acquire", scope="sys") != 1:
            pass


@triton.jit
def one_shot_all_reduce_kernel(buffer_ptrs, signal_pad_ptrs, out_ptr, numel, rank,
                               world_size: tl.constexpr, BLOCK: tl.constexpr):
    """``out[i] = sum over PEs of buffer[i]``, for ``i < numel``; the programs stride
    over the elements."""
    blockwise_barrier(signal_pad_ptrs, rank, world_size)
    tl.debug_barrier()
    ptrs = buffer_ptrs.to(tl.pointer_type(tl.uint64))
    for start in range(tl.program_id(0) * BLOCK, numel, tl.num_programs(0) * BLOCK):
        offsets = start + tl.arange(0, BLOCK)
        mask = offsets < numel
        acc = tl.full((BLOCK,), 0, tl.float32)
        for pe in tl.static_range(world_size):
            peer = tl.load(ptrs + pe).to(tl.pointer_type(out_ptr.dtype.element_ty))
            acc += tl.load(peer + offsets, mask=mask, other=0).to(tl.float32)
        tl.store(out_ptr + offsets, acc.to(out_ptr.dtype.element_ty), mask=mask)
    tl.debug_barrier()
    blockwise_barrier(signal_pad_ptrs, rank, world_size)


def one_shot_all_reduce(hdl, out, block=256, max_programs=8):
    """Sums every PE's copy of the handle's buffer (its first ``out.numel()`` elements,
    of ``out``'s dtype) into the local tensor ``out``, on every PE (collective: each PE
    launches the kernel with the same grid). Needs every PE's buffer mapped here (one
    node); on a GPU PE it is queued on torch's current stream."""
    numel = out.numel()
    if str(out.device) != hdl.device or not out.is_contiguous():
        raise ValueError(f"one_shot_all_reduce: out must be a contiguous tensor on "
                         f"{hdl.device}, where the buffer is (it is on {out.device})")
    if numel * out.element_size() > hdl.buffer_size:
        raise ValueError(f"one_shot_all_reduce: out has {numel * out.element_size()} bytes, "
                         f"the symmetric buffer {hdl.buffer_size}")
    unmapped = [pe for pe, p in enumerate(hdl.buffer_ptrs) if p is None]
    if unmapped:
        raise ValueError(f"one_shot_all_reduce: the buffers of PEs {unmapped} are not mapped "
                         f"into PE {hdl.rank} (another node); a one-shot all-reduce loads "
                         "every PE's copy directly")
    # One barrier channel (world_size signal words) per program.
    channels = hdl.signal_pad_size // 8 // hdl.world_size
    programs = max(1, min(triton.cdiv(numel, block), max_programs, channels))
    # On a GPU PE, launched on the PE's GPU whatever torch's current device is.
    with torch.cuda.device(out.device) if out.is_cuda else contextlib.nullcontext():
        one_shot_all_reduce_kernel[(programs,)](
            hdl.buffer_ptrs_dev, hdl.signal_pad_ptrs_dev, out, numel, hdl.rank,
            world_size=hdl.world_size, BLOCK=block)
    return out


def main(numel=1000, steps=3):
    """Reduces ``steps`` different inputs in a row and checks each sum."""
    me, n = symmem.my_pe(), symmem.n_pes()
    buf = symmem.torch.empty((numel,), torch.float32)
    hdl = symmem.rendezvous(buf)
    out = torch.empty(numel, dtype=torch.float32, device=buf.device)
    ramp = torch.arange(numel, dtype=torch.float32, device=buf.device)
    for step in range(steps):
        # No host barrier between steps: the kernel's second barrier keeps peers from
        # reading a copy that its owner has started to overwrite.
        buf.copy_(ramp * (me + 1) + step)
        one_shot_all_reduce(hdl, out)
        want = ramp * (n * (n + 1) // 2) + n * step
        wrong = (out != want).nonzero()
        assert wrong.numel() == 0, (f"PE {me} step {step}: out[{int(wrong[0])}] = "
                                    f"{float(out[wrong[0]])}, not {float(want[wrong[0]])}")
    mode = "interpreted" if os.environ.get("TRITON_INTERPRET") == "1" else "compiled"
    print(f"PE {me} of {n} ({symmem.device()}, Triton {mode}): {steps} one-shot all-reduces "
          f"of {numel} floats correct")
    hdl.barrier()
    hdl.free()
    symmem.torch.free(buf)


if __name__ == "__main__":
    main()
