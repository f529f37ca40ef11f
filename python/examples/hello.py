"""Each PE puts its number into its right neighbour's symmetric array, then reads its own
through numpy, with no copy: python -m symmem.run -n 4 python/examples/hello.py"""
import numpy as np

import symmem

symmem.init()
me, n = symmem.my_pe(), symmem.n_pes()
with symmem.zeros((4,), "int64") as buf:
    symmem.put(buf, np.full(4, me, dtype=np.int64), (me + 1) % n)
    symmem.barrier_all()
    view = np.from_dlpack(buf)
    print(f"PE {me} of {n} ({symmem.device()}): got {view.tolist()} from PE {(me - 1) % n}")
    assert (view == (me - 1) % n).all()
    del view
    symmem.barrier_all()
