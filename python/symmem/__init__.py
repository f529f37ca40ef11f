"""symmem for Python: NVSHMEM-style symmetric memory between processes (PEs).

    import numpy as np, symmem
    symmem.init()                                  # joins the job the launcher started
    me, n = symmem.my_pe(), symmem.n_pes()
    buf = symmem.zeros((4,), "int64")              # collective: the same on every PE
    symmem.put(buf, np.full(4, me), (me + 1) % n)  # one-sided write to the right neighbour
    symmem.barrier_all()
    print(me, np.from_dlpack(buf))                 # the left neighbour's number, no copy
    buf.free()                                     # collective

Launch with ``python -m symmem.run -n 4 script.py`` (or torchrun, srun, mpirun). Symmetric
arrays share memory with numpy, torch and cupy through DLPack (``numpy.from_dlpack``,
``torch.from_dlpack``); any view of one is a symmetric operand. Transfers take a local
host array beside it; atomics and waits act on the first element of their operand
(a one-element view such as ``counter[i:i+1]``). Errors are ``ValueError``/``TypeError``
for bad arguments, ``TimeoutError`` for a wait past ``SYMMEM_TIMEOUT``, ``SymmemError``
for the rest; each names the PE and what was wrong. Waits release the GIL and stop on
Ctrl-C.
"""

import atexit as _atexit
import gc as _gc

from . import _native
from ._native import (
    DTYPES,
    SymmemError,
    SymmetricArray,
    Team,
    alltoall,
    atomic_add,
    atomic_and,
    atomic_compare_swap,
    atomic_fetch,
    atomic_fetch_add,
    atomic_fetch_and,
    atomic_fetch_inc,
    atomic_fetch_or,
    atomic_fetch_xor,
    atomic_inc,
    atomic_or,
    atomic_set,
    atomic_swap,
    atomic_xor,
    barrier_all,
    broadcast,
    device,
    fcollect,
    fence,
    get,
    get_nbi,
    init,
    KernelModule,
    is_initialized,
    load_module,
    my_pe,
    n_pes,
    ptr,
    put,
    put_nbi,
    put_signal,
    quiet,
    reduce,
    reducescatter,
    signal_fetch,
    signal_op,
    signal_wait_until,
    sync_all,
    team_world,
    test,
    wait_until,
)

__all__ = [
    "DTYPES", "SymmemError", "SymmetricArray", "Team", "alltoall", "atomic_add", "atomic_and",
    "atomic_compare_swap", "atomic_fetch", "atomic_fetch_add", "atomic_fetch_and",
    "atomic_fetch_inc", "atomic_fetch_or", "atomic_fetch_xor", "atomic_inc", "atomic_or",
    "atomic_set", "atomic_swap", "atomic_xor", "barrier_all", "broadcast", "device",
    "dtype_name", "empty", "fcollect", "fence", "finalize", "get", "get_nbi", "init", "is_initialized", "my_pe",
    "n_pes", "ptr", "put", "put_nbi", "put_signal", "quiet", "reduce", "reducescatter",
    "signal_fetch", "signal_op",
    "signal_wait_until", "sync_all", "SymmetricHandle", "rendezvous", "team_world", "test", "wait_until", "zeros",
]


def dtype_name(dtype):
    """numpy's name of ``dtype``: a name (``"float32"``), a numpy dtype or scalar type,
    or a torch dtype (``torch.bfloat16``)."""
    if isinstance(dtype, str):
        name = dtype
    elif hasattr(dtype, "is_floating_point") and str(dtype).startswith("torch."):
        name = str(dtype)[len("torch."):]
    else:
        try:
            import numpy
        except ImportError:
            raise TypeError(f"unsupported dtype {dtype!r} (give its name, e.g. 'float32')")
        name = numpy.dtype(dtype).name
    aliases = {"float": "float32", "double": "float64", "half": "float16", "long": "int64",
               "int": "int32", "bool_": "bool"}
    return aliases.get(name, name)


def _dlpack_nbytes(array):
    """Bytes of a symmetric array, numpy array or torch tensor."""
    if hasattr(array, "numel"):
        return int(array.numel() * array.element_size())
    return int(array.nbytes)


def _shape(shape):
    return (shape,) if isinstance(shape, int) else tuple(shape)


def empty(shape, dtype="float32"):
    """A new symmetric array, uninitialized. Collective: every PE calls it with the same
    shape and dtype, in the same order as its other collective calls."""
    return _native.empty(_shape(shape), dtype_name(dtype))


def zeros(shape, dtype="float32"):
    """A new symmetric array of zeros (collective, as :func:`empty`; ends with a barrier)."""
    return _native.zeros(_shape(shape), dtype_name(dtype))


def finalize():
    """Leaves the job (collective). Refused on every PE while some PE holds numpy/torch
    views of symmetric arrays or has another thread inside a symmem call (the PEs vote);
    also run at interpreter exit, without the vote."""
    _native.finalize()
    from .rendezvous import _forget_all
    _forget_all()


from .rendezvous import SymmetricHandle, rendezvous  # noqa: E402 (needs the above)


@_atexit.register
def _finalize_at_exit():
    if _native.is_initialized():
        # Views still referenced by module globals are never read after this.
        _gc.collect()
        _native.finalize(force=True)
