"""torch tensors over symmetric arrays: the same memory, torch dtypes, and torch tensors as
operands (symmetric views and local sources)."""

import gc

import numpy as np
import pytest

import symmem

torch = pytest.importorskip("torch")


def test_torch_and_numpy_share_the_array(pe):
    me, _ = pe
    with symmem.zeros((2, 3), torch.bfloat16) as a:
        assert a.dtype == "bfloat16"
        t = torch.from_dlpack(a)
        assert t.data_ptr() == a.address and t.dtype == torch.bfloat16 and t.shape == (2, 3)
        assert t.device.type == ("cpu" if a.__dlpack_device__()[0] == 1 else "cuda")
        t.fill_(me + 0.5)
        assert (torch.from_dlpack(a) == me + 0.5).all()
        del t
        gc.collect()
    with symmem.zeros((4,), torch.int64) as b:
        t = torch.from_dlpack(b)
        t[2] = 42
        if t.device.type == "cpu":
            v = np.from_dlpack(b)
            assert v[2] == 42 and v.ctypes.data == t.data_ptr()
        else:
            # numpy cannot see CUDA memory; a second torch view is the same memory.
            v = torch.from_dlpack(b)
            assert v[2].item() == 42 and v.data_ptr() == t.data_ptr()
        del t, v
        gc.collect()


def test_torch_tensors_as_operands(pe):
    me, n = pe
    right, left = (me + 1) % n, (me - 1) % n
    with symmem.zeros((8,), torch.bfloat16) as a, symmem.zeros((1,), torch.uint64) as sig:
        dst = torch.from_dlpack(a)
        src = torch.full((4,), me + 0.25, dtype=torch.bfloat16)
        # The second half of the symmetric tensor: a view is a symmetric operand.
        symmem.put_signal(dst[4:], src, sig, 1, right)
        symmem.signal_wait_until(sig, "ge", 1)
        assert (dst[:4] == 0).all() and (dst[4:] == left + 0.25).all()
        back = torch.empty(4, dtype=torch.bfloat16)
        symmem.get(back, dst[4:], right)
        assert (back == me + 0.25).all()
        with pytest.raises(TypeError, match="dst is bfloat16 but src is float32"):
            symmem.put(dst[4:], torch.zeros(4), right)
        del dst
        gc.collect()
        symmem.barrier_all()


def test_an_atomic_counter_in_a_torch_tensor(pe):
    me, n = pe
    with symmem.zeros((4,), torch.int32) as c:
        counters = torch.from_dlpack(c)
        slot = symmem.atomic_fetch_add(counters[me:me + 1], 1, 0)
        assert slot == 0
        symmem.barrier_all()
        if me == 0:
            assert counters[: min(n, 4)].tolist() == [1] * min(n, 4)
        del counters
        gc.collect()
        symmem.barrier_all()


def test_torch_free_is_refused_on_every_pe_while_one_holds_a_slice(pe):
    import symmem.torch as storch

    me, n = pe
    t = storch.zeros((8,), dtype=torch.int64)
    part = t[2:4] if me == n - 1 else None
    with pytest.raises(BufferError, match=rf"are still alive \(PE {n - 1} holds 1\)"):
        storch.free(t)
    assert t.numel() == 8, "a refused free changed the tensor"
    del part
    gc.collect()
    storch.free(t)
    assert t.numel() == 0
