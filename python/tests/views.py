"""Views and copies of symmetric arrays for the suites, on whichever device this PE's heap
is: numpy on CPU PEs, torch on GPU PEs (numpy cannot see CUDA memory). The suites run
unchanged on both; what only one kind of PE can do is tested where it can."""

import re

import numpy as np

import symmem


def on_gpu():
    """Whether this PE's symmetric heap (and its kernels) are on a GPU."""
    return symmem.device() != "cpu"


def torch_device():
    """This PE's torch device: `cpu`, or the CUDA device its heap is on."""
    import torch

    found = re.match(r"GPU (\d+) ", symmem.device())
    return torch.device("cuda", int(found[1])) if found else torch.device("cpu")


def view(a):
    """A zero-copy, writable view of symmetric array `a` (or of a handle's view): numpy's
    on CPU PEs, torch's on GPU PEs. Either one is a symmetric operand."""
    if not on_gpu():
        return np.from_dlpack(a)
    import torch

    return torch.from_dlpack(a)


def host(x):
    """The values of `x` (a symmetric array, or a numpy or torch view of one) as a new
    numpy array in host memory."""
    if isinstance(x, np.ndarray):
        return x.copy()
    if hasattr(x, "cpu"):
        return x.cpu().numpy()
    return host(view(x))


def fill(a, values):
    """Writes `values` (broadcast to its shape) into symmetric array `a`, straight into its
    memory."""
    v = view(a)
    if isinstance(v, np.ndarray):
        v[...] = values
    else:
        import torch

        want = np.array(np.broadcast_to(np.asarray(values, dtype=a.dtype), tuple(v.shape)))
        v.copy_(torch.from_numpy(want))


def local(values, dtype):
    """A local (not symmetric) array holding `values`, in the memory this PE's kernels and
    symmetric views use: numpy on CPU PEs, a CUDA tensor on GPU PEs."""
    array = np.asarray(values, dtype=dtype)
    if not on_gpu():
        return array
    import torch

    return torch.from_numpy(np.array(array)).to(torch_device())
