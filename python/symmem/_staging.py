"""The symmetric workspace through which the torch ops (:mod:`symmem.torch_ops`,
:mod:`symmem.all_to_all_v`) stage their operands, and how they call symmem in the order of
torch's current stream."""

from typing import Any, Callable, Optional, Sequence

import torch as _torch

from symmem import _native
from symmem import _tensors

__all__ = ["free_workspace"]


class _Workspace:
    """A symmetric byte tensor that stages the ops' operands, grown collectively: every
    PE asks for the same size in the same call, so every PE grows it at the same time."""

    def __init__(self) -> None:
        self.tensor: Optional[_torch.Tensor] = None

    def bytes(self, nbytes: int) -> _torch.Tensor:
        """The workspace, at least `nbytes` long (collective when it grows)."""
        tensor = self.tensor
        held = 0 if tensor is None else tensor.numel()
        if tensor is None or held < nbytes:
            self.free()
            # Grows by at least half, so a sequence of rising sizes allocates few times.
            size = max(nbytes, 3 * (held // 2), 4096)
            tensor = self.tensor = _tensors.empty((size,), _torch.uint8)
        return tensor

    def free(self) -> None:
        """Frees the workspace (collective), if there is one."""
        if self.tensor is not None:
            if _on_gpu():
                # Work queued on torch's streams may still use it (a free waits only for
                # the streams symmem made).
                _torch.cuda.synchronize()
            tensor, self.tensor = self.tensor, None
            _tensors.free(tensor)


# Two allocations: a collective's source and destination must be different allocations
# for its stream-ordered form.
_workspaces = (_Workspace(), _Workspace())


def free_workspace() -> None:
    """Frees the symmetric workspace that the ops stage through (collective; the next op
    allocates it again). Call it before ``symmem.finalize()``, which refuses while the
    workspace's tensors are alive."""
    for w in _workspaces:
        w.free()


def _regions(*sizes: int) -> "list[_torch.Tensor]":
    """One uint8 region of each of `sizes` bytes (at most two), each in its own workspace
    allocation (collective when one grows)."""
    return [w.bytes(s)[:s] for w, s in zip(_workspaces, sizes)]


def _as(region: _torch.Tensor, dtype: _torch.dtype, shape: Sequence[int]) -> _torch.Tensor:
    """The uint8 workspace `region` as a tensor of `dtype` and `shape`."""
    return region.view(dtype).view(shape)


def _call(fn: Callable[..., Any], *args: Any) -> Any:
    """Calls symmem's `fn` in the order of torch's current stream: on GPU PEs queued on
    that stream (``stream=``, the handle ``KernelModule.launch`` takes too), so it sees
    the staged data without blocking the host; at once on CPU PEs."""
    if not _on_gpu():
        return fn(*args)
    return fn(*args, stream=_torch.cuda.current_stream().cuda_stream)


def _on_gpu() -> bool:
    return _native.device() != "cpu"
