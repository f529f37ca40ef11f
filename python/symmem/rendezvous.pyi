"""Types of ``symmem.rendezvous`` (checked against the module by tests/test_stubs.py)."""

from typing import Any, Sequence

from ._native import PeerArray, SymmetricArray

__all__ = ["SIGNAL_PAD_WORDS", "SymmetricHandle", "rendezvous"]

SIGNAL_PAD_WORDS: int

class SymmetricHandle:
    buffer: Any
    rank: int
    world_size: int
    buffer_ptrs: list[int | None]
    buffer_size: int
    signal_pad: SymmetricArray
    signal_pad_ptrs: list[int | None]
    def __init__(self, buffer: Any) -> None: ...
    def get_buffer(self, rank: int, sizes: int | Sequence[int], dtype: Any,
                   storage_offset: int = 0) -> PeerArray: ...
    def get_signal_pad(self, rank: int, sizes: int | Sequence[int] = ...,
                       dtype: Any = "uint64") -> PeerArray: ...
    def barrier(self, channel: int = 0) -> None: ...
    def free(self) -> None: ...

def rendezvous(buffer: Any) -> SymmetricHandle: ...
