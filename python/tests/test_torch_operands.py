"""torch tensors as operands read without ``torch.Tensor.__dlpack__`` (the fast path of
python/src/torch_tensor.rs): every type bit-exact, the same refusals and messages as the
``__dlpack__`` path, negated views refused, subclasses, and the tensor's memory held only
for the call."""

import gc
import weakref

import numpy as np
import pytest

import symmem

torch = pytest.importorskip("torch")

DTYPES = [torch.bool, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8,
          torch.uint16, torch.uint32, torch.uint64, torch.float16, torch.bfloat16,
          torch.float32, torch.float64, torch.float8_e4m3fn, torch.float8_e5m2,
          torch.float8_e4m3fnuz, torch.float8_e5m2fnuz]


@pytest.fixture
def no_dlpack(monkeypatch):
    """torch.Tensor.__dlpack__ raising: an operand read through it fails the test."""
    def refuse(self, *args, **kwargs):
        raise AssertionError("torch.Tensor.__dlpack__ was called")

    monkeypatch.setattr(torch.Tensor, "__dlpack__", refuse)


def pattern(pe, dtype):
    """64 bytes of `dtype` that depend on `pe` (any bits but bool's 0/1)."""
    g = torch.Generator().manual_seed(1000 + pe)
    high = 2 if dtype == torch.bool else 256
    return torch.randint(0, high, (64,), dtype=torch.uint8, generator=g).view(dtype)


def bits(t):
    return t.view(torch.uint8)


def test_every_type_moves_bit_exact_without_dlpack(pe, no_dlpack):
    me, n = pe
    right, left = (me + 1) % n, (me - 1) % n
    with symmem.zeros((len(DTYPES), 64), "uint8") as a:
        # Rows of a torch view of a symmetric array, one per type: the symmetric side.
        rows = [row.view(dtype) for row, dtype in zip(torch.from_dlpack(a), DTYPES)]
        for row, dtype in zip(rows, DTYPES):
            symmem.put(row, pattern(me, dtype), right)
        symmem.quiet()
        symmem.barrier_all()
        for row, dtype in zip(rows, DTYPES):
            assert torch.equal(bits(row), bits(pattern(left, dtype))), dtype
            back = torch.empty_like(row)
            symmem.get(back, row, right)
            assert torch.equal(bits(back), bits(pattern(me, dtype))), dtype
        del rows, row, back
        gc.collect()
        symmem.barrier_all()


def test_subclasses_and_requires_grad_take_the_fast_path(pe, no_dlpack):
    me, n = pe

    class Tagged(torch.Tensor):
        pass

    with symmem.zeros((4,), "float32") as a:
        for src in (torch.full((4,), me + 0.5).as_subclass(Tagged),
                    torch.nn.Parameter(torch.full((4,), me + 1.5)),
                    torch.full((4,), me + 2.5, requires_grad=True)):
            symmem.put(a, src, me)
            symmem.quiet()
            assert np.from_dlpack(a).tolist() == [src[0].item()] * 4
        symmem.barrier_all()


def test_a_subclass_that_changes_exports_goes_through_dlpack(pe, no_dlpack):
    me, _ = pe

    class Traced(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return super().__torch_function__(func, types, args, kwargs or {})

    with symmem.zeros((4,), "float32") as a:
        with pytest.raises(AssertionError, match="__dlpack__ was called"):
            symmem.put(a, torch.ones(4).as_subclass(Traced), me)


def refusal(call):
    with pytest.raises(Exception) as e:
        call()
    return e.type, str(e.value)


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor")
def test_refusals_match_the_dlpack_path(pe):
    me, _ = pe

    class Traced(torch.Tensor):  # its __torch_function__ sends it through __dlpack__
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return super().__torch_function__(func, types, args, kwargs or {})

    with symmem.zeros((4,), "float32") as a:
        for bad in (torch.ones(8)[::2], torch.ones(4, dtype=torch.complex64),
                    torch.ones(4, dtype=torch.complex64).conj(), torch.ones(4).to_sparse(),
                    torch.empty(4, device="meta"),
                    torch.quantize_per_tensor(torch.ones(4), 0.1, 0, torch.qint8)):
            fast = refusal(lambda: symmem.put(a, bad, me))
            if bad.layout == torch.strided:
                slow = refusal(lambda: symmem.put(a, bad.as_subclass(Traced), me))
            else:  # no subclass view of a sparse tensor: __dlpack__'s own error, as put's
                kind, message = refusal(bad.__dlpack__)
                slow = kind, f"put: {message}"
            assert fast == slow, bad
        assert "is not contiguous" in refusal(lambda: symmem.put(a, torch.ones(8)[::2], me))[1]
        assert "conjugate bit" in refusal(
            lambda: symmem.put(a, torch.ones(4, dtype=torch.complex64).conj(), me))[1]


def test_a_negated_view_is_refused(pe):
    me, _ = pe
    with symmem.zeros((4,), "float32") as a:
        neg = torch._neg_view(torch.ones(4))
        with pytest.raises(ValueError, match="put: src is a negated view.*resolve_neg"):
            symmem.put(a, neg, me)
        with pytest.raises(ValueError, match="put: dst is a negated view"):
            symmem.put(torch._neg_view(torch.from_dlpack(a)), torch.ones(4), me)
        gc.collect()
        symmem.put(a, neg.resolve_neg(), me)
        symmem.quiet()
        assert np.from_dlpack(a).tolist() == [-1.0] * 4


def test_the_tensor_is_held_for_the_call_only(pe):
    me, n = pe
    with symmem.zeros((1024,), "int64") as a:
        symmem.put(a, torch.full((1024,), me, dtype=torch.int64), (me + 1) % n)
        src = torch.arange(1024)
        gone = weakref.ref(src)
        symmem.put(a, src, me)
        del src
        gc.collect()
        assert gone() is None
        symmem.barrier_all()


def test_a_cuda_tensor_on_a_cpu_pe_is_refused(pe):
    if symmem.device() != "cpu" or not torch.cuda.is_available():
        pytest.skip("needs a CPU PE beside a CUDA device")
    me, _ = pe
    with symmem.zeros((4,), "float32") as a:
        with pytest.raises(ValueError, match=r"put: src is on cuda:\d+, but PE \d+ is a CPU PE"):
            symmem.put(a, torch.ones(4, device="cuda"), me)


def test_a_cuda_tensor_of_this_pes_gpu_takes_the_fast_path(pe, no_dlpack):
    if symmem.device() == "cpu":
        pytest.skip("GPU PEs only")
    me, n = pe
    right, left = (me + 1) % n, (me - 1) % n
    with symmem.zeros((4,), "float32") as a:
        dst = torch.from_dlpack(a)  # on this PE's GPU
        src = torch.full((4,), me + 0.5, device=dst.device)
        symmem.put(dst, src, right)  # queued on torch's current stream
        symmem.barrier_all()  # queued there too
        torch.cuda.current_stream(dst.device).synchronize()
        assert dst.tolist() == [left + 0.5] * 4
        del dst, src
        gc.collect()
