"""Kernel authors from torch: the handle of a symmem torch tensor, torch.distributed groups
as rendezvous's group=, and Triton kernels on the handle's pointer arrays (the one-shot
all-reduce example; a Triton barrier paired with the host's). On CPU PEs Triton runs
interpreted (the example sets TRITON_INTERPRET=1), on GPU PEs compiled."""

import gc
import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

import symmem
from views import host, on_gpu, view

torch = pytest.importorskip("torch")
import symmem.torch  # noqa: E402 (needs torch)

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "triton_allreduce.py"

#: Compiles the example's kernel for sm_80 and sm_90, with no GPU and outside the job (symmem
#: stubbed as a GPU PE): the interpreter forgives what the compiler refuses (operand types).
COMPILE = """
import importlib.util, sys, types
symmem = types.ModuleType("symmem")
symmem.init, symmem.device = (lambda: None), (lambda: "GPU 0 (stub)")
sys.modules.update({"symmem": symmem, "symmem.torch": types.ModuleType("symmem.torch")})
spec = importlib.util.spec_from_file_location("triton_allreduce", sys.argv[1])
example = importlib.util.module_from_spec(spec)
spec.loader.exec_module(example)
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
signature = {"buffer_ptrs": "i64", "signal_pad_ptrs": "i64", "out_ptr": "*fp32", "numel": "i32",
             "rank": "i32", "world_size": "constexpr", "BLOCK": "constexpr"}
for cc in (80, 90):
    src = ASTSource(fn=example.one_shot_all_reduce_kernel, signature=signature,
                    constexprs={"world_size": 4, "BLOCK": 256})
    ptx = triton.compile(src, target=GPUTarget("cuda", cc, 32)).asm["ptx"]
    for want in ("atom.global.release.sys.cas.b64", "atom.global.acquire.sys.cas.b64", "bar.sync"):
        assert want in ptx, f"sm_{cc}: no {want} in the PTX"
print("compiled for sm_80 and sm_90")
"""

#: The example's barrier, for this module's kernels (set by the ``example`` fixture: the
#: example decides whether Triton runs interpreted before anything is decorated).
blockwise_barrier = None


@pytest.fixture(scope="module")
def example():
    """python/examples/triton_allreduce.py as a module (it picks Triton's mode), on a job
    whose peers are all mapped into this process."""
    global blockwise_barrier
    if importlib.util.find_spec("triton") is None:
        pytest.skip("triton is not installed: the Triton kernels are not tested")
    # Imported before the example sets TRITON_INTERPRET, as torch.compile (earlier in the
    # suite) does: the example's kernels must run interpreted all the same.
    import triton  # noqa: F401
    probe = symmem.zeros((1,), "int8")
    mapped = all(symmem.ptr(probe, p) is not None for p in range(symmem.n_pes()))
    probe.free()
    if not mapped:
        pytest.skip("some peers are on another node (SYMMEM_SIMULATE_NODES): a Triton kernel "
                    "addresses only peers mapped into this process")
    spec = importlib.util.spec_from_file_location("triton_allreduce", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    blockwise_barrier = module.blockwise_barrier
    return module


def settle():
    """Waits for the kernels queued on a GPU PE."""
    if on_gpu():
        torch.cuda.synchronize()


def test_a_torch_tensors_handle_is_its_allocations(pe):
    me, n = pe
    t = symmem.torch.zeros((4,), torch.float32)
    hdl = symmem.rendezvous(t)
    assert symmem.rendezvous(t._symmem_array) is hdl
    assert hdl.buffer_ptrs[me] == t.data_ptr()
    right = (me + 1) % n
    if hdl.buffer_ptrs[right] is not None:
        # A torch dtype gives a torch tensor, as torch's handle does.
        peer = hdl.get_buffer(right, (4,), torch.float32)
        assert isinstance(peer, torch.Tensor) and peer.data_ptr() == hdl.buffer_ptrs[right]
        assert hdl.get_signal_pad(right, dtype=torch.uint32).shape == (9216 // 4,)
        del peer
    with pytest.raises(TypeError, match="not a symmetric allocation.*a view or slice"):
        symmem.rendezvous(t[1:])
    with pytest.raises(TypeError, match="Tensor that is not a symmetric allocation"):
        symmem.rendezvous(torch.zeros(4))
    gc.collect()
    hdl.free()
    symmem.torch.free(t)


def test_torch_process_groups_as_group(pe):
    import torch.distributed as dist

    me, n = pe
    buf = symmem.zeros((2,), "int32")
    hdl = symmem.rendezvous(buf)
    made = not dist.is_initialized()
    if made:
        with pytest.raises(ValueError, match="torch.distributed is not initialized"):
            symmem.rendezvous(buf, "0")
        # A process group without communication: only its description matters here.
        from torch.testing._internal.distributed.fake_pg import FakeStore

        dist.init_process_group("fake", store=FakeStore(), rank=me, world_size=n)
    try:
        assert symmem.rendezvous(buf, dist.group.WORLD) is hdl
        assert symmem.rendezvous(buf, dist.group.WORLD.group_name) is hdl
        with pytest.raises(ValueError, match="no process group named 'nonsense'"):
            symmem.rendezvous(buf, "nonsense")
        if made:
            # (torch sorts a group's ranks: a group of every rank is in PE order.)
            first = dist.new_group([0])
            if me == 0:
                with pytest.raises(ValueError, match=r"global ranks \[0\], but a handle spans all"):
                    symmem.rendezvous(buf, first)
    finally:
        if made:
            dist.destroy_process_group()
    hdl.free()
    buf.free()


@pytest.mark.parametrize("numel,dtype", [(300, "float32"), (37, "float32"), (100, "bfloat16")])
def test_triton_one_shot_all_reduce(pe, example, numel, dtype):
    me, n = pe
    dtype = getattr(torch, dtype)
    buf = symmem.torch.empty((numel,), dtype)
    hdl = symmem.rendezvous(buf)
    out = torch.empty(numel, dtype=dtype, device=buf.device)
    ramp = torch.arange(numel, dtype=torch.float32, device=buf.device)
    if dtype == torch.bfloat16:
        # Sums that bfloat16 holds exactly (below 256): the interpreter rounds float32 to
        # bfloat16 toward zero, a GPU to nearest.
        ramp = ramp % 20
    for step in range(3):
        buf.copy_(ramp * (me + 1) - step)
        example.one_shot_all_reduce(hdl, out, block=64, max_programs=4)
        settle()
        assert torch.equal(out, (ramp * (n * (n + 1) // 2) - n * step).to(dtype))
    # Each kernel barrier took every signal it was sent: the pads are zero again.
    hdl.barrier()
    assert not host(hdl.get_signal_pad(me)).any()
    with pytest.raises(ValueError, match="out has 2404 bytes, the symmetric buffer"):
        example.one_shot_all_reduce(hdl, torch.empty(601, device=buf.device))
    with pytest.raises(ValueError, match="out must be a contiguous tensor on"):
        example.one_shot_all_reduce(hdl, torch.empty((4, 2), device=buf.device).t())
    gc.collect()
    hdl.free()
    symmem.torch.free(buf)


def test_the_kernel_compiles_for_gpus(pe, example):
    me, n = pe
    if on_gpu():
        pytest.skip("on GPU PEs the tests above compile the kernel for this GPU and run it")
    if (me, n) != (0, 2):
        pytest.skip("compiled once, by PE 0 of the 2-PE job")
    # (Not pytest's tmp_path: every PE would set it up, racing over its old folders.)
    with tempfile.TemporaryDirectory(prefix="symmem-triton-cache-") as cache:
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        env["TRITON_CACHE_DIR"] = cache
        done = subprocess.run([sys.executable, "-c", COMPILE, str(EXAMPLE)], env=env,
                              capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "compiled" in done.stdout, done.stderr[-4000:]


def test_the_example_runs(example):
    example.main(numel=300, steps=2)


def test_a_triton_barrier_pairs_with_the_hosts(pe, example):
    """PE 0 enters handle.barrier(channel=0); the others a Triton kernel's barrier of
    program 0, on the same signal words. Data put before must be seen after."""
    import triton
    import triton.language as tl

    me, n = pe
    right, left = (me + 1) % n, (me - 1) % n
    buf = symmem.zeros((1,), "int64")
    hdl = symmem.rendezvous(buf)

    @triton.jit
    def barrier_kernel(signal_pad_ptrs, rank, world_size: tl.constexpr):
        blockwise_barrier(signal_pad_ptrs, rank, world_size)

    def barrier():
        if me == 0:
            hdl.barrier(channel=0)
        else:
            barrier_kernel[(1,)](hdl.signal_pad_ptrs_dev, me, world_size=n)
            settle()

    for rnd in range(1, 4):
        symmem.put(view(buf), np.array([rnd * 10 + me], np.int64), right)
        barrier()
        assert host(buf)[0] == rnd * 10 + left
        barrier()
    assert not host(hdl.get_signal_pad(me)).any()
    gc.collect()
    hdl.free()
    buf.free()
