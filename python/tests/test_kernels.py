"""Rust kernels from Python: a kernel library (examples/kernel-library, the example
kernels exported with symmem_device::export_kernels!) loaded with symmem.load_module and
launched on this PE's executor with symmetric arrays, numpy arrays, torch tensors and
numbers as arguments; the MoE example against its torch reference; every bad launch."""

import gc
import importlib.util
import os
import pathlib

import numpy as np
import pytest

import symmem
from views import host, local, torch_device

torch = pytest.importorskip("torch")

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def module():
    path = os.environ.get("SYMMEM_KERNEL_LIBRARY",
                          ROOT / "target" / "debug" / "libsymmem_example_kernel_library.so")
    if not pathlib.Path(path).exists():
        pytest.fail(f"no kernel library at {path}: run `cargo build -p "
                    "symmem-example-kernel-library` (or set SYMMEM_KERNEL_LIBRARY)")
    return symmem.load_module(path)


def test_the_library_lists_its_kernels(module):
    assert module.name == "symmem-example-kernels"
    assert module.kernels["pipeline_produce"] == (
        "*mut u64", "*const u64", "usize", "usize", "*mut u64", "u32")
    assert set(module.kernels) >= {"moe_dispatch_warp", "moe_dispatch_block", "moe_expert_warp",
                                   "moe_expert_block", "moe_combine"}
    assert module.on_gpu == (symmem.device() != "cpu")
    assert "symmem-example-kernels" in repr(module)


def test_pipeline_kernels_with_torch_numpy_and_symmetric_arrays(module, pe):
    me, n = pe
    chunk, chunks = 128, 4
    with symmem.zeros((chunks * chunk,), "uint64") as buf, \
            symmem.zeros((chunks,), "uint64") as sig, \
            symmem.zeros((chunks,), "uint64") as sums:
        # A plain tensor, where this PE's kernels run.
        src = (torch.arange(chunks * chunk, dtype=torch.int64) * (me + 1)).to(torch_device())
        module.launch("pipeline_produce", 1, 64, buf, src, chunk, chunks, sig, (me + 1) % n)
        module.launch("pipeline_consume", (1,), (32, 2), torch.from_dlpack(buf), chunk,
                      chunks, sig, sums)
        left = (me - 1) % n
        want = (np.arange(chunks * chunk, dtype=np.uint64) * (left + 1)).reshape(chunks, chunk)
        got = host(sums)
        assert (got == want.sum(axis=1)).all(), (got, want.sum(axis=1))
        gc.collect()
        symmem.barrier_all()


def test_a_launch_on_torchs_stream_runs_behind_its_work(module, pe):
    if not module.on_gpu:
        pytest.skip("GPU PEs only: a CPU PE's launch finishes before it returns (stream= is refused there)")
    me, n = pe
    chunk, chunks = 128, 4
    with symmem.zeros((chunks * chunk,), "uint64") as buf, \
            symmem.zeros((chunks,), "uint64") as sig, \
            symmem.zeros((chunks,), "uint64") as sums:
        side = torch.cuda.Stream(device=torch_device())
        with torch.cuda.stream(side):
            # torch computes the source on the side stream; both launches queue behind it.
            src = torch.arange(chunks * chunk, dtype=torch.int64, device=torch_device()) * (me + 1)
            module.launch("pipeline_produce", 1, 64, buf, src, chunk, chunks, sig, (me + 1) % n,
                          stream=side.cuda_stream)
            module.launch("pipeline_consume", (1,), (32, 2), torch.from_dlpack(buf), chunk,
                          chunks, sig, sums, stream=side.cuda_stream)
        side.synchronize()
        left = (me - 1) % n
        want = (np.arange(chunks * chunk, dtype=np.uint64) * (left + 1)).reshape(chunks, chunk)
        assert (host(sums) == want.sum(axis=1)).all()
        del src
        gc.collect()
        symmem.barrier_all()


def _moe_example():
    spec = importlib.util.spec_from_file_location("moe_example", ROOT / "python/examples/moe.py")
    moe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(moe)
    return moe


@pytest.mark.parametrize("scope,fp8", [("warp", 0), ("block", 0), ("warp", 1)])
def test_moe_dispatch_and_combine_match_torch(module, scope, fp8):
    moe = _moe_example()
    hidden = 128 if fp8 else 16
    assert moe.moe_step(module, tokens=96, hidden=hidden, scope=scope, fp8=fp8,
                        seed=3) == 96


def test_a_failing_kernel_names_what_failed(module, pe):
    me, n = pe
    if module.on_gpu:
        # The kernel traps, which ends the CUDA context for good (under MPS, every
        # client's on the GPU): the rest of the suite could not run. gpu-check.sh runs
        # the same trap in a job of its own ("device put to a PE that does not exist").
        pytest.skip("a trapping kernel ends the PE's CUDA context; checked by gpu-check's trap check")
    with symmem.zeros((8,), "uint64") as buf, symmem.zeros((1,), "uint64") as sig:
        src = local(np.zeros(8), "uint64")
        with pytest.raises(symmem.SymmemError, match=f"PE {n} does not exist"):
            module.launch("pipeline_produce", 1, 32, buf, src, 8, 1, sig, n)
        symmem.barrier_all()


def test_bad_launches_are_refused_naming_the_argument(module, pe):
    me, n = pe
    with symmem.zeros((8,), "uint64") as buf:
        src = local(np.zeros(8), "uint64")
        with pytest.raises(ValueError, match='no kernel "nope"; it has pipeline_produce'):
            module.launch("nope", 1, 1)
        with pytest.raises(TypeError, match=r"takes 6 arguments \(\*mut u64, \*const u64, usize, usize, \*mut u64, u32\); 2 given"):
            module.launch("pipeline_produce", 1, 1, buf, src)
        with pytest.raises(ValueError, match="argument 5 of kernel pipeline_produce is 4294967296, which does not fit its parameter of type u32"):
            module.launch("pipeline_produce", 1, 1, buf, src, 8, 1, buf, 1 << 32)
        with pytest.raises(ValueError, match="argument 2 of kernel pipeline_produce is -1, which does not fit its parameter of type usize"):
            module.launch("pipeline_produce", 1, 1, buf, src, -1, 1, buf, 0)
        with pytest.raises(TypeError, match="argument 2 of kernel pipeline_produce is a float, but its parameter is usize: it takes an int"):
            module.launch("pipeline_produce", 1, 1, buf, src, 8.0, 1, buf, 0)
        with pytest.raises(TypeError, match="argument 5 of kernel pipeline_produce is a SymmetricArray, but its parameter is u32: it takes an int"):
            module.launch("pipeline_produce", 1, 1, buf, src, 8, 1, buf, buf)
        with pytest.raises(TypeError, match="argument 0 of kernel pipeline_produce is a str, but its parameter is \\*mut u64: it takes an array"):
            module.launch("pipeline_produce", 1, 1, "buf", src, 8, 1, buf, 0)
        # Arrays against the pointee: ints of its size (either sign), else refused.
        with pytest.raises(TypeError, match="argument 1 of kernel pipeline_produce is an array of float64, but its parameter is \\*const u64"):
            module.launch("pipeline_produce", 1, 1, buf, local(np.zeros(8), "float64"), 8, 1, buf, 0)
        with pytest.raises(TypeError, match="argument 1 of kernel pipeline_produce is an array of int32, but its parameter is \\*const u64"):
            module.launch("pipeline_produce", 1, 1, buf, local(np.zeros(16), "int32"), 8, 1, buf, 0)
        with pytest.raises(ValueError, match="argument 1 of kernel pipeline_produce is on cuda:0|not contiguous"):
            module.launch("pipeline_produce", 1, 1, buf, src[::2], 8, 1, buf, 0)
        with pytest.raises(TypeError, match="block must be a positive int or a tuple of one to three"):
            module.launch("pipeline_produce", 1, 0, buf, src, 8, 1, buf, 0)
        with pytest.raises(ValueError, match="at most 1024 are allowed"):
            module.launch("pipeline_produce", 1, 2048, buf, src, 8, 1, buf, 0)
        with pytest.raises(ValueError, match="^launch: stream handle -1 is not a CUDA stream handle"):
            module.launch("pipeline_produce", 1, 1, buf, src, -8, 1, buf, 0, stream=-1)
        if not module.on_gpu:
            with pytest.raises(ValueError, match="stream= is for GPU PEs"):
                module.launch("pipeline_produce", 1, 1, buf, src, 8, 1, buf, 0, stream=0)
    freed = symmem.zeros((8,), "uint64")
    freed.free()
    with pytest.raises(BufferError, match="argument 0 of kernel pipeline_produce was freed"):
        module.launch("pipeline_produce", 1, 1, freed, np.zeros(8, np.uint64), 8, 1, freed, 0)


def test_what_is_not_a_kernel_library_is_refused():
    with pytest.raises(symmem.SymmemError, match="kernel library /nonexistent/lib.so: .*No such file"):
        symmem.load_module("/nonexistent/lib.so")
    native = symmem._native.__file__
    with pytest.raises(symmem.SymmemError, match="exports no symmem_kernel_library"):
        symmem.load_module(native)
