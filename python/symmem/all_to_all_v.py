"""``torch.ops.symmem.all_to_all_v``: an all-to-all of rows with per-peer counts that stay
on the device, as torch's ``symm_mem.all_to_all_vdev(input, out, in_splits,
out_splits_offsets, group_name)`` (without the group: all PEs).

``in_splits[j]`` (int64, ``n_pes`` elements) rows of ``input`` go to PE ``j``, in PE order
from row 0; PE ``i``'s rows for this PE land in ``out`` in PE order, packed from row 0, and
the op writes ``out_splits_offsets[0][i]`` (rows from PE ``i``) and
``out_splits_offsets[1][i]`` (the row of ``out`` where they start). Rows are everything
after the first dimension; ``input`` and ``out`` have the same row shape and dtype, and
``out`` must have room for every row sent here.

Two routes, picked by the PE kind:

- CPU PEs (``_through_host``): the PEs exchange every PE's splits with one ``fcollect``, then
  each PE pulls its rows from its peers' staged inputs: one copy from a peer mapped here,
  a ``get`` from one on another node. ``input`` may differ in rows between PEs; a missing room in ``out`` is a
  ``ValueError`` on every PE.
- GPU PEs (``_through_peer_views``): nothing reads the splits on the host. Each PE stages
  its splits and rows, a barrier, then every PE reads its peers' splits and rows through
  their mapped memory with torch gathers on the current stream, and a second barrier.
  The barriers are queued on the current stream too. ``input must have the same shape on every
  PE (it is staged in symmetric memory, as torch requires of its symmetric input), every
  peer must be mapped (same node), and rows beyond ``out``'s room are dropped (the splits
  still count them). Each peer costs one gather over ``out``'s rows: a device kernel that
  copies each peer's run once is the faster form still to write.
"""

from typing import Sequence

import torch as _torch

import symmem as _symmem
from symmem import _native

__all__ = ["all_to_all_v"]

_OP = "symmem.all_to_all_v"


def _check(input: _torch.Tensor, out: _torch.Tensor, in_splits: _torch.Tensor,
           out_splits_offsets: _torch.Tensor) -> None:
    """Fails, naming the argument, unless the operands fit together."""
    n = _native.n_pes()
    if input.dim() == 0 or out.dim() == 0:
        raise ValueError(f"{_OP}: input and out need a first dimension of rows")
    if input.dtype != out.dtype or input.shape[1:] != out.shape[1:]:
        raise TypeError(f"{_OP}: out's rows ({out.dtype}, {tuple(out.shape[1:])}) differ from "
                        f"input's ({input.dtype}, {tuple(input.shape[1:])})")
    if in_splits.dtype != _torch.int64 or tuple(in_splits.shape) != (n,):
        raise ValueError(f"{_OP}: in_splits must be int64 of shape ({n},), got "
                         f"{in_splits.dtype} {tuple(in_splits.shape)}")
    if out_splits_offsets.dtype != _torch.int64 or tuple(out_splits_offsets.shape) != (2, n):
        raise ValueError(f"{_OP}: out_splits_offsets must be int64 of shape (2, {n}), got "
                         f"{out_splits_offsets.dtype} {tuple(out_splits_offsets.shape)}")
    if not out.is_contiguous():
        raise ValueError(f"{_OP}: out must be contiguous (it is written in place)")


@_torch.library.custom_op("symmem::all_to_all_v", mutates_args=("out", "out_splits_offsets"))
def all_to_all_v(input: _torch.Tensor, out: _torch.Tensor, in_splits: _torch.Tensor,
                 out_splits_offsets: _torch.Tensor) -> None:
    """Sends ``in_splits[j]`` rows of ``input`` to PE ``j`` and packs the rows each PE sent
    here into ``out`` in PE order, writing ``out_splits_offsets`` (row 0: rows from each
    PE, row 1: where they start in ``out``). Collective; the splits stay on the device on
    GPU PEs (see the module's docstring for each PE kind's route and limits)."""
    _check(input, out, in_splits, out_splits_offsets)
    if _on_gpu():
        _through_peer_views(input.contiguous(), out, in_splits, out_splits_offsets)
    else:
        _through_host(input.contiguous(), out, in_splits, out_splits_offsets)


@all_to_all_v.register_fake
def _(input: _torch.Tensor, out: _torch.Tensor, in_splits: _torch.Tensor,
      out_splits_offsets: _torch.Tensor) -> None:
    _check(input, out, in_splits, out_splits_offsets)


def _row_bytes(t: _torch.Tensor) -> int:
    return _torch.Size(t.shape[1:]).numel() * t.element_size()


def _through_host(input: _torch.Tensor, out: _torch.Tensor, in_splits: _torch.Tensor,
                  out_splits_offsets: _torch.Tensor) -> None:
    """The CPU PEs' route: every PE's splits by ``fcollect``, then each peer's rows for
    this PE from its staged input (a copy from a mapped peer, else ``get``)."""
    me, n = _native.my_pe(), _native.n_pes()
    # Each PE's header: its splits, then its input's rows and out's room.
    w = n + 2
    header = _torch.cat([in_splits.to("cpu"), _torch.tensor([input.shape[0], out.shape[0]])])
    src_r, dst_r = _regions(8 * w, 8 * n * w)
    _as(src_r, _torch.int64, (w,)).copy_(header)
    dst = _as(dst_r, _torch.int64, (n, w))
    _symmem.fcollect(dst, _as(src_r, _torch.int64, (w,)))
    table = dst.clone()
    del src_r, dst_r, dst
    # sent[i][j]: rows PE i sends to PE j; rows[i], room[i]: PE i's input and out rows.
    sent, rows, room = table[:, :n], table[:, n], table[:, n + 1]
    bad = (sent < 0).any(dim=1) | (sent.sum(dim=1) > rows)
    if bad.any():
        pe = int(bad.nonzero()[0])
        raise ValueError(f"{_OP}: PE {pe}'s in_splits {sent[pe].tolist()} are negative or "
                         f"exceed its input's {int(rows[pe])} rows")
    counts = sent[:, me]
    offsets = _torch.cumsum(counts, 0) - counts
    need = sent.sum(dim=0)
    if (need > room).any():
        pe = int((need > room).nonzero()[0])
        raise ValueError(f"{_OP}: PE {pe} receives {int(need[pe])} rows but its out has "
                         f"room for {int(room[pe])}")
    row_bytes = _row_bytes(input)
    (data_r,) = _regions(max(int(rows.max()) * row_bytes, 1))
    staged = _as(data_r[:input.shape[0] * row_bytes], input.dtype, input.shape)
    staged.copy_(input)
    _symmem.barrier_all()  # every PE's rows are staged
    for i in range(n):
        c = int(counts[i])
        if c == 0:
            continue
        start = int(sent[i, :me].sum())
        dst_rows = out.narrow(0, int(offsets[i]), c)
        if i == me:
            dst_rows.copy_(staged.narrow(0, start, c))
            continue
        peer_rows = _as(data_r[start * row_bytes:(start + c) * row_bytes], input.dtype,
                        dst_rows.shape)
        if _native.ptr(peer_rows, i) is None:
            _symmem.get(dst_rows, peer_rows, i)  # another node: through the transport
        else:  # mapped here: one copy straight from the peer's memory
            dst_rows.copy_(_torch.from_dlpack(_native.peer_array(
                peer_rows, i, 0, tuple(dst_rows.shape), _symmem.dtype_name(input.dtype))))
    _symmem.barrier_all()  # no PE restages before every PE has read its rows
    out_splits_offsets[0].copy_(counts)
    out_splits_offsets[1].copy_(offsets)


def _through_peer_views(input: _torch.Tensor, out: _torch.Tensor, in_splits: _torch.Tensor,
                        out_splits_offsets: _torch.Tensor) -> None:
    """The GPU PEs' route: splits and rows read from the peers' staged copies through their
    mapped memory with torch ops on the current stream; no host read of a split."""
    me, n = _native.my_pe(), _native.n_pes()
    row_bytes = _row_bytes(input)
    split_r, data_r = _regions(8 * n, max(input.shape[0] * row_bytes, 1))
    for pe in range(n):
        if _native.ptr(split_r, pe) is None:
            raise _symmem.SymmemError(
                f"{_OP}: PE {pe} is not mapped here (another node); on GPU PEs all_to_all_v "
                f"reads its peers' memory directly and needs every PE on this node")
    _as(split_r, _torch.int64, (n,)).copy_(in_splits)
    staged = _as(data_r[:input.shape[0] * row_bytes], input.dtype, input.shape)
    staged.copy_(input)
    _call(_symmem.barrier_all)  # every PE's splits and rows are staged
    name = _symmem.dtype_name(input.dtype)

    def peer(region: _torch.Tensor, pe: int, shape: Sequence[int],
             dtype_name: str) -> _torch.Tensor:
        return _torch.from_dlpack(_native.peer_array(region, pe, 0, shape, dtype_name))

    sent = _torch.stack([peer(split_r, i, (n,), "int64") for i in range(n)])
    counts = sent[:, me]
    offsets = _torch.cumsum(counts, 0) - counts
    starts = sent[:, :me].sum(dim=1)  # where PE i's rows for me start in its input
    rows = _torch.arange(out.shape[0], device=out.device)
    mask_shape = (-1,) + (1,) * (out.dim() - 1)
    if input.shape[0]:
        for i in range(n):
            mine = (rows >= offsets[i]) & (rows < offsets[i] + counts[i])
            src = (rows - offsets[i] + starts[i]).clamp(0, input.shape[0] - 1)
            theirs = peer(data_r, i, tuple(input.shape), name).index_select(0, src)
            out.copy_(_torch.where(mine.view(mask_shape), theirs, out))
    out_splits_offsets[0].copy_(counts)
    out_splits_offsets[1].copy_(offsets)
    del sent
    _call(_symmem.barrier_all)  # no PE restages before every PE has read its rows


# Last: torch_ops imports this module's op at its own end, so either module can be imported
# first (this one's op is defined by the time torch_ops asks for it).
from .torch_ops import _as, _call, _on_gpu, _regions  # noqa: E402
