"""One PE of a job that test_setup.py and test_lifetimes.py start without a launcher (not
a pytest module): ``python init_job.py MODE RANK N_PES DIR``.

- ``unique_id``: rank 0 writes ``str(get_unique_id())`` to DIR/uid, the others read it;
  every rank joins with ``init(unique_id=..., rank=, n_pes=, heap_size=8 << 20)``.
- ``lifetimes``: one PE alone; what a finalized runtime's arrays and views do.

Each prints ``ok <mode> <rank>`` at the end."""

import gc
import os
import pathlib
import sys
import time

import numpy as np

import symmem
from views import host, view

mode, rank, n, where = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), pathlib.Path(sys.argv[4])
HEAP = 8 << 20


def ring_put():
    """Every PE writes its number into its right neighbour's array; checks its left's."""
    me, n_pes = symmem.my_pe(), symmem.n_pes()
    assert (me, n_pes) == (rank, n), (me, n_pes, rank, n)
    with symmem.zeros((1,), "int64") as a:
        symmem.put(a, np.array([me + 100], np.int64), (me + 1) % n_pes)
        symmem.barrier_all()
        assert host(a)[0] == (me - 1) % n_pes + 100, host(a)
        symmem.barrier_all()


def heap_size_is_honored():
    """An allocation larger than the heap given to init fails on every PE; one that fits
    succeeds."""
    try:
        symmem.empty((HEAP,), "uint8")
    except symmem.SymmemError as e:
        assert "out of" in str(e).lower() or "heap" in str(e).lower(), e
    else:
        raise AssertionError("an allocation of the whole heap succeeded: heap_size ignored")
    symmem.empty((HEAP // 2,), "uint8").free()


if mode == "unique_id":
    uid_file = where / "uid"
    if rank == 0:
        uid = symmem.get_unique_id()
        tmp = where / "uid.tmp"
        tmp.write_text(str(uid))
        os.chmod(tmp, 0o600)
        tmp.rename(uid_file)
    else:
        deadline = time.monotonic() + 30
        while not uid_file.exists():
            assert time.monotonic() < deadline, "rank 0 wrote no unique id"
            time.sleep(0.01)
        uid = uid_file.read_text()
    if rank == 0:
        # Another object of the same text has no socket, and the address is taken.
        try:
            symmem.init(unique_id=symmem.UniqueId(str(uid)), rank=0, n_pes=n)
        except symmem.SymmemError as e:
            assert str(e).startswith("init: ") and "in use" in str(e), e
        else:
            raise AssertionError("rank 0 joined on a copy of the id while the id listened")
    # Rank 0 passes the text too, with its id object alive: init finds the id it made
    # (and its listening socket) by the text.
    symmem.init(unique_id=str(uid), rank=rank, n_pes=n, heap_size=HEAP)
    ring_put()
    heap_size_is_honored()
    symmem.finalize()
elif mode == "lifetimes":
    symmem.init()
    a = symmem.zeros((4,), "int64")
    peer = symmem._native.peer_array(a, 0, 0, (4,), "int64")
    held = view(peer)
    try:
        symmem.finalize()
    except symmem.SymmemError as e:
        assert "PE 0 holds 1 DLPack view" in str(e), e
    else:
        raise AssertionError("finalize went ahead under a live view of a peer view")
    del held
    gc.collect()
    symmem.finalize()
    for what, use in [("address", lambda: a.address), ("__dlpack__", a.__dlpack__),
                      ("free", a.free)]:
        try:
            use()
        except BufferError as e:
            assert str(e).startswith(what) and "symmem was finalized" in str(e), e
        else:
            raise AssertionError(f"{what} of an array of a finalized runtime went ahead")
    try:
        peer.__dlpack__()
    except BufferError as e:
        assert "symmem was finalized" in str(e), e
    else:
        raise AssertionError("a peer view exported after finalize")
    # A new runtime: the old array stays dead (its address may be the new heap's).
    symmem.init()
    try:
        symmem.put(a, np.zeros(4, np.int64), 0)
    except BufferError as e:
        assert str(e).startswith("put: dst is gone: symmem was finalized"), e
    else:
        raise AssertionError("put into an array of a finalized runtime went ahead")
    # Dropped without free: a warning Python shows by default (the test reads stderr).
    symmem.zeros((16,), "uint8")
    gc.collect()
    symmem.finalize()
else:
    raise SystemExit(f"unknown mode {mode}")
print(f"ok {mode} {rank}")
