"""MoE dispatch + combine from torch, with the Rust kernels of examples/kernels (moe.rs):
each PE routes its tokens to top-k experts spread over the PEs, the dispatch kernel moves
every token row straight into its experts' receive buffers, the expert kernel applies each
expert and returns the rows, and the combine kernel sums each token's weighted results.
The result is checked exactly against a pure-torch reference (index_select, scatter_add).

    cargo build -p symmem-example-kernel-library
    python -m symmem.run -n 4 python/examples/moe.py target/debug/libsymmem_example_kernel_library.so

The same script runs on GPU PEs (SYMMEM_DEVICE=gpu), where the kernels are the PTX the
library carries and the tensors live on the PE's GPU.
"""

import sys

import torch

import symmem
import symmem.torch

# examples/kernels/src/moe.rs: words per run descriptor, and pos_of of a dropped choice.
RUN_WORDS = 2
DROPPED = -1  # u64::MAX, as int64


def route_tokens(me, tokens, experts, top_k, seed):
    """This PE's routing: top_k distinct experts per token, each with a weight in 1..4, as
    route words (expert in the low 32 bits, weight in the high 32)."""
    g = torch.Generator().manual_seed(seed * 7919 + me)
    experts_of = torch.rand(tokens, experts, generator=g).argsort(dim=1)[:, :top_k]
    weights = torch.randint(1, 5, (tokens, top_k), generator=g)
    return experts_of, weights, experts_of | (weights << 32)


def reference(x, experts_of, weights):
    """Pure torch: every choice's row through its expert (``x * (e + 1) + e``, the kernels'
    stand-in expert function), weighted, summed per token."""
    tokens, top_k = experts_of.shape
    token_of_choice = torch.arange(tokens).repeat_interleave(top_k)
    rows = x.index_select(0, token_of_choice)
    e = experts_of.reshape(-1, 1)
    y = (rows * (e + 1) + e) * weights.reshape(-1, 1)
    out = torch.zeros_like(x)
    return out.scatter_add_(0, token_of_choice.reshape(-1, 1).expand_as(y), y)


def moe_step(module, tokens=256, hidden=64, experts_per_pe=2, top_k=2, blocks=2,
             threads=64, warp_scope=1, seed=1):
    """Runs one dispatch + expert + combine step on every PE (collective) and checks this
    PE's output against the reference; returns the number of tokens checked."""
    me, n = symmem.my_pe(), symmem.n_pes()
    experts = experts_per_pe * n
    capacity = tokens * n  # room for every token: nothing is dropped
    dev = "cuda" if module.on_gpu else "cpu"
    i64 = torch.int64

    experts_of, weights, route_words = route_tokens(me, tokens, experts, top_k, seed)
    g = torch.Generator().manual_seed(seed * 104729 + me)
    x = torch.randint(0, 65536, (tokens, hidden), generator=g, dtype=i64)

    # The kernels' buffers (moe.rs); the control buffer holds the per-expert counters and
    # the signals: counters[El], dispatch_sig[n], combine_sig[n], sent[n], received[n].
    z = lambda *shape, dtype=i64: symmem.torch.zeros(shape, dtype=dtype)  # noqa: E731
    buffers = dict(
        tokens=z(tokens, hidden), route=z(tokens, top_k), pos_of=z(tokens, top_k),
        plan=z(blocks * experts * RUN_WORDS), send=z(tokens * top_k * hidden),
        recv=z(experts_per_pe * capacity * hidden),
        runs=z(n * blocks * experts_per_pe * RUN_WORDS), status=z(blocks * n, dtype=torch.int32),
        pick=z(blocks), combine_in=z(tokens * top_k * hidden), out=z(tokens, hidden),
        ctrl=z(experts_per_pe + 4 * n),
    )
    b = buffers
    b["tokens"].copy_(x.to(dev))
    b["route"].copy_(route_words.to(dev))
    symmem.barrier_all()

    module.launch("moe_dispatch", blocks, threads, b["tokens"], b["route"], b["pos_of"],
                  b["plan"], b["send"], b["recv"], b["runs"], b["ctrl"], tokens, hidden,
                  top_k, experts_per_pe, capacity, warp_scope)
    module.launch("moe_expert", blocks, threads, b["recv"], b["runs"], b["ctrl"], b["status"],
                  b["pick"], b["combine_in"], hidden, experts_per_pe, capacity, blocks,
                  warp_scope)
    module.launch("moe_combine", blocks, threads, b["combine_in"], b["route"], b["pos_of"],
                  b["ctrl"], b["out"], tokens, hidden, top_k, experts_per_pe)

    pos_of = b["pos_of"].cpu()
    if (pos_of == DROPPED).any():
        raise AssertionError(f"PE {me}: a choice was dropped with capacity {capacity}")
    want = reference(x, experts_of, weights)
    got = b["out"].cpu()
    if not torch.equal(got, want):
        t, h = (got != want).nonzero()[0].tolist()
        raise AssertionError(
            f"PE {me} token {t} element {h}: expected {want[t, h].item()}, got "
            f"{got[t, h].item()} (experts {experts_of[t].tolist()}, weights {weights[t].tolist()})")

    symmem.barrier_all()  # every PE is done reading its peers' buffers
    del got, pos_of
    for tensor in reversed(list(buffers.values())):
        symmem.torch.free(tensor)
    return tokens


def main():
    if len(sys.argv) != 2:
        sys.exit(f"usage: python -m symmem.run -n 4 {sys.argv[0]} LIBRARY.so")
    symmem.init()
    module = symmem.load_module(sys.argv[1])
    checked = moe_step(module)
    print(f"PE {symmem.my_pe()} of {symmem.n_pes()} ({symmem.device()}): "
          f"{checked} tokens dispatched, combined and checked against torch")


if __name__ == "__main__":
    main()
