"""The collectives over every PE, on symmetric arrays and views of them."""

import gc

import numpy as np
import pytest

import symmem
from views import fill, host, local


def test_broadcast_fcollect_alltoall(pe):
    me, n = pe
    with symmem.zeros((4,), "float64") as src, symmem.zeros((4,), "float64") as dst:
        fill(src, np.arange(4) + 10 * me)
        symmem.barrier_all()
        symmem.broadcast(dst, src, n - 1)
        assert host(dst).tolist() == (np.arange(4) + 10 * (n - 1)).tolist()
    with symmem.zeros((2,), "int32") as src, symmem.zeros((2 * n,), "int32") as dst:
        fill(src, [me, -me])
        symmem.fcollect(dst, src)
        assert host(dst).tolist() == [x for p in range(n) for x in (p, -p)]
    with symmem.zeros((3 * n,), "uint64") as src, symmem.zeros((3 * n,), "uint64") as dst:
        # Block j of PE p holds 100 p + j: PE j receives 100 p + j from every p.
        fill(src, np.repeat(np.arange(n) + 100 * me, 3))
        symmem.alltoall(dst, src)
        assert host(dst).tolist() == [100 * p + me for p in range(n) for _ in range(3)]
    gc.collect()


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint32", "uint64", "float32", "float64"])
def test_reduce_every_arithmetic_op(pe, dtype):
    me, n = pe
    with symmem.zeros((5,), dtype) as src, symmem.zeros((5,), dtype) as dst:
        fill(src, np.arange(5) + me + 1)
        for op, want in [("sum", sum(np.arange(5) + p + 1 for p in range(n))),
                         ("min", np.arange(5) + 1), ("max", np.arange(5) + n),
                         ("prod", np.prod([np.arange(5) + p + 1 for p in range(n)], axis=0))]:
            symmem.reduce(dst, src, op)
            assert host(dst).tolist() == np.asarray(want, dtype).tolist(), op
        gc.collect()


def test_bitwise_reductions_and_reducescatter(pe):
    me, n = pe
    with symmem.zeros((1,), "uint32") as src, symmem.zeros((1,), "uint32") as dst:
        fill(src, 1 << me)
        symmem.reduce(dst, src, "or")
        assert host(dst)[0] == (1 << n) - 1
        symmem.reduce(dst, src, "and")
        assert host(dst)[0] == (1 if n == 1 else 0)
        symmem.reduce(dst, src, "xor")
        assert host(dst)[0] == (1 << n) - 1
    with symmem.zeros((2 * n,), "float32") as src, symmem.zeros((2,), "float32") as dst:
        fill(src, np.arange(2 * n) + me)
        symmem.reducescatter(dst, src, "sum")
        block = np.arange(2 * n).reshape(n, 2)[me]
        assert host(dst).tolist() == (n * block + sum(range(n))).tolist()
    gc.collect()


def test_collective_argument_errors(pe):
    _, n = pe
    with symmem.zeros((4,), "float32") as a, symmem.zeros((4,), "int32") as b:
        with pytest.raises(TypeError, match="broadcast: dst is float32 but src is int32"):
            symmem.broadcast(a, b, 0)
        with pytest.raises(TypeError, match="and is bitwise"):
            symmem.reduce(a, a, "and")
        with pytest.raises(ValueError, match='unknown reduction "mean"'):
            symmem.reduce(a, a, "mean")
        with pytest.raises(ValueError, match=f"fcollect: dst \\(n_pes × src\\) must hold {4 * n} elements"):
            symmem.fcollect(a, a)
        with pytest.raises(ValueError, match="dst is not symmetric"):
            symmem.reduce(local(np.zeros(4), "float32"), a)
        with pytest.raises(TypeError, match="reduces int32, int64, uint32, uint64, float16, bfloat16, float32 or float64 arrays, got bool"):
            with symmem.zeros((4,), "bool") as c:
                symmem.reduce(c, c)
