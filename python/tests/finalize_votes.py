"""free and finalize are refused on every PE or on none: PE 1 alone keeps a numpy view of
a symmetric array alive, and every PE's free of it, then every PE's finalize, raises
naming PE 1 (before, PE 1 alone raised and the others waited in the call for it). Once
the view is gone, both succeed everywhere. Not a pytest module (the suite's session
keeps one runtime): python -m symmem.run -n 2 python/tests/finalize_votes.py"""
import gc

import numpy as np

import symmem


def raises_naming_pe_1(call, what):
    try:
        call()
    except (symmem.SymmemError, BufferError) as e:
        text = str(e)
        assert what in text and "every PE" in text, f"PE {me}: {text}"
    else:
        raise SystemExit(f"PE {me}: {call.__name__} succeeded while PE 1 held a view")


symmem.init()
me, n = symmem.my_pe(), symmem.n_pes()
arr = symmem.zeros((4,), "int64")
view = np.from_dlpack(arr) if me == 1 else None
raises_naming_pe_1(arr.free, "(PE 1 holds 1)")
assert not arr.freed
raises_naming_pe_1(symmem.finalize, "PE 1 holds 1 DLPack view(s)")
assert symmem.is_initialized()
del view
gc.collect()
arr.free()
symmem.finalize()
assert not symmem.is_initialized()
print(f"PE {me}: finalize_votes ok")
