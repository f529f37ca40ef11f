"""Every test module runs on every PE of a job (``python -m symmem.run -n N -m pytest``):
each PE runs the same tests in the same order, so their collective calls match."""

import pytest

import symmem


@pytest.fixture(scope="session", autouse=True)
def job():
    symmem.init()
    yield
    symmem.barrier_all()


@pytest.fixture
def pe():
    """(this PE, number of PEs)."""
    return symmem.my_pe(), symmem.n_pes()
