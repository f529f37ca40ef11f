"""A torch-style handle on a symmetric buffer, so that code written for
``torch.distributed._symmetric_memory`` ports by renaming:

    buf = symmem.torch.empty((n,), torch.float32)  # or symmem.zeros((n,), "float32")
    hdl = symmem.rendezvous(buf, group)            # collective the first time
    peer = hdl.get_buffer(hdl.rank ^ 1, (n,), torch.float32)
    hdl.barrier(channel=0)

``buffer_ptrs[pe]`` / ``signal_pad_ptrs[pe]`` are the addresses at which this process
reaches each PE's copy (``None`` where a peer is not mapped: another node);
``buffer_ptrs_dev`` / ``signal_pad_ptrs_dev`` are the addresses of those lists as arrays of
``world_size`` uint64 words (0 for an unmapped peer) in the memory this PE's kernels read,
so that a Triton kernel (or any kernel) takes one integer and loads every peer's pointer.
``get_buffer`` and ``get_signal_pad`` are in-place views of a peer's copy (an error naming
the route for an unmapped peer).

The handle is cached per allocation: a second ``rendezvous`` of the same buffer returns the
same handle without a collective. It lives until ``free()`` (collective) or until its
buffer is freed: from then on every use of it raises, and the next ``rendezvous`` that is
not answered from the cache (a collective point) frees its signal pad and pointer arrays on
every PE.
"""

import sys
import time
import typing
from typing import Any, Optional, Sequence, Union

from . import _native

if typing.TYPE_CHECKING:
    import torch
    from torch.distributed import ProcessGroup

#: What :func:`rendezvous` takes as its ``group`` (every PE, by any of its names).
_Group = Union["ProcessGroup", str, _native.Team, None]

__all__ = ["SIGNAL_PAD_SIZE", "SymmetricHandle", "rendezvous"]

#: Bytes of each handle's signal pad: torch's default (``get_signal_pad_size()``).
SIGNAL_PAD_SIZE: int = 9216

#: The pad's uint64 words: the signal words of the handle's ``barrier``, ``put_signal``
#: and ``wait_signal``, ``world_size`` per channel.
_PAD_WORDS = SIGNAL_PAD_SIZE // 8

#: Live handles by the ``id`` of their allocation (which each handle holds, so the id is
#: not reused while it is here).
_handles: "dict[int, SymmetricHandle]" = {}

#: What torch's handle has that this one does not, and why.
_NOT_OFFERED = {
    "boxed": "TorchScript boxing is torch's own",
    "memset32": "use a fill on the tensor of get_buffer, or symmem.put",
    "stream_write_value32": "use symmem.signal_op, or a kernel on the stream",
    "get_peer_cft_handle": "NCCL's copy-engine endpoints are torch's NCCL backend's own",
    "get_multimem_cft_handle": "NCCL's copy-engine endpoints are torch's NCCL backend's own",
}


def _shape(sizes: Union[int, Sequence[int]]) -> "tuple[int, ...]":
    return (sizes,) if isinstance(sizes, int) else tuple(sizes)


def _itemsize(name: str) -> int:
    """Bytes of the symmem dtype ``name`` (one of ``symmem.DTYPES``)."""
    return 1 if name == "bool" else int("".join(c for c in name if c.isdigit())) // 8


def _is_torch_dtype(dtype: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(dtype, torch.dtype)


def _allocation(tensor: Union[_native.SymmetricArray, "torch.Tensor"]) -> _native.SymmetricArray:
    """The symmetric allocation (``SymmetricArray``) that ``tensor`` is, or fails."""
    if isinstance(tensor, _native.SymmetricArray):
        array = tensor
    else:
        held = getattr(tensor, "_symmem_array", None)
        if not isinstance(held, _native.SymmetricArray):
            raise TypeError(
                f"rendezvous: tensor is a {type(tensor).__name__} that is not a symmetric "
                "allocation; pass a SymmetricArray (symmem.empty/zeros) or a tensor of "
                "symmem.torch.empty/zeros itself (a view or slice does not lead back to its "
                "allocation; the handle covers the whole allocation, and get_buffer's "
                "storage_offset reaches any part of it)")
        array = held
    if array.freed:
        raise ValueError(f"rendezvous: the buffer ({array!r}) was freed")
    return array


def _check_group(group: _Group) -> Optional[str]:
    """Fails unless ``group`` spans every PE, numbered as symmem numbers them: symmetric
    allocations are collective over every PE, so a handle of a subgroup cannot exist.
    Decided from the group's own description, the same on every member, before any
    collective (so that no member is left waiting in one). Returns why this process's
    torch rank is not its PE number, or None: that differs between PEs, so the PEs vote
    on it before a collective (:func:`rendezvous`)."""
    n, me = _native.n_pes(), _native.my_pe()
    if group is None:
        return None
    if isinstance(group, _native.Team):
        if group.n_pes != n:
            raise ValueError(
                f"rendezvous: group is a team of {group.n_pes} of the {n} PEs; a handle "
                "spans every PE (symmetric allocations are collective over all of them): "
                "rendezvous with group=None and address the team's PEs through it")
        return
    dist = sys.modules.get("torch.distributed")
    if isinstance(group, str):
        if dist is None or not dist.is_initialized():
            raise ValueError(
                f"rendezvous: group {group!r} names a torch.distributed process group, but "
                "torch.distributed is not initialized; pass group=None for every PE")
        from torch.distributed import distributed_c10d

        try:
            pg = distributed_c10d._resolve_process_group(group)  # type: ignore[arg-type]
        except (KeyError, ValueError, RuntimeError) as e:
            raise ValueError(f"rendezvous: no process group named {group!r} ({e})") from None
        what = f"process group {group!r}"
    elif dist is not None and isinstance(group, dist.ProcessGroup):
        pg = group
        what = f"process group {group.group_name!r}"
    else:
        raise TypeError(
            f"rendezvous: group must be None, a torch.distributed ProcessGroup, a group "
            f"name or a symmem Team of every PE, not {type(group).__name__}")
    ranks = dist.get_process_group_ranks(pg)
    if ranks != list(range(n)):
        raise ValueError(
            f"rendezvous: {what} has the global ranks {ranks}, but a handle spans all {n} "
            f"PEs in order (ranks {list(range(n))}; symmetric allocations are collective "
            "over every PE): rendezvous with the world's group or group=None")
    if dist.get_rank() != me:
        return (f"rendezvous: this process is torch.distributed rank {dist.get_rank()} but "
                f"symmem PE {me}; the handle's ranks would not be the group's (launch both "
                "from the same launcher, e.g. torchrun, so that they agree)")
    return None


class SymmetricHandle:
    """The handle of :func:`rendezvous`, as torch's ``_SymmetricMemory``: ``rank``,
    ``world_size``, ``buffer_size``, ``buffer_ptrs``, ``buffer_ptrs_dev``,
    ``signal_pad_ptrs``, ``signal_pad_ptrs_dev``, ``signal_pad_size``, ``multicast_ptr``
    (0: no multicast object), ``device``, ``offset`` (0), ``get_buffer``, ``get_remote_tensor``,
    ``get_signal_pad``, ``barrier``, ``put_signal``, ``wait_signal``; ``free()`` frees its
    signal pad and pointer arrays (collective). Made by :func:`rendezvous` only."""

    def __init__(self, array: _native.SymmetricArray) -> None:
        self.rank = _native.my_pe()
        self.world_size = n = _native.n_pes()
        self._array = array
        self._freed = False
        self.buffer_size = array.nbytes
        # Collective, in the same order on every PE; zeros() ends with a barrier, so no
        # PE signals into a pad that its owner has not zeroed yet.
        self._pad = _native.zeros((_PAD_WORDS,), "uint64")
        self._tables = _native.empty((2 * n,), "uint64")
        self._buffer_ptrs = [_native.ptr(array, pe) for pe in range(n)]
        self._signal_pad_ptrs = [_native.ptr(self._pad, pe) for pe in range(n)]
        # This PE's copy of the tables, written where its kernels read them (host memory
        # on a CPU PE, device memory on a GPU PE); only this PE reads its copy.
        for i, p in enumerate(self._buffer_ptrs + self._signal_pad_ptrs):
            _native.atomic_set(self._word(self._tables, i), p or 0, self.rank)

    def _word(self, array: _native.SymmetricArray, index: int) -> _native.PeerArray:
        """Word ``index`` of symmetric uint64 ``array``: a symmetric operand naming it."""
        return _native.peer_array(array, self.rank, index, (1,), "uint64")

    def _live(self, op: str) -> None:
        if self._freed:
            raise ValueError(
                f"SymmetricHandle.{op}: the handle was freed (or symmem finalized)")
        if self._array.freed:
            raise ValueError(
                f"SymmetricHandle.{op}: the handle's buffer ({self._array!r}) was freed; "
                "rendezvous a live buffer")

    def __getattr__(self, name: str) -> Any:
        if name in _NOT_OFFERED:
            raise AttributeError(
                f"SymmetricHandle.{name} (of torch's _SymmetricMemory) is not offered by "
                f"symmem: {_NOT_OFFERED[name]}")
        raise AttributeError(f"'SymmetricHandle' object has no attribute {name!r}")

    @property
    def buffer_ptrs(self) -> "list[int | None]":
        """Each PE's copy of the buffer, as this process addresses it (``None``: not
        mapped, another node)."""
        self._live("buffer_ptrs")
        return list(self._buffer_ptrs)

    @property
    def signal_pad_ptrs(self) -> "list[int | None]":
        """Each PE's signal pad, as this process addresses it (``None``: not mapped)."""
        self._live("signal_pad_ptrs")
        return list(self._signal_pad_ptrs)

    @property
    def buffer_ptrs_dev(self) -> int:
        """Address of ``world_size`` uint64 words, ``buffer_ptrs`` with 0 for unmapped
        peers, in memory this PE's kernels read (host memory on a CPU PE, device memory on
        a GPU PE); valid while the handle lives."""
        self._live("buffer_ptrs_dev")
        return self._tables.address

    @property
    def signal_pad_ptrs_dev(self) -> int:
        """Address of ``world_size`` uint64 words, ``signal_pad_ptrs`` with 0 for unmapped
        peers, as ``buffer_ptrs_dev``."""
        self._live("signal_pad_ptrs_dev")
        return self._tables.address + 8 * self.world_size

    @property
    def signal_pad_size(self) -> int:
        """Bytes of each PE's signal pad (zero at rendezvous)."""
        return SIGNAL_PAD_SIZE

    @property
    def multicast_ptr(self) -> int:
        """0: symmem makes no multicast (NVLS) object, as torch reports where a device
        has none."""
        return 0

    @property
    def device(self) -> str:
        """Where the buffer is, as torch names devices: ``"cpu"`` or ``"cuda:N"`` (a
        string, which ``torch.device`` takes)."""
        kind, index = self._array.__dlpack_device__()
        return "cpu" if kind == 1 else f"cuda:{index}"

    @property
    def offset(self) -> int:
        """0: a handle is always on its whole allocation."""
        return 0

    def get_buffer(self, rank: int, sizes: Union[int, Sequence[int]], dtype: Any,
                   storage_offset: int = 0) -> Union["torch.Tensor", _native.PeerArray]:
        """PE ``rank``'s copy as ``sizes`` elements of ``dtype``, from element
        ``storage_offset``, in place: a torch tensor when ``dtype`` is a torch dtype (as
        torch's handle returns), else a DLPack array for ``numpy.from_dlpack`` /
        ``torch.from_dlpack``."""
        from . import dtype_name

        self._live("get_buffer")
        view = _native.peer_array(self._array, rank, storage_offset, _shape(sizes),
                                  dtype_name(dtype))
        if _is_torch_dtype(dtype):
            return sys.modules["torch"].from_dlpack(view)
        return view

    def get_remote_tensor(self, peer: int, sizes: Union[int, Sequence[int]],
                          dtype: Any) -> Union["torch.Tensor", _native.PeerArray]:
        """``get_buffer(peer, sizes, dtype)``, as torch names it."""
        return self.get_buffer(peer, sizes, dtype)

    def get_signal_pad(self, rank: int, sizes: Union[int, Sequence[int], None] = None,
                       dtype: Any = None,
                       storage_offset: int = 0) -> Union["torch.Tensor", _native.PeerArray]:
        """PE ``rank``'s signal pad in place, as ``get_buffer``: by default all of it as
        uint64 words (torch's default is uint32; pass ``dtype`` for another)."""
        from . import dtype_name

        self._live("get_signal_pad")
        name = dtype_name("uint64" if dtype is None else dtype)
        if sizes is None or _shape(sizes) == ():
            sizes = (SIGNAL_PAD_SIZE // _itemsize(name) - storage_offset,)
        view = _native.peer_array(self._pad, rank, storage_offset, _shape(sizes), name)
        if _is_torch_dtype(dtype):
            return sys.modules["torch"].from_dlpack(view)
        return view

    # Signals: word `channel * world_size + sender` of the receiver's pad, 0 -> 1 by the
    # sender (a compare-and-swap: it waits while the receiver has not consumed the last
    # one), 1 -> 0 by the receiver. Torch's barrier and the Triton example's use the same
    # words, so a kernel's barrier and this one pair up.

    def _signal_index(self, op: str, channel: int, peer: int, what: str) -> int:
        if not isinstance(channel, int) or not 0 <= channel < _PAD_WORDS // self.world_size:
            raise ValueError(
                f"SymmetricHandle.{op}: channel {channel!r} is not in 0.."
                f"{_PAD_WORDS // self.world_size - 1} ({self.world_size} signal words per "
                f"channel in a pad of {_PAD_WORDS})")
        if not isinstance(peer, int) or not 0 <= peer < self.world_size:
            raise ValueError(
                f"SymmetricHandle.{op}: {what} {peer!r} is not a PE (0..{self.world_size - 1})")
        return channel * self.world_size

    def _settle(self) -> None:
        """Makes this PE's earlier writes visible before it signals: its puts delivered,
        and on a GPU PE the kernels queued on torch's current stream finished."""
        _native.quiet()
        torch = sys.modules.get("torch")
        if torch is not None and _native.device() != "cpu" and torch.cuda.is_initialized():
            torch.cuda.current_stream().synchronize()

    @staticmethod
    def _deadline(timeout_ms: int) -> "float | None":
        if not isinstance(timeout_ms, int) or timeout_ms < 0:
            raise ValueError(f"timeout_ms {timeout_ms!r} must be an int >= 0 (0: no limit)")
        return time.monotonic() + timeout_ms / 1000 if timeout_ms else None

    def _send(self, op: str, word: _native.PeerArray, dst: int,
              deadline: "float | None") -> None:
        pause = 1e-6
        while _native.atomic_compare_swap(word, 0, 1, dst) != 0:
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(
                    f"SymmetricHandle.{op}: PE {dst} did not take PE {self.rank}'s previous "
                    "signal on this channel in time")
            time.sleep(pause)
            pause = min(2 * pause, 1e-3)

    def _receive(self, op: str, word: _native.PeerArray, src: int,
                 deadline: "float | None") -> None:
        if deadline is None:
            _native.signal_wait_until(word, "eq", 1)
        else:
            pause = 1e-6
            while not _native.test(word, "eq", 1):
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"SymmetricHandle.{op}: no signal from PE {src} reached PE "
                        f"{self.rank} in time")
                time.sleep(pause)
                pause = min(2 * pause, 1e-3)
        _native.atomic_compare_swap(word, 1, 0, self.rank)

    def barrier(self, channel: int = 0, timeout_ms: int = 0) -> None:
        """Waits until every PE reached the barrier of ``channel``, having made its earlier
        writes visible (host-blocking; on a GPU PE it first waits for torch's current
        stream). ``timeout_ms`` > 0 bounds the wait (``TimeoutError``); 0 waits as long as
        ``SYMMEM_TIMEOUT`` allows."""
        self._live("barrier")
        base = self._signal_index("barrier", channel, 0, "rank")
        deadline = self._deadline(timeout_ms)
        self._settle()
        for pe in range(self.world_size):
            self._send("barrier", self._word(self._pad, base + self.rank), pe, deadline)
        for pe in range(self.world_size):
            self._receive("barrier", self._word(self._pad, base + pe), pe, deadline)

    def put_signal(self, dst_rank: int, channel: int = 0, timeout_ms: int = 0) -> None:
        """Signals PE ``dst_rank`` on ``channel`` (its ``wait_signal(src_rank=this PE)``
        returns), after this PE's earlier writes are visible; waits while its previous
        signal there is not consumed."""
        self._live("put_signal")
        base = self._signal_index("put_signal", channel, dst_rank, "dst_rank")
        deadline = self._deadline(timeout_ms)
        self._settle()
        self._send("put_signal", self._word(self._pad, base + self.rank), dst_rank, deadline)

    def wait_signal(self, src_rank: int, channel: int = 0, timeout_ms: int = 0) -> None:
        """Waits for PE ``src_rank``'s ``put_signal`` to this PE on ``channel``, and
        consumes it."""
        self._live("wait_signal")
        base = self._signal_index("wait_signal", channel, src_rank, "src_rank")
        deadline = self._deadline(timeout_ms)
        self._receive("wait_signal", self._word(self._pad, base + src_rank), src_rank,
                      deadline)

    def free(self) -> None:
        """Frees the handle's signal pad and pointer arrays on every PE (collective) and
        drops it from :func:`rendezvous`'s cache; the buffer itself stays."""
        if self._freed:
            raise ValueError("SymmetricHandle.free: the handle was already freed")
        self._pad.free()
        self._tables.free()
        self._freed = True
        if _handles.get(id(self._array)) is self:
            del _handles[id(self._array)]


def _drop_stale() -> None:
    """Frees the handles whose buffers were freed (collective: the same ones on every PE,
    since frees are collective and in the same order)."""
    for hdl in list(_handles.values()):
        if hdl._array.freed:
            try:
                hdl.free()
            except BufferError as e:
                # Refused on every PE alike (the PEs vote), so every PE raises here.
                raise BufferError(
                    "rendezvous: the signal pad of a handle whose buffer was freed cannot be "
                    f"freed yet: {e}") from e


def _forget_all() -> None:
    """Drops every handle without a free: what ``symmem.finalize`` calls, since their
    memory went with the heap."""
    for hdl in _handles.values():
        hdl._freed = True
    _handles.clear()


def rendezvous(tensor: Union[_native.SymmetricArray, "torch.Tensor"],
               group: _Group = None) -> SymmetricHandle:
    """The :class:`SymmetricHandle` of the symmetric allocation ``tensor`` (a
    ``SymmetricArray``, or a tensor of ``symmem.torch.empty/zeros``), as torch's
    ``rendezvous(tensor, group)``. ``group``: ``None`` (every PE), a torch.distributed
    ``ProcessGroup`` or group name, or a symmem ``Team``; it must span every PE, in PE
    order (a ``ValueError`` before any collective otherwise). The first call on an
    allocation is collective (every PE, in the same order as its other collective calls);
    later ones return the same handle without one."""
    array = _allocation(tensor)
    misnumbered = _check_group(group)
    hdl = _handles.get(id(array))
    if hdl is not None and hdl._array is array:
        if misnumbered:
            raise ValueError(misnumbered)
        return hdl
    # A collective follows: every PE learns whether some PE's torch rank is not its PE
    # number, and all refuse together (one PE refusing alone would leave the others
    # waiting in the allocation).
    verdicts = _native.vote(1 if misnumbered else 0)
    if misnumbered:
        raise ValueError(misnumbered)
    if any(verdicts):
        bad = [pe for pe, v in enumerate(verdicts) if v]
        raise ValueError(
            f"rendezvous: refused on every PE: the torch.distributed rank of PE(s) {bad} is "
            "not its PE number (launch both from the same launcher, e.g. torchrun, so that "
            "they agree)")
    _drop_stale()
    hdl = SymmetricHandle(array)
    _handles[id(array)] = hdl
    return hdl
