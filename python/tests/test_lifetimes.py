"""Lifetimes: a peer view keeps its array from being freed; an array dropped without
free() is reported (UnfreedArrayWarning, a RuntimeWarning Python shows) and freed at the
next collective point once every PE dropped it; after finalize, arrays and peer views
refuse every use (a one-PE job of its own, python/tests/init_job.py)."""

import gc
import os
import pathlib
import subprocess
import sys
import warnings

import numpy as np
import pytest

import symmem
from views import view

JOB = pathlib.Path(__file__).with_name("init_job.py")


def test_a_peer_view_keeps_its_array_from_being_freed(pe):
    me, n = pe
    a = symmem.zeros((4,), "int64")
    # This PE's own copy: mapped on every route (another node's is not).
    peer = symmem._native.peer_array(a, me, 0, (4,), "int64")
    with pytest.raises(BufferError, match=r"free: view\(s\) of symmetric array .* peer views .* "
                                          r"\(PE 0 holds 1, PE 1 holds 1"):
        a.free()
    assert not a.freed
    del peer
    gc.collect()
    a.free()


def test_a_handles_buffer_view_counts_too(pe):
    me, n = pe
    a = symmem.zeros((8,), "float32")
    handle = symmem.rendezvous(a)
    buf = handle.get_buffer(me, (8,), "float32")
    with pytest.raises(BufferError, match=r"still alive \(PE 0 holds 1"):
        a.free()
    del buf
    gc.collect()
    a.free()
    handle.free()


def dropped(shape, dtype):
    """The address of a new symmetric array that is dropped at once, with its warning."""
    with pytest.warns(symmem.UnfreedArrayWarning, match="garbage-collected without free"):
        a = symmem.zeros(shape, dtype)
        address = a.address
        del a
        gc.collect()
    return address


def test_an_array_every_pe_dropped_is_freed_at_the_next_allocation():
    address = dropped((1024,), "uint8")
    # The allocator is first fit and the same on every PE: the block is reused once freed.
    with symmem.zeros((1024,), "uint8") as b:
        assert b.address == address


def test_an_array_one_pe_still_holds_is_kept_until_every_pe_dropped_it(pe):
    me, n = pe
    if n < 2:
        pytest.skip("needs a PE that holds the array while another dropped it")
    a = symmem.zeros((1024,), "uint8")
    address = a.address
    if me == 0:
        with pytest.warns(symmem.UnfreedArrayWarning):
            del a
            gc.collect()
    # Not freed anywhere: PEs 1.. still hold it.
    with symmem.zeros((1024,), "uint8") as b:
        assert b.address != address
    if me != 0:
        with pytest.warns(symmem.UnfreedArrayWarning):
            del a
            gc.collect()
    with symmem.zeros((1024,), "uint8") as c:
        assert c.address == address


def test_more_dropped_arrays_than_a_round_offers_are_all_freed():
    # 20 ids, more than the 14 a PE offers per round: the point takes two rounds.
    sizes = [256 * (i + 1) for i in range(20)]
    with pytest.warns(symmem.UnfreedArrayWarning):
        arrays = [symmem.zeros((s,), "uint8") for s in sizes]
        addresses = [a.address for a in arrays]
        del arrays
        gc.collect()
    again = [symmem.zeros((s,), "uint8") for s in sizes]
    assert [a.address for a in again] == addresses
    for a in again:
        a.free()


def test_the_warning_is_one_python_shows_by_default():
    assert issubclass(symmem.UnfreedArrayWarning, RuntimeWarning)
    with warnings.catch_warnings():
        warnings.resetwarnings()
        warnings.simplefilter("default")
        # Python's default filters ignore only these four categories.
        for hidden in (DeprecationWarning, PendingDeprecationWarning, ImportWarning,
                       ResourceWarning):
            assert not issubclass(symmem.UnfreedArrayWarning, hidden)


def test_no_warning_for_arrays_freed_or_used_as_context_managers():
    with warnings.catch_warnings():
        warnings.simplefilter("error", symmem.UnfreedArrayWarning)
        a = symmem.zeros((4,), "int32")
        a.free()
        del a
        with symmem.zeros((4,), "int32") as b:
            v = view(b)
            del v
            gc.collect()
        del b
        gc.collect()


def test_after_finalize_arrays_and_peer_views_refuse_every_use(pe):
    if pe[0] != 0:
        pytest.skip("runs its own job once, from PE 0 of the suite's job")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SYMMEM_", "OMPI_", "PMI", "SLURM_", "RANK", "WORLD_SIZE",
                                "LOCAL_RANK", "MASTER_"))}
    out = subprocess.run([sys.executable, str(JOB), "lifetimes", "0", "1", "."], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "ok lifetimes 0" in out.stdout, out.stdout + out.stderr
    # Shown with Python's default warning filters, on stderr.
    assert "UnfreedArrayWarning: symmetric array allocation" in out.stderr, out.stderr


def test_a_peer_view_of_a_torch_tensor_keeps_it_from_being_freed(pe):
    torch = pytest.importorskip("torch")
    import symmem.torch as st

    me, n = pe
    t = st.zeros((4,), torch.int64)
    handle = symmem.rendezvous(t)
    peer = handle.get_buffer(me, (4,), "int64")
    with pytest.raises(BufferError, match=r"still alive \(PE 0 holds 1"):
        st.free(t)
    assert t.numel() == 4
    del peer
    gc.collect()
    st.free(t)
    assert t.numel() == 0
    handle.free()
