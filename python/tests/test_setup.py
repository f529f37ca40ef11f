"""Set-up as torch users do it: init over a torch.distributed process group, init from a
unique id the program broadcasts itself, heap_size at init, and symmem.torch.device().
The group init re-joins the suite's own PEs over a gloo group (finalize, then init); the
unique-id join, with a heap size, runs as a job of its own (python/tests/init_job.py, two
processes started here without a launcher), from PE 0 of the suite's job."""

import gc
import os
import pathlib
import pickle
import subprocess
import sys
import tempfile

import numpy as np
import pytest

import symmem
from views import host

JOB = pathlib.Path(__file__).with_name("init_job.py")


def clean_env():
    """This environment without the launchers' variables: a process started with it is
    one PE alone unless it joins a job itself."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("SYMMEM_", "OMPI_", "PMI", "PMIX", "SLURM_", "RANK",
                                 "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_",
                                 "TORCHELASTIC", "GROUP_RANK", "ROLE_"))}


def run_job(mode, n, tmp_path, timeout=120):
    """Runs `n` processes of init_job.py in `mode`; fails with their output unless each
    prints its ok line."""
    env = clean_env()
    env["SYMMEM_TIMEOUT"] = "60"
    procs = [subprocess.Popen([sys.executable, str(JOB), mode, str(r), str(n), str(tmp_path)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
             for r in range(n)]
    outs = []
    try:
        outs = [p.communicate(timeout=timeout) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for r, (p, (out, err)) in enumerate(zip(procs, outs)):
        assert p.returncode == 0 and f"ok {mode} {r}" in out, \
            f"rank {r} exited {p.returncode}\nstdout:\n{out}\nstderr:\n{err}"
    return outs


@pytest.fixture
def pe0_only(pe):
    if pe[0] != 0:
        pytest.skip("runs its own job once, from PE 0 of the suite's job")


def test_init_over_a_gloo_process_group(pe):
    torch = pytest.importorskip("torch")
    dist = torch.distributed
    me, n = pe
    # A file store every PE names alike: PE 0's random number, put to every PE.
    with symmem.zeros((1,), "uint64") as token:
        if me == 0:
            mine = np.frombuffer(os.urandom(8), np.uint64).copy()
            for other in range(n):
                symmem.put(token, mine, other)
        symmem.barrier_all()
        store = pathlib.Path(tempfile.gettempdir()) / f"symmem-test-group-{int(host(token)[0]):x}"
        gc.collect()
    symmem.finalize()
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=me, world_size=n)
    try:
        # The default group, then a group object of its own (the id's root found by
        # get_global_rank); the session goes on on the second.
        for group in (dist.group.WORLD, dist.new_group(list(range(n)))):
            symmem.init(group=group)
            assert (symmem.my_pe(), symmem.n_pes()) == (me, n)
            with symmem.zeros((1,), "int64") as a:
                symmem.put(a, np.array([me + 100], np.int64), (me + 1) % n)
                symmem.barrier_all()
                assert int(host(a)[0]) == (me - 1) % n + 100
                gc.collect()
                symmem.barrier_all()
            if group is dist.group.WORLD:
                symmem.finalize()
    finally:
        dist.destroy_process_group()
        if me == 0:
            store.unlink(missing_ok=True)


def test_init_with_a_unique_id_and_a_heap_size(pe0_only, tmp_path):
    run_job("unique_id", 2, tmp_path)


def test_bad_heap_sizes_are_refused_naming_init():
    # Checked before anything else, so also here, in a job already initialized.
    for bad, kind, text in [(0, ValueError, "heap_size must be a positive number of bytes, got 0"),
                            (-4096, ValueError, "heap_size must be a positive number of bytes, got -4096"),
                            (1 << 80, ValueError, "heap_size 1208925819614629174706176 is larger than this machine can address"),
                            ("12Q", ValueError, 'heap_size "12Q" is not a size'),
                            ("0", ValueError, 'heap_size "0" is not a size: must be greater than 0'),
                            (1.5, TypeError, "heap_size must be an int .* not float"),
                            (True, TypeError, "heap_size must be an int .* not bool")]:
        with pytest.raises(kind, match=f"^init: {text}"):
            symmem.init(heap_size=bad)


def test_a_second_init_with_arguments_is_refused():
    symmem.init()  # without arguments: nothing to do
    with pytest.raises(symmem.SymmemError, match="init: symmem is already initialized"):
        symmem.init(heap_size="1G")
    with pytest.raises(symmem.SymmemError, match="init: symmem is already initialized"):
        symmem.init(group=object())


def test_bad_unique_id_arguments_are_refused():
    with pytest.raises(ValueError, match="init: unique_id, rank and n_pes go together"):
        symmem.init(unique_id="x")
    with pytest.raises(ValueError, match="init: rank 2 is out of range for n_pes 2"):
        symmem.init(unique_id="x", rank=2, n_pes=2)
    with pytest.raises(ValueError, match="init: rank must be a non-negative int, got -1"):
        symmem.init(unique_id="x", rank=-1, n_pes=2)
    with pytest.raises(ValueError, match="init: unique_id: .*malformed unique id .*: no secret"):
        symmem.init(unique_id="symmem-uid-v2:nonsense", rank=0, n_pes=2)
    with pytest.raises(TypeError, match="init: unique_id must be a symmem.UniqueId or its text"):
        symmem.init(unique_id=42, rank=0, n_pes=2)
    with pytest.raises(ValueError, match="init: group= .* without unique_id"):
        symmem.init(group=object(), rank=0)


def test_a_unique_id_hides_its_secret_and_round_trips():
    uid = symmem.get_unique_id()
    text = str(uid)
    assert text.startswith("symmem-uid-v2:")
    secret = text.rsplit(":", 1)[1]
    assert len(secret) == 64 and secret not in repr(uid)
    assert str(symmem.UniqueId(text)) == text
    assert str(pickle.loads(pickle.dumps(uid))) == text
    with pytest.raises(ValueError, match="UniqueId: .*malformed unique id .*wrong prefix"):
        symmem.UniqueId("nope")


def test_torch_device_is_the_heaps():
    torch = pytest.importorskip("torch")
    import symmem.torch as st

    dev = st.device()
    if symmem.device() == "cpu":
        assert dev == torch.device("cpu")
    else:
        assert dev.type == "cuda" and symmem.device().startswith(f"GPU {dev.index} ")
    t = st.zeros((4,), torch.int32)
    assert t.device == dev
    st.free(t)
