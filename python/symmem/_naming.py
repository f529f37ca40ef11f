"""Errors that name their operation. The native functions check their arguments and name
the operation in every error they raise, but an argument that pyo3 cannot convert to the
parameter's Rust type (``pe=-1`` for a ``usize``, a float where an int goes) fails before
the function runs, with pyo3's message and no operation. The package wraps every public
native function and method with :func:`named`, which puts the operation's name in front
of such a message and turns pyo3's ``OverflowError`` into a ``ValueError`` that names the
argument. The wrapper keeps the native signature (``inspect.signature`` follows it)."""

import functools
import inspect
from typing import Any, Callable, Dict, Tuple, TypeVar

__all__ = ["name_methods", "named"]

_F = TypeVar("_F", bound=Callable[..., Any])

#: Exception types whose message gets the operation's name when it lacks it.
_NAMED = (TypeError, ValueError, BufferError)


def _out_of_range(fn: Callable[..., Any], args: Tuple[Any, ...],
                  kwargs: Dict[str, Any]) -> str:
    """Which int argument of the call overflowed its parameter, in words."""
    try:
        sig = inspect.signature(fn)
        bound = sig.bind(*args, **kwargs)
    except (TypeError, ValueError):
        return "an int argument is out of range"
    # Named parameters only: what *args carries (a kernel's arguments) is converted by
    # the function itself, which names it.
    ints = [(name, value) for name, value in bound.arguments.items()
            if sig.parameters[name].kind not in (inspect.Parameter.VAR_POSITIONAL,
                                                 inspect.Parameter.VAR_KEYWORD)
            and isinstance(value, int) and not isinstance(value, bool)]
    for name, value in ints:
        if value < 0:
            return f"{name} must be a non-negative int, got {value}"
    for name, value in ints:
        if value >= 1 << 63:
            return f"{name} = {value} is too large"
    return "an int argument is out of range"


def named(fn: _F, op: str = "") -> _F:
    """``fn`` (a native function or method), raising errors that start with ``op`` (by
    default its name)."""
    op = op or fn.__name__

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except OverflowError:
            raise ValueError(f"{op}: {_out_of_range(fn, args, kwargs)}") from None
        except _NAMED as e:
            if e.args and isinstance(e.args[0], str) and not e.args[0].startswith(op):
                e.args = (f"{op}: {e.args[0]}",) + e.args[1:]
            raise

    return call  # type: ignore[return-value]


def name_methods(cls: type) -> None:
    """Wraps every public method of the native class ``cls`` with :func:`named`."""
    for attr, value in list(vars(cls).items()):
        if not attr.startswith("_") and inspect.ismethoddescriptor(value) \
                and not inspect.isdatadescriptor(value):
            setattr(cls, attr, named(value, attr))
