"""torch.ops.symmem.*: the collectives and all_to_all_v as torch custom ops, eager against a
torch reference, under torch.compile(fullgraph=True) with aot_eager (which runs the fake
implementations while tracing), and in a CUDA graph on GPU PEs."""

import pytest

import symmem

torch = pytest.importorskip("torch")
import symmem.torch  # noqa: E402 (registers the ops)
from symmem import _staging, torch_ops  # noqa: E402
from symmem.all_to_all_v import _through_native  # noqa: E402

ops = torch.ops.symmem


@pytest.fixture(scope="module", autouse=True)
def workspace():
    """Frees the ops' symmetric workspace after this module's tests (collective), so the
    suites after it find no symmetric memory of these tests."""
    yield
    torch_ops.free_workspace()


def dev():
    return "cpu" if symmem.device() == "cpu" else f"cuda:{torch.cuda.current_device()}"


def pe_input(pe, shape, dtype=torch.float32):
    """PE `pe`'s input of a test: small integers, exact in every dtype and sum."""
    g = torch.Generator().manual_seed(1000 + pe)
    return torch.randint(-8, 9, shape, generator=g).to(dtype)


def every_input(n, shape, dtype=torch.float32):
    return [pe_input(p, shape, dtype) for p in range(n)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16])
@pytest.mark.parametrize("op", ["sum", "max", "min", "prod"])
def test_all_reduce_matches_torch(pe, dtype, op):
    me, n = pe
    xs = torch.stack(every_input(n, (3, 5), dtype))
    want = {"sum": xs.sum(0), "max": xs.amax(0), "min": xs.amin(0),
            "prod": xs.prod(0)}[op].to(dtype)
    got = ops.all_reduce(xs[me].to(dev()), op)
    assert got.dtype == dtype and got.device.type == dev().split(":")[0]
    assert torch.equal(got.cpu(), want)


def test_bitwise_all_reduce_and_its_errors(pe):
    me, n = pe
    got = ops.all_reduce(torch.tensor([1 << me, 7], device=dev()), "or")
    assert got.cpu().tolist() == [(1 << n) - 1, 7]
    with pytest.raises(TypeError, match="all_reduce: xor is bitwise"):
        ops.all_reduce(torch.ones(2, device=dev()), "xor")
    with pytest.raises(ValueError, match="all_reduce: unknown reduction 'mean'"):
        ops.all_reduce(torch.ones(2, device=dev()), "mean")


def test_all_gather_reduce_scatter_all_to_all_broadcast(pe):
    me, n = pe
    xs = every_input(n, (2 * n, 3))
    x = xs[me].to(dev())
    assert torch.equal(ops.all_gather(x).cpu(), torch.cat(xs))
    assert torch.equal(ops.all_gather(torch.tensor(float(me), device=dev())).cpu(),
                       torch.arange(n, dtype=torch.float32))
    assert torch.equal(ops.reduce_scatter(x, "sum").cpu(),
                       torch.stack(xs).sum(0).chunk(n)[me])
    assert torch.equal(ops.all_to_all(x).cpu(), torch.cat([t.chunk(n)[me] for t in xs]))
    assert torch.equal(ops.broadcast(x, n - 1).cpu(), xs[n - 1])
    with pytest.raises(ValueError, match=f"all_to_all: input's first dimension must split "
                                         f"into n_pes = {n}"):
        ops.all_to_all(torch.ones(2 * n + 1, device=dev()))
    with pytest.raises(ValueError, match="broadcast: root -1 is not a PE"):
        ops.broadcast(x, -1)


def aot_eager_recording(graphs):
    """aot_eager that also keeps each forward graph it runs (after dead code elimination)."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func

    def keep(gm, _inputs):
        graphs.append(gm)
        return make_boxed_func(gm.forward)

    return aot_autograd(fw_compiler=keep)


def test_the_ops_compile_without_graph_breaks(pe):
    me, n = pe
    torch._dynamo.reset()
    graphs = []

    def step(x):
        y = ops.all_reduce(x * 2, "sum")
        ops.barrier()
        g = ops.all_gather(y + 1)
        ops.all_reduce(x, "max")  # unused: kept, every PE must still call it
        return ops.reduce_scatter(g, "sum") + ops.all_to_all(g) [:y.shape[0]] \
            + ops.broadcast(y, 0)

    compiled = torch.compile(step, backend=aot_eager_recording(graphs), fullgraph=True)
    x = pe_input(me, (n, 4)).to(dev())
    assert torch.equal(compiled(x).cpu(), step(x).cpu())
    targets = [node.target for gm in graphs for node in gm.graph.nodes]
    assert targets.count(ops.barrier.default) == 1
    assert targets.count(ops.all_reduce.default) == 2


def splits_of(pe, n, rows):
    """PE `pe`'s in_splits: how many of its `rows` go to each PE (some zero)."""
    g = torch.Generator().manual_seed(77 + pe)
    cuts = torch.randint(0, rows + 1, (n - 1,), generator=g).sort().values
    return torch.diff(torch.cat([torch.tensor([0]), cuts, torch.tensor([rows])]))


def all_to_all_v_reference(me, n, rows_of, hidden):
    """What PE `me` receives: each PE's run for it, in PE order, and the splits/offsets."""
    parts = []
    for p in range(n):
        s = splits_of(p, n, rows_of(p))
        start = int(s[:me].sum())
        parts.append(pe_input(p, (rows_of(p), hidden))[start:start + int(s[me])])
    counts = torch.tensor([len(t) for t in parts])
    return torch.cat(parts), torch.stack([counts, torch.cumsum(counts, 0) - counts])


def run_all_to_all_v(fn, me, n, rows_of=lambda pe: 12, hidden=3):
    """`fn(input, out, in_splits, out_splits_offsets)` on this PE's inputs (PE `pe` has
    `rows_of(pe)` rows), checked."""
    want, want_so = all_to_all_v_reference(me, n, rows_of, hidden)
    out = torch.full((max(map(rows_of, range(n))) * n, hidden), -1.0, device=dev())
    so = torch.zeros((2, n), dtype=torch.int64, device=dev())
    rows = rows_of(me)
    fn(pe_input(me, (rows, hidden)).to(dev()), out, splits_of(me, n, rows).to(dev()), so)
    assert torch.equal(so.cpu(), want_so)
    assert torch.equal(out[:len(want)].cpu(), want)
    assert (out[len(want):] == -1).all()  # rows beyond the received ones are untouched


def test_all_to_all_v_matches_torch(pe):
    me, n = pe
    run_all_to_all_v(ops.all_to_all_v, me, n)
    run_all_to_all_v(ops.all_to_all_v, me, n, rows_of=lambda pe: 0)
    if symmem.device() == "cpu":  # GPU PEs stage input in symmetric memory: one shape
        run_all_to_all_v(ops.all_to_all_v, me, n, rows_of=lambda pe: 5 + 3 * pe)


def test_all_to_all_v_compiles(pe):
    me, n = pe
    torch._dynamo.reset()

    def step(x, out, splits, so):
        ops.all_to_all_v(x * 1, out, splits, so)

    run_all_to_all_v(torch.compile(step, backend="aot_eager", fullgraph=True), me, n)


def test_the_native_route_of_all_to_all_v(pe):
    """The GPU PEs' route (the runtime's alltoallv: its kernel on GPU PEs, the host
    collective here on CPU PEs), on one node or two."""
    me, n = pe
    run_all_to_all_v(_through_native, me, n)
    run_all_to_all_v(_through_native, me, n, rows_of=lambda pe: 0)
    run_all_to_all_v(_through_native, me, n, hidden=5)  # rows of 20 bytes
    # Operands symmetric already (torch's all_to_all_vdev contract): used in place.
    from symmem import torch as symtorch
    rows, hidden = 12, 3
    made = [symtorch.empty(s, d) for s, d in (((rows, hidden), torch.float32),
                                              ((rows * n, hidden), torch.float32),
                                              ((n,), torch.int64), ((2, n), torch.int64))]
    try:
        def in_place(x, out, splits, so):
            made[0].copy_(x), made[1].copy_(out), made[2].copy_(splits)
            _through_native(*made)
            out.copy_(made[1]), so.copy_(made[3])
        run_all_to_all_v(in_place, me, n, rows_of=lambda pe: rows, hidden=hidden)
    finally:
        symmem.barrier_all()
        for t in made:
            symtorch.free(t)


def test_native_alltoallv_refuses_bad_operands(pe):
    """symmem._native.alltoallv on symmetric arrays: bad dtypes and rows refused on the
    calling PE; on CPU PEs (the host form) an out too small fails every PE alike."""
    me, n = pe
    from symmem import _native
    x, out, small = (symmem.zeros(s, "float32") for s in ((2, 3), (2 * n, 3), (1, 3)))
    s, so, s32 = symmem.zeros((n,), "int64"), symmem.zeros((2 * n,), "int64"), \
        symmem.zeros((n,), "int32")
    try:
        with pytest.raises(TypeError, match="alltoallv: in_splits must be int64, got int32"):
            _native.alltoallv(out, x, s32, so)
        with pytest.raises(TypeError, match="alltoallv: out's rows"):
            _native.alltoallv(s, x, s, so)
        if symmem.device() == "cpu":
            from views import view
            view(s)[:] = 0
            view(s)[0] = 2  # every PE sends both rows to PE 0, whose small holds 1
            with pytest.raises(ValueError, match=f"team PE 0 \\(world PE 0\\) receives "
                                                 f"{2 * n} rows but its out holds 1"):
                _native.alltoallv(small, x, s, so)
    finally:
        symmem.barrier_all()
        for a in (x, out, small, s, so, s32):
            a.free()


def test_all_to_all_v_errors_name_the_argument(pe):
    me, n = pe
    x = torch.ones((4, 2), device=dev())
    so = torch.zeros((2, n), dtype=torch.int64, device=dev())
    splits = torch.zeros(n, dtype=torch.int64, device=dev())
    with pytest.raises(ValueError, match=f"in_splits must be int64 of shape \\({n},\\)"):
        ops.all_to_all_v(x, torch.empty((4, 2), device=dev()), splits.int(), so)
    with pytest.raises(TypeError, match="out's rows"):
        ops.all_to_all_v(x, torch.empty((4, 3), device=dev()), splits, so)
    if symmem.device() == "cpu":
        splits[0] = 4  # every PE sends its 4 rows to PE 0, which has room for 1
        with pytest.raises(ValueError, match=f"PE 0 receives {4 * n} rows but its out has "
                                             "room for 1"):
            ops.all_to_all_v(x, torch.empty((1, 2)), splits, so)


def test_free_workspace_then_the_ops_allocate_it_again(pe):
    me, n = pe
    torch_ops.free_workspace()
    assert all(w.tensor is None for w in _staging._workspaces)
    assert ops.all_reduce(torch.ones(3, device=dev())).cpu().tolist() == [n] * 3
    torch_ops.free_workspace()


@pytest.mark.skipif("symmem.device() == 'cpu'", reason="CUDA graphs need GPU PEs")
def test_cuda_graph_capture_and_replay(pe):
    me, n = pe
    x = torch.zeros((n, 4), device=dev())
    ops.all_reduce(x, "sum")  # grows the workspace before the capture
    ops.all_gather(x)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = ops.all_reduce(x, "sum")
        g = ops.all_gather(y)
    for step in range(3):
        x.copy_(pe_input(me, (n, 4)) + step)
        graph.replay()
        torch.cuda.synchronize()
        want = sum(pe_input(p, (n, 4)) + step for p in range(n))
        assert torch.equal(y.cpu(), want) and torch.equal(g.cpu(), torch.cat([want] * n))


def test_gradients_move_the_other_way(pe):
    me, n = pe
    xs = [pe_input(p, (n, 2)).requires_grad_() for p in range(n)]
    # The loss of PE p weights its output by (p + 1): every PE's gradient sums them all.
    weight = float(me + 1)
    x = xs[me].detach().to(dev()).requires_grad_()
    for op, ref in ((lambda t: ops.all_reduce(t, "sum"), lambda ts: sum(ts)),
                    (ops.all_gather, torch.cat),
                    (lambda t: ops.reduce_scatter(t, "sum"),
                     lambda ts: [sum(ts).chunk(n)[p] for p in range(n)]),
                    (ops.all_to_all,
                     lambda ts: [torch.cat([t.chunk(n)[p] for t in ts]) for p in range(n)])):
        x.grad = None
        (op(x) * weight).sum().backward()
        outs = ref(xs)
        outs = outs if isinstance(outs, list) else [outs] * n
        want = torch.autograd.grad(sum((o * (p + 1)).sum() for p, o in enumerate(outs)),
                                   xs[me], retain_graph=True)[0]
        assert torch.equal(x.grad.cpu(), want)
    with pytest.raises(RuntimeError, match="all_reduce: the gradient is defined for op='sum'"):
        ops.all_reduce(x, "max").sum().backward()
