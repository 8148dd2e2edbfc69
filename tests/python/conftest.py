"""Shared fixtures for the Python tests. The tests import the *installed* package (`pip install .`),
so run them from outside the source tree: `cd /tmp && python -m pytest /work/main/tests/python -q`."""

import pathlib

import pytest

import strata

def pytest_report_header(config):
    return f"strata {strata.__version__} from {pathlib.Path(strata.__file__).parent}"


@pytest.fixture(autouse=True)
def _restore_global_state():
    """Tests may change the thread count or reseed; put both back afterwards."""
    threads = strata.get_num_threads()
    yield
    strata.set_num_threads(threads)
    strata.manual_seed(strata.initial_seed())
