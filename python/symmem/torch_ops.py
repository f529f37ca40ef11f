"""symmem's collectives as torch custom ops, ``torch.ops.symmem.*``, for eager code,
``torch.compile(fullgraph=True)`` and CUDA graphs:

    import torch, symmem, symmem.torch               # symmem.torch registers the ops
    symmem.init()
    y = torch.ops.symmem.all_reduce(x, "sum")        # any tensor on this PE's device
    f = torch.compile(lambda x: torch.ops.symmem.all_gather(x * 2) + 1, fullgraph=True)

Every op is collective over all PEs (TEAM_WORLD): each PE calls it with the same shapes,
dtypes and arguments, in the same order (a compiled graph calls them in its own order,
which is the same on every PE). Inputs are ordinary tensors on this PE's device: the ops
stage them through a symmetric workspace that grows collectively to the largest call (call
each op once before capturing a CUDA graph, so that no allocation happens in the capture),
and :func:`free_workspace` gives it back (collective; before ``symmem.finalize()``).

``all_reduce``/``reduce_scatter`` (``op="sum"``), ``all_gather`` and ``all_to_all`` have
gradients (the collective that moves them the other way). The functional ops return new
tensors; ``all_to_all_v`` writes its ``out`` and
``out_splits_offsets`` (as torch's ``symm_mem.all_to_all_vdev``) and keeps the split sizes on
the device. Each has a fake implementation, so tracing never runs a collective.

On GPU PEs the staging copies and the symmem calls run on torch's current stream (the
calls are queued with ``stream=torch.cuda.current_stream().cuda_stream``), so nothing
blocks the host.
"""

from typing import Any, Sequence

import torch as _torch

import symmem as _symmem
from symmem import _native

from ._staging import _as, _call, _regions, free_workspace
from .all_to_all_v import all_to_all_v

__all__ = [
    "REDUCE_OPS", "all_gather", "all_reduce", "all_to_all", "all_to_all_v", "barrier", "broadcast",
    "free_workspace", "reduce_scatter",
]

#: Reduction names the ops take (``min``/``max``/``sum``/``prod`` for every dtype, the
#: bitwise ones for integers), as :func:`symmem.reduce`.
REDUCE_OPS: "tuple[str, ...]" = ("sum", "prod", "min", "max", "and", "or", "xor")

# Element types symmem reduces natively; the others are reduced in a wider type
# (floats in float32, small integers in int64) and rounded back once.
_NATIVE_REDUCE = {_torch.int32, _torch.int64, _torch.uint32, _torch.uint64, _torch.float32,
                  _torch.float64}
_WIDER = {_torch.bfloat16: _torch.float32, _torch.float16: _torch.float32,
          _torch.int8: _torch.int64, _torch.int16: _torch.int64, _torch.uint8: _torch.int64}


def _nbytes(t: _torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _check_op(name: str, op: str) -> None:
    if op not in REDUCE_OPS:
        raise ValueError(f"symmem.{name}: unknown reduction {op!r} ({', '.join(REDUCE_OPS)})")


def _blocks(name: str, t: _torch.Tensor) -> None:
    """Fails unless `t`'s first dimension splits into n_pes equal blocks."""
    n = _native.n_pes()
    if t.dim() == 0 or t.shape[0] % n != 0:
        raise ValueError(f"symmem.{name}: input's first dimension must split into n_pes = {n} "
                         f"equal blocks, input has shape {tuple(t.shape)}")


def _reduction(name: str, t: _torch.Tensor, op: str, out_shape: Sequence[int],
               scatter: bool) -> _torch.Tensor:
    """`t` reduced with `op` over the PEs (all of it, or this PE's block of it when
    `scatter`), computed in a wider type where symmem has no native reduction of `t`'s."""
    _check_op(name, op)
    kind = t.dtype if t.dtype in _NATIVE_REDUCE else _WIDER.get(t.dtype)
    if kind is None:
        raise TypeError(f"symmem.{name}: cannot reduce {t.dtype} tensors (reduces integer "
                        f"and floating dtypes)")
    if kind.is_floating_point and op in ("and", "or", "xor"):
        raise TypeError(f"symmem.{name}: {op} is bitwise: it takes integer tensors, got "
                        f"{t.dtype}")
    elem = _torch.empty((), dtype=kind).element_size()
    out_numel = _torch.Size(out_shape).numel()
    src_r, dst_r = _regions(t.numel() * elem, out_numel * elem)
    src = _as(src_r, kind, t.shape)
    src.copy_(t)
    dst = _as(dst_r, kind, out_shape)
    if scatter:
        _call(_symmem.reducescatter, dst.view(-1), src.view(-1), op)
    else:
        _call(_symmem.reduce, dst.view(-1), src.view(-1), op)
    return _torch.empty(out_shape, dtype=t.dtype, device=t.device).copy_(dst)


@_torch.library.custom_op("symmem::all_reduce", mutates_args=())
def all_reduce(input: _torch.Tensor, op: str = "sum") -> _torch.Tensor:
    """``input`` combined element by element over every PE with ``op`` (``sum``,
    ``prod``, ``min``, ``max``, and for integers ``and``, ``or``, ``xor``); bf16 and fp16
    are summed in float32 and rounded once."""
    return _reduction("all_reduce", input.contiguous(), op, input.shape, scatter=False)


@all_reduce.register_fake
def _(input: _torch.Tensor, op: str = "sum") -> _torch.Tensor:
    _check_op("all_reduce", op)
    return _torch.empty_like(input, memory_format=_torch.contiguous_format)


def _gathered_shape(t: _torch.Tensor) -> _torch.Size:
    n = _native.n_pes()
    if t.dim() == 0:
        return _torch.Size((n,))
    return _torch.Size((n * t.shape[0],) + tuple(t.shape[1:]))


@_torch.library.custom_op("symmem::all_gather", mutates_args=())
def all_gather(input: _torch.Tensor) -> _torch.Tensor:
    """Every PE's ``input`` concatenated along the first dimension in PE order (as torch's
    ``all_gather_into_tensor``; a 0-d input gives one element per PE)."""
    t = input.contiguous()
    shape = _gathered_shape(t)
    src_r, dst_r = _regions(_nbytes(t), _nbytes(t) * _native.n_pes())
    src = _as(src_r, t.dtype, t.shape)
    src.copy_(t)
    dst = _as(dst_r, t.dtype, shape)
    _call(_symmem.fcollect, dst, src)
    return dst.clone()


@all_gather.register_fake
def _(input: _torch.Tensor) -> _torch.Tensor:
    return input.new_empty(_gathered_shape(input))


def _scattered_shape(t: _torch.Tensor) -> _torch.Size:
    return _torch.Size((t.shape[0] // _native.n_pes(),) + tuple(t.shape[1:]))


@_torch.library.custom_op("symmem::reduce_scatter", mutates_args=())
def reduce_scatter(input: _torch.Tensor, op: str = "sum") -> _torch.Tensor:
    """Block ``my_pe()`` (of ``n_pes()`` along the first dimension) of ``input`` combined
    over every PE with ``op`` (as :func:`all_reduce`), as torch's
    ``reduce_scatter_tensor``."""
    _blocks("reduce_scatter", input)
    return _reduction("reduce_scatter", input.contiguous(), op, _scattered_shape(input),
                      scatter=True)


@reduce_scatter.register_fake
def _(input: _torch.Tensor, op: str = "sum") -> _torch.Tensor:
    _check_op("reduce_scatter", op)
    _blocks("reduce_scatter", input)
    return input.new_empty(_scattered_shape(input))


@_torch.library.custom_op("symmem::all_to_all", mutates_args=())
def all_to_all(input: _torch.Tensor) -> _torch.Tensor:
    """Block ``j`` (of ``n_pes()`` equal blocks along the first dimension) of ``input``
    goes to PE ``j``; the result holds every PE's block for this PE, in PE order (as torch's
    ``all_to_all_single`` with equal splits)."""
    _blocks("all_to_all", input)
    t = input.contiguous()
    src_r, dst_r = _regions(_nbytes(t), _nbytes(t))
    src = _as(src_r, t.dtype, t.shape)
    src.copy_(t)
    dst = _as(dst_r, t.dtype, t.shape)
    _call(_symmem.alltoall, dst, src)
    return dst.clone()


@all_to_all.register_fake
def _(input: _torch.Tensor) -> _torch.Tensor:
    _blocks("all_to_all", input)
    return _torch.empty_like(input, memory_format=_torch.contiguous_format)


def _check_root(name: str, root: int) -> None:
    n = _native.n_pes()
    if not 0 <= root < n:
        raise ValueError(f"symmem.{name}: root {root} is not a PE (0..{n - 1})")


@_torch.library.custom_op("symmem::broadcast", mutates_args=())
def broadcast(input: _torch.Tensor, root: int) -> _torch.Tensor:
    """PE ``root``'s ``input`` on every PE (every PE passes a tensor of its shape)."""
    _check_root("broadcast", root)
    t = input.contiguous()
    src_r, dst_r = _regions(_nbytes(t), _nbytes(t))
    src = _as(src_r, t.dtype, t.shape)
    src.copy_(t)
    dst = _as(dst_r, t.dtype, t.shape)
    _call(_symmem.broadcast, dst, src, root)
    return dst.clone()


@broadcast.register_fake
def _(input: _torch.Tensor, root: int) -> _torch.Tensor:
    _check_root("broadcast", root)
    return _torch.empty_like(input, memory_format=_torch.contiguous_format)


@_torch.library.custom_op("symmem::barrier", mutates_args=())
def barrier() -> None:
    """Waits until every PE reaches it (``symmem.barrier_all``: also completes this PE's
    outstanding puts); kept by ``torch.compile`` although it returns nothing."""
    _call(_symmem.barrier_all)


@barrier.register_fake
def _() -> None:
    return None




# Gradients, for a loss that is the sum of every PE's own loss (data-parallel SPMD, as
# torch.distributed.nn's collectives): each backward is the collective that moves the
# gradients the other way, so every PE runs it in the same backward step.

def _save_op(ctx: Any, inputs: "tuple[Any, ...]", output: _torch.Tensor) -> None:
    ctx.op = inputs[1]


def _sum_only(name: str, op: str) -> None:
    if op != "sum":
        raise RuntimeError(f"symmem.{name}: the gradient is defined for op='sum' only, "
                           f"the forward used {op!r}")


def _all_reduce_backward(ctx: Any, grad: _torch.Tensor) -> "tuple[_torch.Tensor, None]":
    _sum_only("all_reduce", ctx.op)
    return all_reduce(grad, "sum"), None


def _all_gather_backward(ctx: Any, grad: _torch.Tensor) -> _torch.Tensor:
    return reduce_scatter(grad.contiguous(), "sum")


def _reduce_scatter_backward(ctx: Any, grad: _torch.Tensor) -> "tuple[_torch.Tensor, None]":
    _sum_only("reduce_scatter", ctx.op)
    return all_gather(grad.contiguous()), None


def _all_to_all_backward(ctx: Any, grad: _torch.Tensor) -> _torch.Tensor:
    return all_to_all(grad.contiguous())


all_reduce.register_autograd(_all_reduce_backward, setup_context=_save_op)
all_gather.register_autograd(_all_gather_backward)
reduce_scatter.register_autograd(_reduce_scatter_backward, setup_context=_save_op)
all_to_all.register_autograd(_all_to_all_backward)

# Collectives must run on every PE even when a graph does not use their result: dead code
# elimination would otherwise drop them (on every PE alike, but a barrier's effect is all
# it has).
for _name in ("barrier", "all_reduce", "all_gather", "reduce_scatter", "all_to_all",
              "broadcast", "all_to_all_v"):
    _torch.fx.node.has_side_effect(getattr(_torch.ops.symmem, _name).default)
