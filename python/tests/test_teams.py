"""Teams: TEAM_WORLD, strided and 2D splits, team collectives and barriers, destroy."""

import gc

import numpy as np
import pytest

import symmem
from views import fill, host, view


def test_team_world_numbers_every_pe(pe):
    me, n = pe
    world = symmem.team_world()
    assert (world.my_pe, world.n_pes) == (me, n)
    assert world.world_pe(n - 1) == n - 1
    world.sync()
    world.barrier()
    with pytest.raises(ValueError, match="TEAM_WORLD is predefined"):
        world.destroy()


def test_a_strided_split_and_its_collectives(pe):
    me, n = pe
    world = symmem.team_world()
    evens = world.split_strided(0, 2, (n + 1) // 2)
    if me % 2:
        assert evens is None
    else:
        assert (evens.my_pe, evens.n_pes) == (me // 2, (n + 1) // 2)
        assert evens.world_pe(evens.n_pes - 1) == 2 * (evens.n_pes - 1)
        assert world.translate_pe(me, evens) == me // 2
        assert evens.translate_pe(0, world) == 0
    with symmem.zeros((2,), "int64") as src, symmem.zeros((2,), "int64") as dst:
        fill(src, [me, 1])
        if evens is not None:
            symmem.reduce(dst, src, "sum", team=evens)
            assert host(dst).tolist() == [sum(range(0, n, 2)), (n + 1) // 2]
            symmem.broadcast(dst, src, evens.n_pes - 1, team=evens)
            assert host(dst).tolist() == [2 * (evens.n_pes - 1), 1]
            evens.barrier()
            evens.destroy()
            with pytest.raises(ValueError, match="the team was destroyed"):
                evens.sync()
        gc.collect()
        symmem.barrier_all()


def test_split_2d_rows_and_columns(pe):
    me, n = pe
    xrange = 2
    x, y = symmem.team_world().split_2d(xrange)
    assert (x.my_pe, y.my_pe) == (me % xrange, me // xrange)
    assert x.n_pes == min(xrange, n - (me // xrange) * xrange)
    # Every PE allocates the same (a full row); a short last row uses a view of it.
    with symmem.zeros((1,), "int32") as src, symmem.zeros((xrange,), "int32") as row:
        fill(src, me)
        mine = view(row)[: x.n_pes]
        symmem.fcollect(mine, src, team=x)
        first = (me // xrange) * xrange
        assert host(mine).tolist() == list(range(first, first + x.n_pes))
        del mine
        gc.collect()
        x.barrier()
    x.destroy()
    y.destroy()
