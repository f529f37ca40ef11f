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
  a ``get`` from one on another node. ``input`` may differ in rows between PEs; a missing
  room in ``out`` is a ``ValueError`` on every PE.
- GPU PEs (``_through_native``): nothing reads the splits on the host. Each PE stages its
  splits, rows and ``out`` in the symmetric workspace and queues one
  ``_native.alltoallv`` on the current stream: the runtime's ``stream_team_alltoallv``
  kernel (one block) exchanges the splits between the PEs, computes the offsets on the
  device, moves each peer's rows once (a copy from a peer mapped here, a get through the
  proxy from another node) and ends with a barrier; the results are copied back on the
  same stream. ``input`` and ``out`` must have the same shapes on every PE (they are
  staged in symmetric memory, as torch requires of its symmetric input and out), and
  rows beyond ``out``'s room are dropped (the splits still count them, so
  ``out_splits_offsets[1][-1] + out_splits_offsets[0][-1] > out.shape[0]`` shows it).
  When all four tensors are symmetric already (``symmem.torch.empty``, as torch's
  ``all_to_all_vdev`` requires of them) nothing is staged: the kernel works on them in
  place. Pass symmetric tensors on every PE or on none (a PE that stages may grow the
  workspace, which is collective). It runs on CPU PEs too (the host collective there),
  but staging ``out`` in and out costs two more copies of it than the ``fcollect``
  route, which CPU PEs therefore keep.
"""

import torch as _torch

import symmem as _symmem
from symmem import _native

from ._staging import _as, _call, _on_gpu, _regions

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
        _through_native(input.contiguous(), out, in_splits, out_splits_offsets)
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


def _through_native(input: _torch.Tensor, out: _torch.Tensor, in_splits: _torch.Tensor,
                    out_splits_offsets: _torch.Tensor) -> None:
    """The GPU PEs' route: the operands staged in the symmetric workspace, then one
    ``_native.alltoallv`` queued on the current stream (the runtime's
    ``stream_team_alltoallv`` kernel: splits exchanged and offsets computed on the
    device, each peer's rows moved once), then the results copied back; no host read of
    a split. On CPU PEs the same call is the blocking host collective."""
    n = _native.n_pes()
    row_bytes = _row_bytes(input)
    row = _torch.Size(input.shape[1:]).numel()
    if all(map(_symmetric, (input, out, in_splits, out_splits_offsets))):
        # Symmetric already, as torch's all_to_all_vdev requires: nothing to stage.
        _call(_native.alltoallv, out.view(out.shape[0], row).view(_torch.uint8),
              input.view(input.shape[0], row).view(_torch.uint8), in_splits,
              out_splits_offsets)
        return
    # The splits first, each region's rows after them at a 64-byte boundary.
    head_in, head_out = _aligned(8 * n), _aligned(16 * n)
    in_r, out_r = _regions(head_in + input.shape[0] * row_bytes,
                           head_out + out.shape[0] * row_bytes)
    splits = _as(in_r[:8 * n], _torch.int64, (n,))
    splits.copy_(in_splits)
    rows_in = _as(in_r[head_in:], _torch.uint8, (input.shape[0], row_bytes))
    rows_in.copy_(input.reshape(input.shape[0], row).view(_torch.uint8))
    so = _as(out_r[:16 * n], _torch.int64, (2, n))
    rows_out = _as(out_r[head_out:], _torch.uint8, (out.shape[0], row_bytes))
    mine = out.view(out.shape[0], row).view(_torch.uint8)
    rows_out.copy_(mine)  # rows that receive nothing keep out's values
    _call(_native.alltoallv, rows_out, rows_in, splits, so)
    mine.copy_(rows_out)
    out_splits_offsets.copy_(so)


def _symmetric(t: _torch.Tensor) -> bool:
    """Whether `t` is a contiguous tensor of this PE's symmetric heap (from
    ``symmem.torch.empty``/``zeros``, or a view of one)."""
    try:
        return t.is_contiguous() and _native.ptr(t, _native.my_pe()) is not None
    except (TypeError, ValueError):
        return False


def _aligned(nbytes: int) -> int:
    """`nbytes` rounded up to a multiple of 64."""
    return -(-nbytes // 64) * 64
