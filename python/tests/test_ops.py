"""Symmetric arrays, DLPack and the one-sided operations, on every PE of the job."""

import gc

import numpy as np
import pytest

import symmem
from views import host, on_gpu, view


def test_numpy_sees_the_array_without_a_copy(pe):
    me, _ = pe
    with symmem.zeros((3, 4), np.float32) as a:
        assert (a.shape, a.dtype, a.size, a.nbytes, a.ndim) == ((3, 4), "float32", 12, 48, 2)
        assert symmem.ptr(a, me) == a.address
        if on_gpu():
            # DLPack's kDLCUDA with the PE's device: numpy, host-only, refuses it.
            assert a.__dlpack_device__()[0] == 2
            with pytest.raises(BufferError):
                np.from_dlpack(a)
            return
        assert a.__dlpack_device__() == (1, 0)
        v = np.from_dlpack(a)
        assert v.ctypes.data == a.address and v.shape == (3, 4) and v.dtype == np.float32
        assert (v == 0).all()
        v[1, 2] = 7.5
        assert np.from_dlpack(a)[1, 2] == 7.5
        del v
        gc.collect()


@pytest.mark.parametrize("dtype", ["int8", "uint16", "int32", "float32", "float64", "bool"])
def test_put_and_get_around_the_ring(pe, dtype):
    me, n = pe
    right, left = (me + 1) % n, (me - 1) % n
    with symmem.zeros((5,), dtype) as a:
        src = (np.arange(5) + 10 * me).astype(dtype)
        symmem.put(a, src, right)
        symmem.barrier_all()
        assert (host(a) == (np.arange(5) + 10 * left).astype(dtype)).all()
        got = np.empty(5, dtype)
        symmem.get(got, a, right)
        assert (got == (np.arange(5) + 10 * me).astype(dtype)).all()
        symmem.barrier_all()


def test_nbi_transfers_complete_at_quiet(pe):
    me, n = pe
    with symmem.zeros((1 << 16,), "float64") as a:  # 512 KiB: the GIL is released
        src = np.full(1 << 16, float(me))
        symmem.put_nbi(a, src, (me + 1) % n)
        symmem.quiet()
        symmem.barrier_all()
        back = np.empty_like(src)
        symmem.get_nbi(back, a, (me + 1) % n)
        symmem.quiet()
        assert (back == me).all()
        symmem.barrier_all()


def test_a_view_of_a_symmetric_array_is_a_symmetric_operand(pe):
    me, n = pe
    with symmem.zeros((8,), "int32") as a:
        whole = view(a)
        symmem.put(whole[4:6], np.array([me, me], np.int32), (me + 1) % n)
        symmem.barrier_all()
        assert host(whole).tolist() == [0] * 4 + [(me - 1) % n] * 2 + [0] * 2
        del whole
        gc.collect()
        symmem.barrier_all()


def test_put_signal_and_wait(pe):
    me, n = pe
    with symmem.zeros((16,), "float32") as data, symmem.zeros((1,), "uint64") as sig:
        symmem.put_signal(data, np.full(16, me + 0.5, np.float32), sig, 1, (me + 1) % n, op="add")
        assert symmem.signal_wait_until(sig, "ge", 1, stream="host") == 1
        assert (host(data) == (me - 1) % n + 0.5).all()
        assert symmem.signal_fetch(sig) == 1
        symmem.barrier_all()
        symmem.signal_op(sig, 5, (me + 1) % n, op="set")
        assert symmem.signal_wait_until(sig, "==", 5, stream="host") == 5
        gc.collect()
        symmem.barrier_all()


def test_atomics_on_every_integer_type(pe):
    me, n = pe
    for dtype in ["int32", "int64", "uint32", "uint64"]:
        with symmem.zeros((2,), dtype) as c:
            word = view(c)[1:2]
            old = symmem.atomic_fetch_add(word, 3, 0)
            assert 0 <= old <= 3 * (n - 1)
            symmem.barrier_all()
            assert symmem.atomic_fetch(word, 0) == 3 * n
            symmem.barrier_all()
            if me == 0:
                assert symmem.atomic_swap(word, 9, 0) == 3 * n
                assert symmem.atomic_compare_swap(word, 9, 12, 0) == 9
                assert symmem.atomic_compare_swap(word, 9, 99, 0) == 12
                symmem.atomic_set(word, 0b1100, 0)
                symmem.atomic_or(word, 0b0011, 0)
                symmem.atomic_and(word, 0b0110, 0)
                symmem.atomic_xor(word, 0b0101, 0)
                assert symmem.atomic_fetch_inc(word, 0) == 0b0011
                symmem.atomic_inc(word, 0)
                symmem.atomic_add(word, 10, 0)
                assert symmem.atomic_fetch_or(word, 0, 0) == 15
                assert symmem.atomic_fetch_and(word, 0xFF, 0) == 15
                assert symmem.atomic_fetch_xor(word, 0, 0) == 15
            symmem.barrier_all()
            del word
            gc.collect()


def test_wait_until_and_test(pe):
    me, n = pe
    with symmem.zeros((1,), "int64") as flag:
        assert symmem.test(flag, "eq", 0)
        symmem.barrier_all()
        symmem.atomic_set(flag, me + 100, (me + 1) % n)
        assert symmem.wait_until(flag, "eq", (me - 1) % n + 100) == (me - 1) % n + 100
        assert not symmem.test(flag, "lt", 0)
        symmem.barrier_all()


def test_fence_quiet_and_sync():
    symmem.fence()
    symmem.quiet()
    symmem.sync_all()
    symmem.barrier_all()
