"""symmem.moe.Buffer is bitwise reproducible: the same routing and values give the same
bits step after step while the PEs reach dispatch and combine at different (random)
times, equal to a reference that adds each token's weighted expert rows in top-k order.
Tokens are float32 here, so the combined values keep every bit of the float32 sums (a
bf16 result would round most order differences away)."""

import random
import time

import pytest

import symmem

torch = pytest.importorskip("torch")
import symmem.moe  # noqa: E402
import symmem.torch_ops  # noqa: E402

HIDDEN, TOKENS, TOP_K, EXPERTS_PER_PE, STEPS = 32, 16, 3, 2, 4


@pytest.fixture(scope="module", autouse=True)
def workspace():
    """Frees the ops' symmetric workspace after this module's tests (collective)."""
    yield
    symmem.torch_ops.free_workspace()


def dev():
    return "cpu" if symmem.device() == "cpu" else f"cuda:{torch.cuda.current_device()}"


def routing(pe, n):
    """PE `pe`'s tokens and weights: random floats, so the order of the additions shows
    in the bits; distinct experts per token, some choices left out (-1)."""
    g = torch.Generator().manual_seed(900 + pe)
    x = torch.randn(TOKENS, HIDDEN, generator=g) * 3
    idx = torch.rand(TOKENS, EXPERTS_PER_PE * n, generator=g).argsort(dim=1)[:, :TOP_K]
    idx[torch.rand(TOKENS, TOP_K, generator=g) < 0.2] = -1
    w = torch.rand(TOKENS, TOP_K, generator=g)
    return x, idx, w


def expert(rows, global_expert):
    """The stand-in expert: a scale and shift per expert."""
    e = global_expert.view(-1, 1).float()
    return rows * (1.1 + 0.3 * e) - 0.7 * e


def reference(x, idx, w, order):
    """Each token's weighted expert rows added in float32 in `order` of top-k index."""
    out = torch.zeros(x.shape, dtype=torch.float32)
    for j in order:
        e = idx[:, j]
        y = expert(x, e.clamp(min=0))
        out = out + torch.where((e >= 0).view(-1, 1), w[:, j:j + 1] * y, 0.0)
    return out


def bits(t):
    return t.cpu().view(torch.int32)


def test_results_are_the_same_bits_under_different_timing(pe):
    me, n = pe
    buf = symmem.moe.Buffer(HIDDEN, EXPERTS_PER_PE * n, TOKENS, TOP_K, dtype=torch.float32)
    x, idx, w = routing(me, n)
    want = reference(x, idx, w, range(TOP_K))
    # The test has teeth: another order of the same additions gives other bits.
    assert not torch.equal(bits(want), bits(reference(x, idx, w, reversed(range(TOP_K)))))
    x, idx, w = x.to(dev()), idx.to(dev()), w.to(dev())
    delays = random.Random(me)  # each PE late at different points of each step
    first = None
    for _ in range(STEPS):
        time.sleep(delays.uniform(0, 0.01))
        recv_x, recv_expert, handle = buf.dispatch(x, idx, w, buf.get_dispatch_layout(idx))
        y = expert(recv_x, recv_expert + me * EXPERTS_PER_PE)
        time.sleep(delays.uniform(0, 0.01))
        out = buf.combine(y, handle)
        received = torch.cat([bits(recv_x).flatten().long(), recv_expert.cpu()])
        if first is None:
            first = received
        assert torch.equal(received, first), "the rows arrived in another order"
        assert torch.equal(bits(out), bits(want))
