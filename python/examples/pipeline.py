"""A put/signal pipeline between torch tensors: each PE streams a tensor to its right
neighbour in chunks, each chunk followed by its own signal (one put_signal), and the
neighbour reduces every chunk as soon as its signal arrives, while later chunks are still
on the way.

    python -m symmem.run -n 2 python/examples/pipeline.py
"""

import torch

import symmem
import symmem.torch

CHUNKS, CHUNK = 8, 1 << 14

symmem.init()
me, n = symmem.my_pe(), symmem.n_pes()
right, left = (me + 1) % n, (me - 1) % n

inbox = symmem.torch.zeros((CHUNKS, CHUNK), dtype=torch.float32)
signals = symmem.torch.zeros((CHUNKS,), dtype=torch.uint64)
outgoing = torch.arange(CHUNKS * CHUNK, dtype=torch.float32).reshape(CHUNKS, CHUNK) + me

# Send every chunk with its signal: the signal is set only after the chunk's data landed.
for c in range(CHUNKS):
    symmem.put_signal(inbox[c], outgoing[c], signals[c:c + 1], 1, right)

# Meanwhile, consume what the left neighbour sends, chunk by chunk, in arrival order.
sums = torch.empty(CHUNKS, dtype=torch.float64)
for c in range(CHUNKS):
    symmem.signal_wait_until(signals[c:c + 1], "==", 1)
    sums[c] = inbox[c].double().sum()

expected = (torch.arange(CHUNKS * CHUNK, dtype=torch.float64).reshape(CHUNKS, CHUNK) + left).sum(1)
assert torch.equal(sums, expected), f"PE {me}: {sums} != {expected}"
print(f"PE {me} of {n}: {CHUNKS} chunks of {CHUNK} floats from PE {left}, each reduced on arrival")

symmem.barrier_all()  # nobody still sends into the buffers
symmem.torch.free(signals)
symmem.torch.free(inbox)
