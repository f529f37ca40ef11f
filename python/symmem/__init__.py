"""symmem for Python: NVSHMEM-style symmetric memory between processes (PEs).

    import numpy as np, symmem
    symmem.init()                                  # joins the job the launcher started
                                                   # (or: symmem.init(group=pg) in torch)
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
for bad arguments, ``TimeoutError`` for a wait past ``SYMMEM_TIMEOUT``, ``BufferError``
for an array that was freed or finalized or still has views, ``SymmemError`` for the rest;
each names the operation and what was wrong. Waits release the GIL and stop on Ctrl-C.
"""

import atexit as _atexit
import gc as _gc
import types as _types
from typing import Any as _Any, Optional as _Optional, Sequence as _Sequence, Union as _Union

from . import _native, _naming
from ._native import (
    DTYPES,
    SymmemError,
    SymmetricArray,
    Team,
    UnfreedArrayWarning,
    UniqueId,
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
    get_unique_id,
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
    "KernelModule", "load_module", "UnfreedArrayWarning", "UniqueId", "get_unique_id",
]


def dtype_name(dtype: _Any) -> str:
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
        try:
            name = numpy.dtype(dtype).name
        except TypeError:
            raise TypeError(f"unsupported dtype {dtype!r} (give its name, e.g. 'float32', "
                            "a numpy dtype or a torch dtype)") from None
    aliases = {"float": "float32", "double": "float64", "half": "float16", "long": "int64",
               "int": "int32", "bool_": "bool"}
    return aliases.get(name, name)


def _dtype_of(op: str, dtype: _Any) -> str:
    """:func:`dtype_name` of ``dtype``, argument of ``op`` (named in the error)."""
    try:
        return dtype_name(dtype)
    except TypeError as e:
        raise TypeError(f"{op}: {e}") from None


def _dlpack_nbytes(array: _Any) -> int:
    """Bytes of a symmetric array, numpy array or torch tensor."""
    if hasattr(array, "numel"):
        return int(array.numel() * array.element_size())
    return int(array.nbytes)


def _shape(shape: _Union[int, _Sequence[int]]) -> "tuple[int, ...]":
    return (shape,) if isinstance(shape, int) else tuple(shape)


def empty(shape: _Union[int, _Sequence[int]], dtype: _Any = "float32") -> SymmetricArray:
    """A new symmetric array, uninitialized. Collective: every PE calls it with the same
    shape and dtype, in the same order as its other collective calls (a collective point:
    arrays every PE dropped without ``free()`` are freed first)."""
    return _named_empty(_shape(shape), _dtype_of("empty", dtype))


def zeros(shape: _Union[int, _Sequence[int]], dtype: _Any = "float32") -> SymmetricArray:
    """A new symmetric array of zeros (collective, as :func:`empty`; ends with a barrier)."""
    return _named_zeros(_shape(shape), _dtype_of("zeros", dtype))


def init(*, group: _Any = None, unique_id: _Union[UniqueId, str, None] = None,
         rank: _Optional[int] = None, n_pes: _Optional[int] = None,
         heap_size: _Union[int, str, None] = None) -> None:
    """Joins the job (collective: every PE calls it).

    - ``init()``: the job the launcher started (``python -m symmem.run``, torchrun, srun,
      mpirun, Kubernetes variables, or one PE alone).
    - ``init(group=pg)``: the processes of the ``torch.distributed`` process group ``pg``
      (``torch.distributed.group.WORLD`` for the default group), PE numbers their ranks in
      it: its rank 0 makes a unique id and broadcasts it over ``pg``.
    - ``init(unique_id=uid, rank=r, n_pes=n)``: PE ``r`` of ``n``, for a program that sends
      the id of :func:`get_unique_id` (made on PE 0, which keeps it) to every PE itself.

    ``heap_size`` (bytes, or ``"512M"``, ``"2G"``) replaces ``SYMMEM_SYMMETRIC_SIZE``; every
    PE passes the same. A second call does nothing, or fails if given arguments."""
    if group is None:
        _native_init(heap_size=heap_size, unique_id=unique_id, rank=rank, n_pes=n_pes)
        return
    if unique_id is not None or rank is not None or n_pes is not None:
        raise ValueError("init: group= makes the unique id and numbers the PEs by their ranks "
                         "in the group; pass it without unique_id, rank and n_pes")
    if _native.is_initialized():
        # Before any collective: every member of the group is in the same state.
        raise SymmemError("init: symmem is already initialized; heap_size, unique_id and "
                          "group apply to the first init (call finalize first)")
    import torch.distributed as dist

    if not dist.is_initialized():
        raise ValueError("init: group= needs torch.distributed initialized "
                         "(torch.distributed.init_process_group) first")
    me, size = dist.get_rank(group), dist.get_world_size(group)
    if me < 0:
        raise ValueError("init: this process is not a member of group")
    # PE 0 keeps its id object: it hosts the rendezvous on the id's listening socket.
    mine = _native.get_unique_id() if me == 0 else None
    box = [str(mine) if mine is not None else None]
    root = dist.get_global_rank(group, 0) if group is not dist.group.WORLD else 0
    dist.broadcast_object_list(box, src=root, group=group)
    _native_init(heap_size=heap_size, unique_id=mine if me == 0 else box[0], rank=me,
                 n_pes=size)


def finalize() -> None:
    """Leaves the job (collective). Refused on every PE while some PE holds numpy/torch
    views or peer views of symmetric arrays or has another thread inside a symmem call
    (the PEs vote); arrays every PE dropped without ``free()`` are freed first. Also run
    at interpreter exit, without the vote. Afterwards every symmetric array refuses every
    use (``BufferError``)."""
    _native.finalize()
    from .rendezvous import _forget_all
    _forget_all()


def _name_native_errors(namespace: "dict[str, _Any]") -> None:
    """Every native function and method that ``__all__`` exports raises errors naming its
    operation, also for arguments pyo3 cannot convert (see ``_naming``)."""
    for name in __all__:
        value = namespace.get(name)
        if isinstance(value, _types.BuiltinFunctionType):
            namespace[name] = _naming.named(value)
        elif isinstance(value, type) and value.__module__ == _native.__name__:
            _naming.name_methods(value)


_native_init = _naming.named(_native.init)
_named_empty = _naming.named(_native.empty)
_named_zeros = _naming.named(_native.zeros)
_name_native_errors(globals())


from .rendezvous import SymmetricHandle, rendezvous  # noqa: E402 (needs the above)


@_atexit.register
def _finalize_at_exit() -> None:
    if _native.is_initialized():
        # Views still referenced by module globals are never read after this.
        _gc.collect()
        _native.finalize(force=True)
