"""A mixture-of-experts dispatch/combine buffer in the spirit of DeepEP's ``Buffer``
(its normal mode), over ``torch.ops.symmem.all_to_all_v``:

    import symmem, symmem.moe
    buf = symmem.moe.Buffer(hidden=7168, num_experts=64, max_tokens=4096, top_k=8)
    layout = buf.get_dispatch_layout(topk_idx)                # once per routing
    recv_x, recv_expert, handle = buf.dispatch(x, topk_idx, topk_weights, layout)
    y = run_local_experts(recv_x, recv_expert)               # rows in recv_x's order
    out = buf.combine(y, handle)                             # (tokens, hidden)

Experts ``0..num_experts`` are spread evenly over the PEs: expert ``e`` lives on PE
``e // experts_per_pe`` as its local expert ``e % experts_per_pe``. Each token's row goes
once to each expert it chose (``topk_idx[t, j]``; ``-1`` for no expert); ``combine`` returns
each expert's output row to the token's PE and sums them there weighted by
``topk_weights``, in float32, rounded to the tokens' dtype once.

Deterministic by construction: ``dispatch`` receives rows by source PE, then in the
source's send order (by expert, then token), at places the split sizes fix, whatever
order they arrive in; ``combine`` adds each token's weighted rows in top-k order
(``j = 0, 1, ...``, from zero, one float32 product and one addition per choice, no
atomics). Given the same PEs and inputs, the results are the same bits in every run
(``python/tests/test_moe_determinism.py``).

The rows travel with :func:`symmem.torch_ops.all_to_all_v` (both directions; the split
sizes stay on the device). ``dispatch`` reads the number of received rows on the host to
return tensors of that many rows (on GPU PEs: one synchronization of the current stream),
in the custom op ``symmem::leading_rows``, which a compiled graph sees as a data-dependent
size; ``combine`` reads nothing on the host. Both compile with
``torch.compile(fullgraph=True)``: they are torch ops and symmem custom ops throughout.

The Rust MoE kernels of ``examples/kernels`` (``moe_dispatch_*``, ``moe_expert_*``,
``moe_combine``) are not used here: they ship only in the example kernel library, and
their expert kernel applies a stand-in expert function and returns its rows in the same
launch, so a user's torch experts have no place between their dispatch and combine.
"""

from dataclasses import dataclass
from typing import Optional

import torch as _torch

from symmem import _native
from . import torch_ops as _torch_ops  # noqa: F401 (registers torch.ops.symmem.*)

__all__ = ["Buffer", "DispatchHandle", "DispatchLayout"]

_a2av = _torch.ops.symmem.all_to_all_v


@_torch.library.custom_op("symmem::leading_rows", mutates_args=())
def _leading_rows(tensors: list[_torch.Tensor], counts: _torch.Tensor) -> list[_torch.Tensor]:
    """The first ``counts.sum()`` rows of each of ``tensors`` (copies): a count read on
    the host, which a compiled graph sees as one data-dependent size instead of a break."""
    rows = int(counts.sum())
    return [t[:rows].clone() for t in tensors]


@_leading_rows.register_fake
def _(tensors: "list[_torch.Tensor]", counts: _torch.Tensor) -> "list[_torch.Tensor]":
    rows = _torch.library.get_ctx().new_dynamic_size()
    if tensors:
        _torch._check(rows <= tensors[0].shape[0])  # lets shape checks decide statically
    return [t.new_empty((rows,) + tuple(t.shape[1:])) for t in tensors]


@dataclass
class DispatchLayout:
    """Where a routing's rows go (``Buffer.get_dispatch_layout``): ``send_order`` (the
    choices ``token * top_k + j`` in the order they are sent: by expert, unchosen last),
    ``num_rows_per_pe`` and ``num_rows_per_expert`` (int64 counts on the device)."""

    send_order: _torch.Tensor
    num_rows_per_pe: _torch.Tensor
    num_rows_per_expert: _torch.Tensor


@dataclass
class DispatchHandle:
    """What ``Buffer.combine`` needs of a dispatch: the layout, the rows received from
    each PE (``recv_splits``, int64 on the device) and the tokens' weights in send order."""

    layout: DispatchLayout
    recv_splits: _torch.Tensor
    num_tokens: int
    weights: _torch.Tensor


class Buffer:
    """Dispatch and combine of MoE tokens over every PE, for tokens of ``hidden``
    elements of ``dtype``, ``num_experts`` experts spread evenly over the PEs, at most
    ``max_tokens`` tokens per PE per step with ``top_k`` choices each. ``max_recv_rows``
    bounds the rows one PE receives in a dispatch (default: every choice of every PE,
    ``max_tokens * top_k * n_pes``). Every call is collective: every PE makes it, in the
    same order."""

    def __init__(self, hidden: int, num_experts: int, max_tokens: int, top_k: int,
                 dtype: _torch.dtype = _torch.bfloat16,
                 max_recv_rows: Optional[int] = None) -> None:
        n = _native.n_pes()
        for name, v in (("hidden", hidden), ("num_experts", num_experts),
                        ("max_tokens", max_tokens), ("top_k", top_k)):
            if not isinstance(v, int) or v <= 0:
                raise ValueError(f"symmem.moe.Buffer: {name} must be a positive int, got {v!r}")
        if num_experts % n:
            raise ValueError(f"symmem.moe.Buffer: num_experts = {num_experts} does not spread "
                             f"evenly over n_pes = {n}")
        self.hidden, self.num_experts, self.top_k, self.dtype = hidden, num_experts, top_k, dtype
        self.max_tokens, self.n_pes = max_tokens, n
        self.experts_per_pe = num_experts // n
        self.max_recv_rows = max_tokens * top_k * n if max_recv_rows is None else max_recv_rows

    def _check_routing(self, op: str, topk_idx: _torch.Tensor) -> None:
        if topk_idx.dim() != 2 or topk_idx.shape[1] != self.top_k or \
                topk_idx.shape[0] > self.max_tokens:
            raise ValueError(f"symmem.moe.Buffer.{op}: topk_idx must be (tokens <= "
                             f"{self.max_tokens}, top_k = {self.top_k}), got "
                             f"{tuple(topk_idx.shape)}")

    def get_dispatch_layout(self, topk_idx: _torch.Tensor) -> DispatchLayout:
        """The :class:`DispatchLayout` of a routing: ``topk_idx`` (tokens, top_k) holds
        each token's experts (``-1``: none). Local: no PE is involved."""
        self._check_routing("get_dispatch_layout", topk_idx)
        flat = topk_idx.reshape(-1).to(_torch.int64)
        # Unchosen (-1) sort after every expert; a stable sort keeps token order per expert.
        key = _torch.where(flat >= 0, flat, self.num_experts)
        order = _torch.sort(key, stable=True).indices
        per_expert = _torch.bincount(key, minlength=self.num_experts + 1)[:self.num_experts]
        per_pe = per_expert.view(-1, self.experts_per_pe).sum(dim=1)
        return DispatchLayout(order, per_pe, per_expert)

    def dispatch(self, x: _torch.Tensor, topk_idx: _torch.Tensor, topk_weights: _torch.Tensor,
                 layout: DispatchLayout
                 ) -> "tuple[_torch.Tensor, _torch.Tensor, DispatchHandle]":
        """Sends each token row of ``x`` (tokens, hidden) to the PEs of its experts
        (collective). Returns ``(recv_x, recv_expert, handle)``: the rows this PE's experts
        received (grouped by source PE, then by expert), the local expert of each
        (int64), and the handle for :meth:`combine`."""
        self._check_routing("dispatch", topk_idx)
        if tuple(x.shape) != (topk_idx.shape[0], self.hidden) or x.dtype != self.dtype:
            raise ValueError(f"symmem.moe.Buffer.dispatch: x must be ({topk_idx.shape[0]}, "
                             f"{self.hidden}) of {self.dtype}, got {tuple(x.shape)} of "
                             f"{x.dtype}")
        if tuple(topk_weights.shape) != tuple(topk_idx.shape):
            raise ValueError(f"symmem.moe.Buffer.dispatch: topk_weights must be shaped as "
                             f"topk_idx {tuple(topk_idx.shape)}, got "
                             f"{tuple(topk_weights.shape)}")
        order, n = layout.send_order, self.n_pes
        # Inputs of one shape on every PE (GPU PEs stage them in symmetric memory).
        rows = x.new_empty((self.max_tokens * self.top_k, self.hidden))
        rows[:order.shape[0]] = x.index_select(0, order // self.top_k)
        experts = topk_idx.reshape(-1).to(_torch.int64).index_select(0, order)
        local_expert = experts.new_empty((rows.shape[0], 1))
        local_expert[:order.shape[0], 0] = experts % self.experts_per_pe
        recv_x = _torch.empty((self.max_recv_rows, self.hidden), dtype=self.dtype,
                              device=x.device)
        recv_e = _torch.empty((self.max_recv_rows, 1), dtype=_torch.int64, device=x.device)
        splits = _torch.empty((2, n), dtype=_torch.int64, device=x.device)
        _a2av(rows, recv_x, layout.num_rows_per_pe, splits)
        _a2av(local_expert, recv_e, layout.num_rows_per_pe, _torch.empty_like(splits))
        weights = topk_weights.reshape(-1).to(_torch.float32).index_select(0, order)
        handle = DispatchHandle(layout, splits[0], topk_idx.shape[0], weights)
        recv_x, recv_e = _leading_rows([recv_x, recv_e], splits[0])
        return recv_x, recv_e[:, 0], handle

    def combine(self, y: _torch.Tensor, handle: DispatchHandle) -> _torch.Tensor:
        """Returns each row of ``y`` (one per row :meth:`dispatch` received, in its order)
        to its token's PE and sums each token's rows there, weighted by its top-k weights
        (collective). Returns (tokens, hidden) of ``y``'s dtype; a token that chose no
        expert gets zeros."""
        if y.dim() != 2 or y.shape[1] != self.hidden or y.shape[0] > self.max_recv_rows:
            raise ValueError(f"symmem.moe.Buffer.combine: y must be (received rows <= "
                             f"{self.max_recv_rows}, {self.hidden}), got {tuple(y.shape)}")
        n, order = self.n_pes, handle.layout.send_order
        back = _torch.zeros((order.shape[0], self.hidden), dtype=y.dtype, device=y.device)
        padded = y.new_empty((self.max_recv_rows, self.hidden))  # one shape on every PE
        padded[:y.shape[0]] = y
        _a2av(padded, back, handle.recv_splits,
              _torch.empty((2, n), dtype=_torch.int64, device=y.device))
        # The rows come back in send order; the unchosen (sorted last) were never sent.
        sent = _torch.arange(order.shape[0], device=y.device) < \
            handle.layout.num_rows_per_pe.sum()
        weighted = _torch.where(sent.view(-1, 1), back.float() * handle.weights.view(-1, 1),
                                0.0)
        # Each choice's row at its index token * top_k + j (send order is a permutation of
        # them: one write each, no atomics), then each token's rows added in top-k order.
        by_choice = weighted.new_empty(weighted.shape).index_copy_(0, order, weighted)
        by_choice = by_choice.view(handle.num_tokens, self.top_k, self.hidden)
        out = _torch.zeros((handle.num_tokens, self.hidden), dtype=_torch.float32,
                           device=y.device)
        for j in range(self.top_k):
            out = out + by_choice[:, j]
        return out.to(y.dtype)
