"""Symmetric memory as torch tensors: the allocation and free behind :mod:`symmem.torch`,
which re-exports them (the ops of :mod:`symmem.torch_ops` stage through these tensors too)."""

from typing import Any, Sequence, Union

import torch as _torch

from . import _native, dtype_name as _dtype_name, empty as _empty, zeros as _zeros

__all__ = ["device", "empty", "zeros", "free"]


def device() -> _torch.device:
    """The torch device of this PE's symmetric heap: ``cpu`` on a CPU PE, ``cuda:N`` (its
    GPU) on a GPU PE. Needs :func:`symmem.init`."""
    ordinal = _native.gpu_ordinal()
    return _torch.device("cpu") if ordinal is None else _torch.device("cuda", ordinal)


def _allocate(shape: Union[int, Sequence[int]], dtype: Any, zero: bool) -> _torch.Tensor:
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    name = _dtype_name(dtype)
    array = _zeros(shape, name) if zero else _empty(shape, name)
    tensor = _torch.from_dlpack(array)
    # The tensor's own reference, for free(); its DLPack capsule holds another.
    tensor._symmem_array = array  # type: ignore[attr-defined]
    return tensor


def empty(shape: Union[int, Sequence[int]], dtype: _torch.dtype = _torch.float32) -> _torch.Tensor:
    """A symmetric torch tensor, uninitialized. Collective: every PE calls it with the same
    shape and dtype, in the same order as its other collective calls."""
    return _allocate(shape, dtype, zero=False)


def zeros(shape: Union[int, Sequence[int]], dtype: _torch.dtype = _torch.float32) -> _torch.Tensor:
    """A symmetric torch tensor of zeros (collective, as :func:`empty`; it ends with a
    barrier, so no PE writes into a peer's copy before that peer zeroed it)."""
    return _allocate(shape, dtype, zero=True)


def free(tensor: _torch.Tensor) -> None:
    """Frees a tensor from :func:`empty`/:func:`zeros` on every PE (collective). The tensor
    is emptied (0 elements), so a later use fails instead of reading memory the next
    allocation reuses. Refused on every PE, changing nothing, while other views of it
    (slices, ``numpy``/``torch.from_dlpack`` of it) are alive on some PE: the PEs vote."""
    array = getattr(tensor, "_symmem_array", None)
    if array is None:
        raise ValueError(
            "symmem.torch.free: the tensor was not returned by symmem.torch.empty/zeros "
            "(a view or slice of one? free the tensor the allocation returned)")
    use_count = getattr(_torch._C, "_storage_Use_Count", None)
    # Views sharing the tensor's storage (slices), which DLPack does not count. Of the
    # storage's references, one is the tensor's and one the temporary storage object's.
    held = 0
    if use_count is not None:
        held = max(use_count(tensor.untyped_storage()._cdata) - 2, 0)

    def release() -> None:
        # Dropping the tensor's storage releases its DLPack view of the array (the `own`
        # view below).
        del tensor._symmem_array  # type: ignore[attr-defined]
        tensor.set_()  # type: ignore[call-overload]  # no arguments: an empty storage

    array.free(held=held, own=1, release=release)
