"""The torch-style handle: peers' addresses and the kernels' pointer arrays, in-place views
of a peer's copy, the handle cache and what freeing does to it, group=, signal pads
(torch tensors, torch.distributed groups and Triton kernels: test_triton.py)."""

import ctypes
import gc
import os
import subprocess
import sys
import textwrap
from importlib import import_module

import numpy as np
import pytest

import symmem
from views import host, on_gpu, torch_device, view

#: The module (``symmem.rendezvous`` is its function).
rdv = import_module("symmem.rendezvous")

#: The last uint64 word of the signal pad: no barrier channel of these tests uses it.
SPARE_WORD = rdv.SIGNAL_PAD_SIZE // 8 - 1


def words(address, n):
    """``n`` uint64 words at host ``address``."""
    return list((ctypes.c_uint64 * n).from_address(address))


def test_views_of_a_peers_copy(pe):
    me, n = pe
    right, left = (me + 1) % n, (me - 1) % n
    buf = symmem.zeros((8,), "float32")
    hdl = symmem.rendezvous(buf)
    assert (hdl.rank, hdl.world_size, hdl.buffer_size) == (me, n, 32)
    assert hdl.buffer_ptrs[me] == buf.address
    if hdl.buffer_ptrs[right] is None:
        # Another node (SYMMEM_SIMULATE_NODES): no view, and the error says why.
        with pytest.raises(ValueError, match=f"PE {right}'s heap is not mapped into PE {me} \\(route: "):
            hdl.get_buffer(right, (4,), "float32")
        symmem.put(view(buf)[4:], np.full(4, me + 0.5, np.float32), right)
    else:
        # Write into the right neighbour's copy directly.
        peer = view(hdl.get_buffer(right, (4,), "float32", storage_offset=4))
        peer[:] = me + 0.5
        del peer
        pad = hdl.get_signal_pad(right)
        assert pad.shape == (rdv.SIGNAL_PAD_SIZE // 8,)
        assert pad.dtype == "uint64" and host(pad).dtype == np.uint64
        assert hdl.get_signal_pad(right, dtype="uint32").shape == (9216 // 4,)
        del pad
    hdl.barrier()
    mine = host(buf)
    assert mine[:4].tolist() == [0] * 4 and (mine[4:] == left + 0.5).all()
    # A signal to the right neighbour's pad, seen by its owner's wait, then taken back.
    word = hdl.get_signal_pad(me, (1,), storage_offset=SPARE_WORD)
    symmem.signal_op(word, 7, right)
    assert symmem.signal_wait_until(word, "eq", 7, stream="host") == 7
    symmem.atomic_set(word, 0, me)
    del word
    with pytest.raises(ValueError, match="does not fit"):
        hdl.get_buffer(right, (9,), "float32")
    with pytest.raises(ValueError, match="does not fit"):
        hdl.get_signal_pad(me, (2,), storage_offset=SPARE_WORD)
    gc.collect()
    hdl.barrier()
    hdl.free()
    buf.free()


def test_pointers_and_the_kernels_pointer_arrays(pe):
    me, n = pe
    buf = symmem.zeros((16,), "int32")
    hdl = symmem.rendezvous(buf)
    assert hdl.buffer_ptrs == [symmem.ptr(buf, p) for p in range(n)]
    assert hdl.signal_pad_ptrs[me] is not None
    assert (hdl.signal_pad_size, hdl.multicast_ptr, hdl.offset) == (9216, 0, 0)
    assert hdl.device == ("cpu" if not on_gpu() else str(torch_device()))
    if not on_gpu():
        # The arrays kernels take: every peer's address, 0 where a peer is not mapped.
        assert words(hdl.buffer_ptrs_dev, n) == [p or 0 for p in hdl.buffer_ptrs]
        assert words(hdl.signal_pad_ptrs_dev, n) == [p or 0 for p in hdl.signal_pad_ptrs]
    # (On a GPU PE they are device memory: the Triton test reads them there.)
    with pytest.raises(AttributeError, match="boxed .*not offered by symmem"):
        hdl.boxed()
    with pytest.raises(AttributeError, match="no attribute 'nonsense'"):
        hdl.nonsense
    hdl.free()
    buf.free()


def test_the_handle_is_cached_until_it_or_its_buffer_is_freed(pe):
    me, n = pe
    buf = symmem.zeros((4,), "int64")
    hdl = symmem.rendezvous(buf)
    # No collective: one PE alone asks again (a collective here would leave the others'
    # next allocation paired with this PE's, and the sizes below would not match).
    if me == 0:
        for _ in range(3):
            assert symmem.rendezvous(buf) is hdl
    other = symmem.zeros((8,), "int64")
    assert symmem.rendezvous(other) is not hdl
    assert symmem.rendezvous(other).buffer_size == 64
    # free() ends the handle; the next rendezvous makes a new one (collective).
    hdl.free()
    with pytest.raises(ValueError, match="the handle was freed"):
        hdl.buffer_ptrs_dev
    with pytest.raises(ValueError, match="already freed"):
        hdl.free()
    again = symmem.rendezvous(buf)
    assert again is not hdl and again.buffer_ptrs[me] == buf.address
    # Freeing the buffer ends its handle at once ...
    buf.free()
    for use in (lambda: again.buffer_ptrs, lambda: again.buffer_ptrs_dev,
                lambda: again.get_buffer(me, (1,), "int64"), lambda: again.barrier()):
        with pytest.raises(ValueError, match="the handle's buffer .*was freed"):
            use()
    with pytest.raises(ValueError, match="rendezvous: the buffer .*was freed"):
        symmem.rendezvous(buf)
    # ... and the next rendezvous that is not a cache hit frees its signal pad and pointer
    # arrays on every PE (so a freed handle can no longer be freed); refused on every PE
    # while one PE holds a view of that pad.
    fresh = symmem.zeros((2,), "int64")
    # (A view of the pad made from the handle's own array: what free's vote counts.)
    pad = view(again._pad) if me == n - 1 else None
    with pytest.raises(BufferError, match=f"rendezvous: the signal pad of a handle whose buffer was freed .*PE {n - 1} holds 1"):
        symmem.rendezvous(fresh)
    del pad
    gc.collect()
    symmem.rendezvous(fresh).free()
    with pytest.raises(ValueError, match="already freed"):
        again.free()
    symmem.rendezvous(other).free()
    fresh.free()
    other.free()


def test_finalize_ends_every_handle():
    # One PE alone (a job of its own: no launcher variables): finalize with a handle alive,
    # which then refuses every use; after a new init, rendezvous makes a new handle (the
    # old one is not freed into the new heap).
    code = textwrap.dedent("""
        import symmem
        symmem.init()
        buf = symmem.zeros((4,), "int64")
        old = symmem.rendezvous(buf)
        buf.free()
        symmem.finalize()
        for use in (lambda: old.buffer_ptrs_dev, lambda: old.barrier()):
            try:
                use()
            except ValueError as e:
                assert "finalized" in str(e), e
            else:
                raise AssertionError("a handle of a finalized job was used")
        symmem.init()
        buf = symmem.zeros((4,), "int64")
        new = symmem.rendezvous(buf)
        assert new is not old and new.buffer_ptrs == [buf.address]
        new.barrier()
        new.free()
        buf.free()
        print("ok")
    """)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SYMMEM_", "OMPI_", "PMI", "SLURM_", "RANK", "WORLD_SIZE",
                                "LOCAL_RANK", "MASTER_"))}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]


def test_group_must_span_every_pe_in_order(pe):
    me, n = pe
    buf = symmem.zeros((2,), "int32")
    hdl = symmem.rendezvous(buf)
    world = symmem.team_world()
    assert symmem.rendezvous(buf, world) is hdl
    with pytest.raises(TypeError, match="group must be None, a torch.distributed ProcessGroup"):
        symmem.rendezvous(buf, 3)
    odds = world.split_strided(1, 2, n // 2)
    if odds is not None:
        with pytest.raises(ValueError, match=f"a team of {n // 2} of the {n} PEs"):
            symmem.rendezvous(buf, odds)
        odds.destroy()
    if "torch.distributed" not in sys.modules:
        # (test_triton.py tests torch.distributed's groups.)
        with pytest.raises(ValueError, match="torch.distributed is not initialized"):
            symmem.rendezvous(buf, "0")
    hdl.free()
    buf.free()


def test_signal_pad_barrier_orders_every_round(pe):
    me, n = pe
    right, left = (me + 1) % n, (me - 1) % n
    buf = symmem.zeros((1,), "int64")
    hdl = symmem.rendezvous(buf)
    # Each round every PE puts the round number into its right neighbour's word, then
    # barriers; the word must hold this round's number: a barrier that let a PE through
    # early, or lost a signal, would show an old one (or hang the next round).
    for rnd in range(1, 9):
        symmem.put(view(buf), np.array([rnd * 100 + me], np.int64), right)
        hdl.barrier(channel=rnd % 3)
        assert host(buf)[0] == rnd * 100 + left
        hdl.barrier(channel=rnd % 3)
    # put_signal / wait_signal: a ring hand-off on channel 5.
    symmem.put(view(buf), np.array([-me], np.int64), right)
    hdl.put_signal(right, channel=5)
    hdl.wait_signal(left, channel=5)
    assert host(buf)[0] == -left
    hdl.barrier()
    # Every word is back to 0: each signal was taken by its receiver.
    assert not host(hdl.get_signal_pad(me)).any()
    with pytest.raises(TimeoutError, match=f"no signal from PE {left} reached PE {me}"):
        hdl.wait_signal(left, channel=6, timeout_ms=20)
    with pytest.raises(ValueError, match="channel 9999 is not in 0"):
        hdl.barrier(channel=9999)
    with pytest.raises(ValueError, match=f"dst_rank {n} is not a PE"):
        hdl.put_signal(n)
    with pytest.raises(ValueError, match="timeout_ms -1 must be an int"):
        hdl.barrier(timeout_ms=-1)
    gc.collect()
    hdl.barrier()
    hdl.free()
    buf.free()


def test_a_pe_whose_torch_rank_is_not_its_number_fails_every_pe(pe):
    # PEs 0 and 1 swap torch ranks. Before the vote, a PE whose own rank matched went on
    # into the handle's allocation and waited there for the PEs that had refused.
    pytest.importorskip("torch")
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    me, n = pe
    if dist.is_initialized():
        pytest.skip("torch.distributed is initialized already (this test makes its own group)")
    swapped = {0: 1, 1: 0}.get(me, me)
    dist.init_process_group("fake", store=FakeStore(), rank=swapped, world_size=n)
    buf = symmem.zeros((2,), "int32")
    try:
        if me in (0, 1):
            with pytest.raises(ValueError, match=f"torch.distributed rank {swapped} but symmem PE {me}"):
                symmem.rendezvous(buf, dist.group.WORLD)
        else:
            with pytest.raises(ValueError, match=r"refused on every PE: .*PE\(s\) \[0, 1\]"):
                symmem.rendezvous(buf, dist.group.WORLD)
    finally:
        dist.destroy_process_group()
    # Every PE is still in step: the next collective pairs up.
    symmem.rendezvous(buf).free()
    buf.free()
