"""Symmetric memory as torch tensors.

    import torch, symmem, symmem.torch
    symmem.init()
    x = symmem.torch.zeros((1024, 512), dtype=torch.bfloat16)   # collective
    symmem.put(x[0], torch.ones(512, dtype=torch.bfloat16), (symmem.my_pe() + 1) % symmem.n_pes())
    symmem.barrier_all()
    symmem.torch.free(x)                                         # collective

The tensors live on this PE's device (:func:`device`: ``cpu`` on CPU PEs, ``cuda:N`` on
GPU PEs), are ordinary torch tensors for every torch operation, and are symmetric operands
(with every view of them) for every symmem operation and kernel launch. The tensor owns
its symmetric allocation. A free is collective, so one PE never frees it alone when the
tensor is garbage-collected: a ``symmem.UnfreedArrayWarning`` (a ``RuntimeWarning``,
shown by default) says so, and the allocation is freed at the next collective allocation,
free or finalize at which every PE has dropped it.
"""

# Importing torch_ops registers torch.ops.symmem.*.
from . import torch_ops as _torch_ops  # noqa: F401
from ._tensors import device, empty, free, zeros

__all__ = ["device", "empty", "zeros", "free"]
