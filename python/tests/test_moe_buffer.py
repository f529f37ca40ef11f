"""symmem.moe.Buffer: dispatch to the experts' PEs, torch experts, weighted combine,
against a pure-torch reference that applies every token's experts where it is."""

import pytest

import symmem

torch = pytest.importorskip("torch")
import symmem.moe  # noqa: E402
import symmem.torch_ops  # noqa: E402

HIDDEN, TOKENS, TOP_K, EXPERTS_PER_PE = 16, 12, 3, 2


@pytest.fixture(scope="module", autouse=True)
def workspace():
    """Frees the ops' symmetric workspace after this module's tests (collective), so the
    suites after it find no symmetric memory of these tests."""
    yield
    symmem.torch_ops.free_workspace()


def dev():
    return "cpu" if symmem.device() == "cpu" else f"cuda:{torch.cuda.current_device()}"


def routing(pe, n, tokens=TOKENS):
    """PE `pe`'s tokens (small integers, exact in bf16), distinct experts per token with
    some choices left out (-1), and weights in quarters (exact sums)."""
    g = torch.Generator().manual_seed(500 + pe)
    x = torch.randint(-4, 5, (tokens, HIDDEN), generator=g).to(torch.bfloat16)
    idx = torch.rand(tokens, EXPERTS_PER_PE * n, generator=g).argsort(dim=1)[:, :TOP_K]
    idx[torch.rand(tokens, TOP_K, generator=g) < 0.2] = -1
    w = torch.randint(1, 5, (tokens, TOP_K), generator=g).float() / 4
    return x, idx, w


def expert(rows, global_expert):
    """The stand-in expert: a different scale per expert."""
    return (rows.float() * (1 + global_expert.view(-1, 1))).to(rows.dtype)


def reference(x, idx, w):
    out = torch.zeros(x.shape, dtype=torch.float32)
    for j in range(TOP_K):
        e = idx[:, j]
        y = expert(x, e.clamp(min=0)).float()
        out += torch.where((e >= 0).view(-1, 1), w[:, j:j + 1] * y, 0.0)
    return out.to(x.dtype)


def step(buf, me, n, tokens_of=lambda pe: TOKENS):
    """One dispatch, experts and combine; PE `pe` has `tokens_of(pe)` tokens."""
    x, idx, w = routing(me, n, tokens_of(me))
    x, idx, w = x.to(dev()), idx.to(dev()), w.to(dev())
    layout = buf.get_dispatch_layout(idx)
    recv_x, recv_expert, handle = buf.dispatch(x, idx, w, layout)
    # Every row this PE received is a row some PE routed to one of its experts.
    want_rows = sum(int(((routing(p, n, tokens_of(p))[1] // EXPERTS_PER_PE) == me).sum())
                    for p in range(n))
    assert recv_x.shape == (want_rows, HIDDEN) and recv_expert.shape == (want_rows,)
    assert ((recv_expert >= 0) & (recv_expert < EXPERTS_PER_PE)).all()
    y = expert(recv_x, recv_expert + me * EXPERTS_PER_PE)
    out = buf.combine(y, handle)
    assert torch.equal(out.cpu().view(torch.int16), reference(*routing(me, n, tokens_of(me)))
                       .view(torch.int16))


def test_dispatch_and_combine_match_torch(pe):
    me, n = pe
    buf = symmem.moe.Buffer(HIDDEN, EXPERTS_PER_PE * n, TOKENS, TOP_K)
    step(buf, me, n)
    step(buf, me, n, tokens_of=lambda pe: TOKENS - 1 - pe)  # a different number per PE


def test_the_layout_counts_rows_per_pe_and_expert(pe):
    me, n = pe
    buf = symmem.moe.Buffer(HIDDEN, EXPERTS_PER_PE * n, TOKENS, TOP_K)
    _, idx, _ = routing(me, n)
    layout = buf.get_dispatch_layout(idx.to(dev()))
    chosen = idx[idx >= 0]
    assert layout.num_rows_per_expert.cpu().tolist() == \
        torch.bincount(chosen, minlength=EXPERTS_PER_PE * n).tolist()
    assert layout.num_rows_per_pe.cpu().tolist() == \
        torch.bincount(chosen // EXPERTS_PER_PE, minlength=n).tolist()


def test_a_moe_step_compiles_without_graph_breaks(pe):
    me, n = pe
    torch._dynamo.reset()
    buf = symmem.moe.Buffer(HIDDEN, EXPERTS_PER_PE * n, TOKENS, TOP_K)

    def moe(x, idx, w):
        recv_x, recv_expert, handle = buf.dispatch(x, idx, w, buf.get_dispatch_layout(idx))
        return buf.combine(expert(recv_x, recv_expert + me * EXPERTS_PER_PE), handle)

    x, idx, w = (t.to(dev()) for t in routing(me, n))
    compiled = torch.compile(moe, backend="aot_eager", fullgraph=True)
    assert torch.equal(compiled(x, idx, w).cpu().view(torch.int16),
                       reference(*routing(me, n)).view(torch.int16))


def test_bad_arguments_name_what_is_wrong(pe):
    _, n = pe
    with pytest.raises(ValueError, match="num_experts = 3 does not spread evenly"):
        symmem.moe.Buffer(HIDDEN, 3 if n > 1 else 0, TOKENS, TOP_K)
    buf = symmem.moe.Buffer(HIDDEN, EXPERTS_PER_PE * n, TOKENS, TOP_K)
    with pytest.raises(ValueError, match="get_dispatch_layout: topk_idx must be"):
        buf.get_dispatch_layout(torch.zeros((TOKENS, TOP_K + 1), dtype=torch.int64))
