"""Stream-ordered operations (``stream=``), 16-bit float reductions and fp8 moves.

On CPU PEs: ``stream=None`` and ``stream="host"`` run at once, a CUDA stream is refused
naming the operation, bad ``stream=`` values are refused; bf16 and fp16 reductions match a
torch reference; fp8 tensors move bit-exact through put, get, put_signal, broadcast,
fcollect and alltoall, and reductions and atomics refuse them naming the operation.

On GPU PEs (the GPU bundle) the tests marked ``gpu`` check the ordering itself: a long
producer (``torch.cuda._sleep`` then a fill) on a stream, then a stream put, get,
put_signal, collective or kernel launch that must see the producer's result, with the
call returning while the producer still runs (the stream is still busy when it returns:
the copy cannot have run yet)."""

import gc
import os
import pathlib

import numpy as np
import pytest

import symmem
from views import fill, host, on_gpu, torch_device

torch = pytest.importorskip("torch")



@pytest.fixture
def gpu():
    """Skips on CPU PEs (judged once symmem is initialized)."""
    if not on_gpu():
        pytest.skip("GPU PEs only: CPU PEs have no CUDA streams")


@pytest.fixture
def cpu():
    """Skips on GPU PEs."""
    if on_gpu():
        pytest.skip("CPU PEs only: the refusal of CUDA streams there")

FP8 = [torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz]

# About 0.1 s on a GPU at 1 to 2 GHz: long enough that a call made behind it returns
# while it still runs.
SLEEP_CYCLES = 200_000_000


class FakeStream:
    """What torch.cuda.Stream offers symmem: a ``cuda_stream`` handle."""

    cuda_stream = 0


def _every_op(buf, sig, local):
    """Each operation that takes ``stream=``, as a call taking the stream."""
    me, n = symmem.my_pe(), symmem.n_pes()
    right = (me + 1) % n
    world = symmem.team_world()
    return {
        "put": lambda s: symmem.put(buf, local, right, stream=s),
        "get": lambda s: symmem.get(local, buf, right, stream=s),
        "put_signal": lambda s: symmem.put_signal(buf, local, sig, 1, right, op="add", stream=s),
        "signal_wait_until": lambda s: symmem.signal_wait_until(sig, "ge", 0, stream=s),
        "quiet": lambda s: symmem.quiet(stream=s),
        "barrier_all": lambda s: symmem.barrier_all(stream=s),
        "sync_all": lambda s: symmem.sync_all(stream=s),
        "broadcast": lambda s: symmem.broadcast(buf, buf, 0, stream=s),
        "fcollect": lambda s: symmem.fcollect(buf, buf, stream=s),
        "reduce": lambda s: symmem.reduce(buf, buf, stream=s),
        "team sync": lambda s: world.sync(stream=s),
        "team barrier": lambda s: world.barrier(stream=s),
    }


def test_cpu_pes_run_at_once_and_refuse_cuda_streams(pe, cpu):
    me, n = pe
    with symmem.zeros((4,), "float32") as buf, symmem.zeros((1,), "uint64") as sig:
        local = np.full(4, me, np.float32)
        ops = _every_op(buf, sig, local)
        for name, call in ops.items():
            for refused in (0, 0x7F00, FakeStream()):
                with pytest.raises(ValueError, match=f"{name}: stream= is for GPU PEs"):
                    call(refused)
        symmem.barrier_all()
        # None and "host" run at once: the put has landed when the barrier returns.
        for how in (None, "host"):
            symmem.put(buf, local + 1, (me + 1) % n, stream=how)
            symmem.barrier_all(stream=how)
            assert host(buf).tolist() == [(me - 1) % n + 1] * 4
            assert symmem.signal_wait_until(sig, "ge", 0, stream=how) == 0
            back = np.zeros(4, np.float32)
            symmem.get(back, buf, me, stream=how)
            assert back.tolist() == [(me - 1) % n + 1] * 4
            symmem.quiet(stream=how)
            symmem.sync_all(stream=how)
        gc.collect()


def test_bad_stream_values_are_refused_naming_the_op(pe):
    with symmem.zeros((4,), "float32") as buf:
        with pytest.raises(TypeError, match="put: stream must be None, \"host\", a CUDA stream handle"):
            symmem.put(buf, np.zeros(4, np.float32), 0, stream="cuda")
        with pytest.raises(TypeError, match="barrier_all: stream must be None"):
            symmem.barrier_all(stream=True)
        with pytest.raises(TypeError, match="reduce: stream must be None"):
            symmem.reduce(buf, buf, stream=1.5)
        with pytest.raises(ValueError, match="quiet: stream handle -1 is not a CUDA stream handle"):
            symmem.quiet(stream=-1)
        gc.collect()


def _values(a):
    """A copy of symmetric array ``a``'s elements, in host memory (no view left behind,
    so ``a`` can be freed)."""
    return torch.from_dlpack(a).cpu().clone()


def _bf16_reference(parts, op):
    """``op`` of ``parts`` (one tensor per PE) combined in team order, each step in float32
    and rounded back to the parts' type, as symmem reduces 16-bit floats."""
    acc = parts[0]
    for p in parts[1:]:
        a, b = acc.float(), p.float()
        acc = {"sum": a + b, "prod": a * b, "min": torch.minimum(a, b),
               "max": torch.maximum(a, b)}[op].to(parts[0].dtype)
    return acc


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16_bit_float_reductions_match_torch(pe, dtype):
    me, n = pe
    k = 16

    def part(p):
        # Quarters and halves: every sum and product of a few PEs is exact in 8 bits of
        # significand, so any order of combination gives the reference.
        return (torch.arange(k, dtype=torch.float32) % 7 + (p + 1) * 0.25).to(dtype)

    parts = [part(p) for p in range(n)]
    with symmem.zeros((k,), dtype) as src, symmem.zeros((k,), dtype) as dst:
        torch.from_dlpack(src).copy_(parts[me].to(torch_device()))
        symmem.barrier_all()
        for op in ("sum", "prod", "min", "max"):
            symmem.reduce(dst, src, op)
            got = _values(dst)
            want = _bf16_reference(parts, op)
            assert torch.equal(got, want), (op, got, want)
        with pytest.raises(TypeError, match="reduce: xor is bitwise"):
            symmem.reduce(dst, src, "xor")
        gc.collect()
    with symmem.zeros((k * n,), dtype) as src, symmem.zeros((k,), dtype) as dst:
        whole = [torch.cat([part(p + b) for b in range(n)]) for p in range(n)]
        torch.from_dlpack(src).copy_(whole[me].to(torch_device()))
        world = symmem.team_world()
        symmem.reducescatter(dst, src, "sum", team=world)
        want = _bf16_reference([w[me * k:(me + 1) * k] for w in whole], "sum")
        assert torch.equal(_values(dst), want)
        gc.collect()


def test_16_bit_sums_round_at_every_step(pe):
    """256 + 1 + 1 … in bf16: each + 1 is a tie that rounds to even, so the sum stays 256
    on every PE, where one rounding of the float32 sum would not."""
    me, n = pe
    with symmem.zeros((1,), torch.bfloat16) as src, symmem.zeros((1,), torch.bfloat16) as dst:
        torch.from_dlpack(src).fill_(256.0 if me == 0 else 1.0)
        symmem.barrier_all()
        symmem.reduce(dst, src, "sum")
        parts = [torch.tensor([256.0 if p == 0 else 1.0], dtype=torch.bfloat16) for p in range(n)]
        assert torch.equal(_values(dst), _bf16_reference(parts, "sum"))
        assert _values(dst).item() == 256.0
        gc.collect()


def _bytes(seed, k, dtype):
    """``k`` random bytes (every pattern, NaNs included) as ``dtype``."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (k,), dtype=torch.uint8, generator=g).view(dtype)


def _same_bits(a, b):
    return torch.equal(a.cpu().view(torch.uint8), b.cpu().view(torch.uint8))


def test_fp8_moves_bit_exact(pe):
    """Every fp8 type: float8_e4m3fn as symmetric arrays of that dtype, the others as
    torch fp8 views of uint8 symmetric arrays (both are symmetric operands)."""
    me, n = pe
    k = 24 * n
    part = k // n
    right, left = (me + 1) % n, (me - 1) % n
    dev = torch_device()
    with symmem.zeros((k,), FP8[0]) as typed_buf, symmem.zeros((k,), FP8[0]) as typed_out, \
            symmem.zeros((part,), FP8[0]) as typed_piece, symmem.zeros((k,), "uint8") as raw_buf, \
            symmem.zeros((k,), "uint8") as raw_out, symmem.zeros((part,), "uint8") as raw_piece, \
            symmem.zeros((1,), "uint64") as sig:
        assert typed_buf.dtype == "float8_e4m3fn"
        for turn, dtype in enumerate(FP8, start=1):
            if dtype == FP8[0]:
                buf, out, piece = typed_buf, typed_out, typed_piece
            else:
                buf, out, piece = (torch.from_dlpack(a).view(dtype)
                                   for a in (raw_buf, raw_out, raw_piece))
            symmem.put(buf, _bytes(me, k, dtype).to(dev), right)
            symmem.barrier_all()
            assert _same_bits(torch.from_dlpack(buf), _bytes(left, k, dtype)), dtype
            back = torch.empty(k, dtype=dtype, device=dev)
            symmem.get(back, buf, right)
            if on_gpu():
                torch.cuda.synchronize()
            assert _same_bits(back, _bytes(me, k, dtype)), dtype
            symmem.barrier_all()
            symmem.put_signal(buf, _bytes(me + 100, k, dtype).to(dev), sig, 1, right, op="add")
            symmem.signal_wait_until(sig, "ge", turn)
            if on_gpu():
                torch.cuda.synchronize()
            assert _same_bits(torch.from_dlpack(buf), _bytes(left + 100, k, dtype)), dtype
            symmem.barrier_all()
            torch.from_dlpack(buf).copy_(_bytes(me + 200, k, dtype).to(dev))
            torch.from_dlpack(piece).copy_(_bytes(me + 300, part, dtype).to(dev))
            symmem.barrier_all()
            symmem.broadcast(out, buf, n - 1)
            assert _same_bits(torch.from_dlpack(out), _bytes(n - 1 + 200, k, dtype)), dtype
            symmem.fcollect(out, piece)
            want = torch.cat([_bytes(p + 300, part, dtype) for p in range(n)])
            assert _same_bits(torch.from_dlpack(out), want), dtype
            symmem.alltoall(out, buf)
            want = torch.cat([_bytes(p + 200, k, dtype)[me * part:(me + 1) * part]
                              for p in range(n)])
            assert _same_bits(torch.from_dlpack(out), want), dtype
            symmem.barrier_all()
        del buf, out, piece, back
        gc.collect()


def test_fp8_reductions_and_atomics_are_refused_naming_the_op(pe):
    me, n = pe
    with symmem.zeros((4 * n,), torch.float8_e4m3fn) as a, \
            symmem.zeros((4,), torch.float8_e5m2) as b:
        with pytest.raises(TypeError, match="reduce: float8_e4m3fn arrays move as bytes .* but do not reduce"):
            symmem.reduce(a, a, "sum")
        with pytest.raises(TypeError, match="reducescatter: float8_e5m2 arrays move as bytes"):
            with symmem.zeros((4 * n,), torch.float8_e5m2) as c:
                symmem.reducescatter(b, c, "max")
        with pytest.raises(TypeError, match="atomic_fetch_add: needs an int32, int64, uint32 or uint64 array, got float8_e5m2"):
            symmem.atomic_fetch_add(torch.from_dlpack(b)[0:1], 1, me)
        with pytest.raises(TypeError, match="atomic_set: .* got float8_e4m3fn"):
            symmem.atomic_set(torch.from_dlpack(a)[0:1], 1, me)
        gc.collect()


# ---- GPU PEs: ordering on streams -------------------------------------------------------


def _busy_then_fill(stream, tensor, value):
    """Queues a long sleep, then a fill of ``tensor`` with ``value``, on ``stream``."""
    with torch.cuda.stream(stream):
        torch.cuda._sleep(SLEEP_CYCLES)
        tensor.fill_(value)


def test_a_stream_put_sees_the_producer_and_returns_before_it_runs(pe, gpu):
    me, n = pe
    right, left = (me + 1) % n, (me - 1) % n
    dev = torch_device()
    s = torch.cuda.Stream(device=dev)
    with symmem.zeros((1 << 16,), "float32") as dst:
        src = torch.zeros(1 << 16, dtype=torch.float32, device=dev)
        torch.cuda.synchronize()
        symmem.barrier_all(stream="host")
        _busy_then_fill(s, src, float(me + 1))
        with torch.cuda.stream(s):
            symmem.put(dst, src, right)       # default: torch's current stream, s
            assert not s.query(), "the put returned after its stream had run (it blocked)"
            symmem.barrier_all()              # queued on s too
        s.synchronize()
        assert bool((torch.from_dlpack(dst) == float(left + 1)).all())
        # The explicit forms: an int handle and a torch.cuda.Stream.
        for how in (s.cuda_stream, s):
            _busy_then_fill(s, src, float(10 * me + 3))
            symmem.put(dst, src, right, stream=how)
            assert not s.query()
            symmem.barrier_all(stream=how)
            s.synchronize()
            assert bool((torch.from_dlpack(dst) == float(10 * left + 3)).all())
        del src
        gc.collect()


def test_a_stream_get_sees_the_producer_and_returns_before_it_runs(pe, gpu):
    me, n = pe
    right = (me + 1) % n
    dev = torch_device()
    s = torch.cuda.Stream(device=dev)
    with symmem.zeros((4096,), "int64") as buf:
        fill(buf, me + 7)
        torch.cuda.synchronize()
        symmem.barrier_all(stream="host")
        out = torch.zeros(4096, dtype=torch.int64, device=dev)
        with torch.cuda.stream(s):
            torch.cuda._sleep(SLEEP_CYCLES)
            out.fill_(-1)
            symmem.get(out, buf, right)       # lands after the fill
            assert not s.query()
        s.synchronize()
        assert bool((out == right + 7).all())
        symmem.barrier_all(stream="host")
        del out
        gc.collect()


def test_put_signal_and_signal_wait_until_on_streams_between_two_pes(pe, gpu):
    me, n = pe
    if n < 2:
        pytest.skip("two PEs")
    dev = torch_device()
    s = torch.cuda.Stream(device=dev)
    with symmem.zeros((1 << 14,), "float32") as data, symmem.zeros((1,), "uint64") as sig:
        torch.cuda.synchronize()
        symmem.barrier_all(stream="host")
        copy = torch.zeros(1 << 14, dtype=torch.float32, device=dev)
        if me == 0:
            src = torch.zeros(1 << 14, dtype=torch.float32, device=dev)
            _busy_then_fill(s, src, 42.0)
            symmem.put_signal(data, src, sig, 1, 1, stream=s)
            assert not s.query()
        elif me == 1:
            with torch.cuda.stream(s):
                assert symmem.signal_wait_until(sig, "ge", 1) is None   # the stream waits
                copy.copy_(torch.from_dlpack(data))                  # behind the wait
        s.synchronize()
        if me == 1:
            assert bool((copy == 42.0).all())
        symmem.barrier_all(stream="host")
        gc.collect()


def test_collectives_on_a_stream_see_the_producer(pe, gpu):
    me, n = pe
    dev = torch_device()
    s = torch.cuda.Stream(device=dev)
    with symmem.zeros((256,), torch.bfloat16) as src, symmem.zeros((256,), torch.bfloat16) as dst, \
            symmem.zeros((256 * n,), "int32") as gathered, symmem.zeros((256,), "int32") as mine:
        torch.cuda.synchronize()
        symmem.barrier_all(stream="host")
        with torch.cuda.stream(s):
            torch.cuda._sleep(SLEEP_CYCLES)
            torch.from_dlpack(src).fill_(me + 1)
            torch.from_dlpack(mine).fill_(me)
            symmem.barrier_all()
            symmem.reduce(dst, src, "sum")
            symmem.fcollect(gathered, mine)
            symmem.team_world().barrier()
            assert not s.query()
        s.synchronize()
        assert bool((torch.from_dlpack(dst) == n * (n + 1) // 2).all())
        want = torch.arange(n, device=dev, dtype=torch.int32).repeat_interleave(256)
        assert torch.equal(torch.from_dlpack(gathered), want)
        symmem.barrier_all(stream="host")
        gc.collect()


def test_a_launch_inside_torch_cuda_stream_runs_on_it(pe, gpu):
    path = os.environ.get("SYMMEM_KERNEL_LIBRARY", pathlib.Path(__file__).resolve().parents[2]
                          / "target" / "debug" / "libsymmem_example_kernel_library.so")
    if not pathlib.Path(path).exists():
        pytest.fail(f"no kernel library at {path} (set SYMMEM_KERNEL_LIBRARY)")
    module = symmem.load_module(path)
    me, n = pe
    chunk, chunks = 128, 4
    dev = torch_device()
    s = torch.cuda.Stream(device=dev)
    with symmem.zeros((chunks * chunk,), "uint64") as buf, \
            symmem.zeros((chunks,), "uint64") as sig, \
            symmem.zeros((chunks,), "uint64") as sums:
        src = torch.zeros(chunks * chunk, dtype=torch.int64, device=dev)
        torch.cuda.synchronize()
        symmem.barrier_all(stream="host")
        with torch.cuda.stream(s):
            torch.cuda._sleep(SLEEP_CYCLES)
            src.copy_(torch.arange(chunks * chunk, dtype=torch.int64, device=dev) * (me + 1))
            # No stream=: torch's current stream, s, behind the fill.
            module.launch("pipeline_produce", 1, 64, buf, src, chunk, chunks, sig, (me + 1) % n)
            assert not s.query(), "the launch blocked (it ran on the legacy stream)"
            module.launch("pipeline_consume", (1,), (32, 2), torch.from_dlpack(buf), chunk,
                          chunks, sig, sums)
        s.synchronize()
        left = (me - 1) % n
        want = (np.arange(chunks * chunk, dtype=np.uint64) * (left + 1)).reshape(chunks, chunk)
        assert (host(sums) == want.sum(axis=1)).all()
        del src
        gc.collect()
        symmem.barrier_all(stream="host")


def test_a_cpu_pes_launch_takes_host_and_refuses_cuda_streams(pe, cpu):
    path = os.environ.get("SYMMEM_KERNEL_LIBRARY", pathlib.Path(__file__).resolve().parents[2]
                          / "target" / "debug" / "libsymmem_example_kernel_library.so")
    if not pathlib.Path(path).exists():
        pytest.fail(f"no kernel library at {path}: run `cargo build -p "
                    "symmem-example-kernel-library` (or set SYMMEM_KERNEL_LIBRARY)")
    module = symmem.load_module(path)
    me, n = pe
    chunk, chunks = 8, 2
    with symmem.zeros((chunks * chunk,), "uint64") as buf, \
            symmem.zeros((chunks,), "uint64") as sig:
        src = np.arange(chunks * chunk, dtype=np.uint64) + 100 * me
        for refused in (FakeStream(), 0):
            with pytest.raises(ValueError, match="launch: stream= is for GPU PEs"):
                module.launch("pipeline_produce", 1, 32, buf, src, chunk, chunks, sig,
                              (me + 1) % n, stream=refused)
        with pytest.raises(TypeError, match="launch: stream must be None"):
            module.launch("pipeline_produce", 1, 32, buf, src, chunk, chunks, sig,
                          (me + 1) % n, stream="cuda")
        module.launch("pipeline_produce", 1, 32, buf, src, chunk, chunks, sig, (me + 1) % n,
                      stream="host")
        symmem.barrier_all()
        left = (me - 1) % n
        assert host(buf).tolist() == (np.arange(chunks * chunk) + 100 * left).tolist()
        gc.collect()
