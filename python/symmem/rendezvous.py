"""A torch-style handle on a symmetric buffer, so that code written for
``torch.distributed._symmetric_memory`` ports by renaming:

    buf = symmem.zeros((n,), "float32")          # or a torch tensor over one
    hdl = symmem.rendezvous(buf)                 # collective
    peer = torch.from_dlpack(hdl.get_buffer(hdl.rank ^ 1, (n,), "float32"))
    hdl.barrier()

``buffer_ptrs[pe]`` / ``signal_pad_ptrs[pe]`` are the addresses at which this process
reaches each PE's copy (``None`` where a peer is not mapped: another node);
``get_buffer`` and ``get_signal_pad`` are in-place views of a peer's copy that numpy and
torch read through DLPack (an error naming the route for an unmapped peer).
"""

from . import _native

__all__ = ["SIGNAL_PAD_WORDS", "SymmetricHandle", "rendezvous"]

#: uint64 words of each handle's signal pad.
SIGNAL_PAD_WORDS = 64


def _shape(sizes):
    return (sizes,) if isinstance(sizes, int) else tuple(sizes)


class SymmetricHandle:
    """The handle of :func:`rendezvous`: ``rank``, ``world_size``, ``buffer_size``,
    ``buffer_ptrs``, ``signal_pad_ptrs``, ``get_buffer``, ``get_signal_pad``, ``barrier``.
    ``free()`` frees its signal pad (collective)."""

    def __init__(self, buffer):
        from . import _dlpack_nbytes
        self.buffer = buffer
        self.rank = _native.my_pe()
        self.world_size = _native.n_pes()
        # Checks that the buffer is symmetric before the collective allocation below.
        self.buffer_ptrs = [_native.ptr(buffer, pe) for pe in range(self.world_size)]
        self.buffer_size = _dlpack_nbytes(buffer)
        self.signal_pad = _native.zeros((SIGNAL_PAD_WORDS,), "uint64")
        self.signal_pad_ptrs = [_native.ptr(self.signal_pad, pe)
                                for pe in range(self.world_size)]

    def get_buffer(self, rank, sizes, dtype, storage_offset=0):
        """PE ``rank``'s copy as ``sizes`` elements of ``dtype``, from element
        ``storage_offset``: a DLPack array for ``numpy.from_dlpack``/``torch.from_dlpack``."""
        from . import dtype_name
        return _native.peer_array(self.buffer, rank, storage_offset, _shape(sizes),
                                  dtype_name(dtype))

    def get_signal_pad(self, rank, sizes=(SIGNAL_PAD_WORDS,), dtype="uint64"):
        """PE ``rank``'s signal pad (``SIGNAL_PAD_WORDS`` uint64 words), in place."""
        from . import dtype_name
        return _native.peer_array(self.signal_pad, rank, 0, _shape(sizes), dtype_name(dtype))

    def barrier(self, channel=0):
        """Waits for every PE (``channel`` is accepted for torch's signature)."""
        del channel
        _native.barrier_all()

    def free(self):
        """Frees the handle's signal pad (collective)."""
        self.signal_pad.free()


def rendezvous(buffer):
    """A :class:`SymmetricHandle` on the symmetric ``buffer`` (a symmetric array, or a
    numpy/torch view of one). Collective: every PE calls it with its copy."""
    return SymmetricHandle(buffer)
