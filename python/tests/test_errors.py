"""Bad input raises a Python exception that names what was wrong; nothing is done."""

import gc
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import symmem
from views import local, on_gpu, view


@pytest.fixture
def arr():
    a = symmem.zeros((4,), "float32")
    yield a
    gc.collect()
    if not a.freed:
        a.free()


def test_mismatched_dtype_and_size(arr):
    with pytest.raises(TypeError, match="put: dst is float32 but src is int64"):
        symmem.put(arr, np.zeros(4, np.int64), 0)
    with pytest.raises(ValueError, match=r"put: dst has 4 elements \(shape \[4\]\) but src has 3"):
        symmem.put(arr, np.zeros(3, np.float32), 0)


def test_pe_out_of_range(arr):
    n = symmem.n_pes()
    with pytest.raises(ValueError, match=f"PE {n}"):
        symmem.put(arr, np.zeros(4, np.float32), n)


def test_a_local_array_is_not_symmetric(arr):
    with pytest.raises(ValueError, match="dst is not symmetric"):
        symmem.put(local(np.zeros(4), "float32"), np.zeros(4, np.float32), 0)
    with pytest.raises(ValueError, match="ivar is not symmetric"):
        symmem.atomic_add(local([0], "int64"), 1, 0)


def test_operands_on_the_wrong_device_name_both_devices(arr):
    if not on_gpu():
        pytest.skip("GPU PEs only: on a CPU PE every operand is host memory")
    me = symmem.my_pe()
    # Host memory where the symmetric heap is on the GPU.
    with pytest.raises(ValueError, match=f"put: dst is on cpu, but PE {me}'s symmetric heap is on cuda:"):
        symmem.put(np.zeros(4, np.float32), np.zeros(4, np.float32), 0)
    # GPU memory as the local side of a host operation.
    with pytest.raises(ValueError, match="get: dst is on cuda:.*; host operations read and write host memory"):
        symmem.get(view(arr), arr, 0)


def test_not_contiguous_and_not_an_array(arr):
    with pytest.raises(ValueError, match="src .* is not contiguous"):
        symmem.put(arr, np.zeros(8, np.float32)[::2], 0)
    with pytest.raises(TypeError, match="expected an array with __dlpack__"):
        symmem.put(arr, [1.0, 2.0, 3.0, 4.0], 0)


def test_types_an_operation_does_not_take(arr):
    with pytest.raises(TypeError, match="atomic_fetch_add: needs an int32, int64, uint32 or uint64 array, got float32"):
        symmem.atomic_fetch_add(arr, 1, 0)
    with pytest.raises(TypeError, match="sig must hold uint64"):
        symmem.signal_fetch(arr)
    with pytest.raises(ValueError, match='unknown comparison "about"'):
        symmem.wait_until(arr, "about", 1)
    with pytest.raises(TypeError, match='unsupported dtype "complex64"'):
        symmem.empty((2,), "complex64")
    with pytest.raises(ValueError, match="negative extent"):
        symmem.empty((2, -1), "int8")


def test_use_after_free_and_free_with_a_live_view():
    a = symmem.zeros((4,), "int32")
    v = view(a)
    with pytest.raises(BufferError, match=r"view\(s\) of symmetric array .* are still alive \(PE 0 holds 1, PE 1 holds 1"):
        a.free()
    del v
    gc.collect()
    a.free()
    assert a.freed
    with pytest.raises(BufferError, match="was freed"):
        view(a)
    with pytest.raises(ValueError, match="already freed"):
        a.free()


def test_ctrl_c_stops_a_wait():
    # One PE alone (a job of its own: no launcher variables), waiting for a signal that
    # never comes; SIGINT after half a second must end the wait with KeyboardInterrupt.
    # Python's KeyboardInterrupt handler is installed explicitly: a test run started in
    # the background inherits SIGINT ignored, and Python then installs none.
    code = textwrap.dedent("""
        import os, signal, threading, symmem
        signal.signal(signal.SIGINT, signal.default_int_handler)
        symmem.init()
        sig = symmem.zeros((1,), "uint64")
        threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
        try:
            symmem.signal_wait_until(sig, "ge", 1)
        except KeyboardInterrupt:
            print("interrupted")
        sig.free()
    """)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SYMMEM_", "OMPI_", "PMI", "SLURM_", "RANK", "WORLD_SIZE",
                                "LOCAL_RANK", "MASTER_"))}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "interrupted"


def test_every_bad_argument_is_refused_naming_the_operation(arr):
    # Arguments that pyo3 cannot convert (a negative PE, a float where an int goes) as
    # well as those the functions check themselves.
    ints = symmem.zeros((1,), "int32")
    sig = symmem.zeros((1,), "uint64")
    src = np.zeros(4, np.float32)
    team = symmem.team_world()
    cases = [
        ("put", lambda: symmem.put(arr, src, -1), ValueError, "pe must be a non-negative int, got -1"),
        ("get", lambda: symmem.get(src, arr, 1.5), TypeError, "argument 'pe'"),
        ("put_nbi", lambda: symmem.put_nbi(arr, src, 1 << 70), ValueError, "pe = 1180591620717411303424 is too large"),
        ("ptr", lambda: symmem.ptr(arr, -2), ValueError, "pe must be a non-negative int, got -2"),
        ("atomic_add", lambda: symmem.atomic_add(ints, 1.5, 0), TypeError, "value must be an int \\(ivar holds int32\\), not float"),
        ("atomic_set", lambda: symmem.atomic_set(ints, 1 << 40, 0), ValueError, "value 1099511627776 does not fit ivar's type int32"),
        ("atomic_compare_swap", lambda: symmem.atomic_compare_swap(ints, "0", 1, 0), TypeError, "cond must be an int"),
        ("atomic_fetch", lambda: symmem.atomic_fetch(ints, -1), ValueError, "pe must be a non-negative int"),
        ("wait_until", lambda: symmem.wait_until(ints, "eq", 0.5), TypeError, "value must be an int"),
        ("test", lambda: symmem.test(ints, "eq", None), TypeError, "value must be an int"),
        ("signal_op", lambda: symmem.signal_op(sig, -1, 0), ValueError, "signal must be a non-negative int, got -1"),
        ("signal_op", lambda: symmem.signal_op(sig, "1", 0), TypeError, "argument 'signal'"),
        ("signal_wait_until", lambda: symmem.signal_wait_until(sig, "ge", -1), ValueError, "value must be a non-negative int"),
        ("put_signal", lambda: symmem.put_signal(arr, src, arr, 1, 0), TypeError, "sig must hold uint64"),
        ("put_signal", lambda: symmem.put_signal(arr, src, sig, 1.0, 0), TypeError, "argument 'signal'"),
        ("broadcast", lambda: symmem.broadcast(arr, arr, -1), ValueError, "root must be a non-negative int"),
        ("world_pe", lambda: team.world_pe(-1), ValueError, "pe must be a non-negative int, got -1"),
        ("split_strided", lambda: team.split_strided(0, -1, 1), ValueError, "stride must be a non-negative int"),
        ("free", lambda: ints.free(held=-1), ValueError, "held must be a non-negative int"),
        ("empty", lambda: symmem.empty((2,), 3.5), TypeError, "unsupported dtype 3.5"),
        ("zeros", lambda: symmem.zeros((2,), "complex64"), TypeError, 'unsupported dtype "complex64"'),
        ("load_module", lambda: symmem.load_module(7), TypeError, "argument 'path'"),
    ]
    for op, call, kind, text in cases:
        with pytest.raises(kind, match=f"^{op}: .*{text}"):
            call()
    assert not ints.freed
    ints.free()
    sig.free()
