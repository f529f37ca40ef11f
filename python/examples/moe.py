"""MoE dispatch + combine from torch, with the Rust kernels of examples/kernels (moe/):
each PE routes its bf16 tokens to top-k experts spread over the PEs, the dispatch kernel
moves every token row straight into its experts' receive buffers (as bf16, or quantized to
fp8 E4M3 with one scale per 128 elements) by warp or by block (the kernels' `_warp` and
`_block` instances), the expert kernel applies each expert and
returns the rows, and the combine kernel sums each token's weighted results in f32 and
rounds them to bf16 once. The result is checked bit for bit against a pure-torch
reference that does the same arithmetic in the same order.

    cargo build -p symmem-example-kernel-library
    python -m symmem.run -n 4 python/examples/moe.py target/debug/libsymmem_example_kernel_library.so

The same script runs on GPU PEs (SYMMEM_DEVICE=gpu), where the kernels are the PTX the
library carries and the tensors live on the PE's GPU.
"""

import sys

import torch

import symmem
import symmem.torch

# examples/kernels/src/moe/: words per run descriptor, pos_of of a dropped choice (u32::MAX
# as int32), elements per fp8 scale, the largest E4M3 and the smallest amax of a scale.
RUN_WORDS = 2
DROPPED = -1
SCALE_BLOCK = 128
FP8_MAX = 448.0
MIN_AMAX = 1e-4


def route_tokens(me, tokens, experts, top_k, seed):
    """This PE's routing: top_k distinct experts per token (int32) and their f32 weights
    (multiples of 1/256 in (0, 1])."""
    g = torch.Generator().manual_seed(seed * 7919 + me)
    experts_of = torch.rand(tokens, experts, generator=g).argsort(dim=1)[:, :top_k]
    weights = torch.randint(1, 257, (tokens, top_k), generator=g).float() / 256
    return experts_of.to(torch.int32), weights


def fp8_round_trip(x):
    """What an expert reads of bf16 tokens ``x`` sent as fp8: per 128 elements,
    amax / 448 as the scale, ``x * (448 / amax)`` rounded to E4M3, times the scale."""
    blocks = x.float().reshape(x.shape[0], -1, SCALE_BLOCK)
    amax = blocks.abs().amax(dim=2, keepdim=True).clamp(min=MIN_AMAX)
    # Both divisions as tensor by tensor: torch computes `scalar / t` as
    # `t.reciprocal() * scalar` and `t / scalar` as `t * (1 / scalar)`, which round
    # differently from the kernels' one division.
    fp8_max = torch.full_like(amax, FP8_MAX)
    q = (blocks * (fp8_max / amax)).to(torch.float8_e4m3fn)
    return (q.float() * (amax / fp8_max)).reshape(x.shape)


def reference(x, experts_of, weights, fp8):
    """Pure torch, the kernels' arithmetic: every choice's row through its expert
    (``bf16(x * (1 + (e % 4) / 4) + (e / 8 - 1))``, the stand-in expert function), then per
    token the f32 sum of weight times result in choice order, rounded to bf16 once."""
    inputs = fp8_round_trip(x) if fp8 else x.float()
    acc = torch.zeros(x.shape, dtype=torch.float32)
    for j in range(experts_of.shape[1]):
        e = experts_of[:, j:j + 1].float()
        y = (inputs * (1 + (e % 4) * 0.25) + (e * 0.125 - 1)).to(torch.bfloat16)
        acc = acc + weights[:, j:j + 1] * y.float()
    return acc.to(torch.bfloat16)


def moe_step(module, tokens=256, hidden=128, experts_per_pe=2, top_k=2, blocks=2,
             threads=64, scope="warp", fp8=0, seed=1):
    """Runs one dispatch + expert + combine step on every PE (collective) and checks this
    PE's output against the reference; returns the number of tokens checked. `scope`
    ("warp" or "block") picks the instances of the dispatch and expert kernels."""
    if scope not in ("warp", "block"):
        raise ValueError(f"scope must be 'warp' or 'block', not {scope!r}")
    me, n = symmem.my_pe(), symmem.n_pes()
    experts = experts_per_pe * n
    capacity = tokens * n  # room for every token: nothing is dropped
    dev = "cuda" if module.on_gpu else "cpu"
    i32, i64 = torch.int32, torch.int64
    # u32 words of a row in flight: bf16 pairs, or fp8 quads then one scale per block.
    words = hidden // 4 + hidden // SCALE_BLOCK if fp8 else hidden // 2

    experts_of, weights = route_tokens(me, tokens, experts, top_k, seed)
    g = torch.Generator().manual_seed(seed * 104729 + me)
    x = (torch.rand(tokens, hidden, generator=g) * 8 - 4).to(torch.bfloat16)

    # The kernels' buffers (moe/mod.rs); the control buffer holds the per-expert counters
    # and the signals: counters[El], dispatch_sig[n], combine_sig[n], sent[n], received[n],
    # count_sig[n] (the deterministic mode's, unused here).
    z = lambda *shape, dtype=i64: symmem.torch.zeros(shape, dtype=dtype)  # noqa: E731
    bf16 = torch.bfloat16
    buffers = dict(
        tokens=z(tokens, hidden, dtype=bf16), experts=z(tokens, top_k, dtype=i32),
        weights=z(tokens, top_k, dtype=torch.float32), pos_of=z(tokens, top_k, dtype=i32),
        plan=z(blocks * experts * RUN_WORDS), send=z(tokens * top_k * words, dtype=i32),
        recv=z(experts_per_pe * capacity * words, dtype=i32),
        done=z(experts_per_pe * capacity * hidden, dtype=bf16),
        runs=z(n * blocks * experts_per_pe * RUN_WORDS),
        combine_in=z(tokens * top_k * hidden, dtype=bf16), out=z(tokens, hidden, dtype=bf16),
        ctrl=z(experts_per_pe + 5 * n),
    )
    b = buffers
    b["tokens"].copy_(x.to(dev))
    b["experts"].copy_(experts_of.to(dev))
    b["weights"].copy_(weights.to(dev))
    symmem.barrier_all()

    module.launch(f"moe_dispatch_{scope}", blocks, threads, b["tokens"], b["experts"], b["pos_of"],
                  b["plan"], b["send"], b["recv"], b["runs"], b["ctrl"],
                  0,  # counts_in: null, the atomic mode (no moe_count launch first)
                  tokens, hidden, top_k, experts_per_pe, capacity, fp8)
    module.launch(f"moe_expert_{scope}", blocks, threads, b["recv"], b["runs"], b["ctrl"],
                  b["done"], b["combine_in"], hidden, experts_per_pe, capacity, blocks, fp8)
    module.launch("moe_combine", blocks, threads, b["combine_in"], b["weights"], b["pos_of"],
                  b["ctrl"], b["out"], tokens, hidden, top_k, experts_per_pe)

    pos_of = b["pos_of"].cpu()
    if (pos_of == DROPPED).any():
        raise AssertionError(f"PE {me}: a choice was dropped with capacity {capacity}")
    want = reference(x, experts_of, weights, fp8)
    got = b["out"].cpu()
    # Bit for bit: the kernels and the reference round the same values the same way.
    if not torch.equal(got.view(torch.int16), want.view(torch.int16)):
        t, h = (got.view(torch.int16) != want.view(torch.int16)).nonzero()[0].tolist()
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
    checked = moe_step(module) + moe_step(module, fp8=1, scope="block")
    print(f"PE {symmem.my_pe()} of {symmem.n_pes()} ({symmem.device()}): "
          f"{checked} tokens dispatched (bf16 and fp8), combined and checked against torch")


if __name__ == "__main__":
    main()
