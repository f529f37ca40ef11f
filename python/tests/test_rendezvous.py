"""The torch-style handle: peers' addresses, in-place views of a peer's copy, signal pads."""

import gc

import numpy as np
import pytest

import symmem
from views import host, view


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
        assert pad.shape == (64,) and pad.dtype == "uint64"
        assert host(pad).dtype == np.uint64
        del pad
    hdl.barrier()
    mine = host(buf)
    assert mine[:4].tolist() == [0] * 4 and (mine[4:] == left + 0.5).all()
    # A signal to the right neighbour's pad, seen by its owner's wait.
    symmem.signal_op(view(hdl.signal_pad)[0:1], 7, right)
    assert symmem.signal_wait_until(view(hdl.signal_pad)[0:1], "eq", 7, stream="host") == 7
    with pytest.raises(ValueError, match="does not fit"):
        hdl.get_buffer(right, (9,), "float32")
    gc.collect()
    hdl.barrier()
    hdl.free()
    buf.free()
