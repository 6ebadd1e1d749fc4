"""End to end: torch.distributed code under `pytest --opprof`, on one CPU rank (gloo, world size
1): what a collective's op time holds. The leak of a process group: test_plugin_setting_leaks.py;
the gloo range's pairing: test_ranges.py."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch built without torch.distributed")

COLLECTIVE_BUDGET = """
import os
import tempfile
import pytest
import torch
import torch.distributed as dist

@pytest.fixture
def group():
    where = os.path.join(tempfile.mkdtemp(), "pg")
    dist.init_process_group("gloo", init_method="file://" + where, rank=0, world_size=1)
    yield
    dist.destroy_process_group()

def test_reduce(opprof, group):
    t = torch.ones(256)
    opprof.run(dist.all_reduce, t, warmup=1, steps=5)
    opprof.assert_op_below("c10d::allreduce_", ms=1e-6)  # 1 ns: the launch and the collective over it
"""


def test_an_op_limit_on_a_collective_fails_on_the_collective_gloo_ran_on_its_threads(pytester):
    """A trial's assert_op_below("c10d::allreduce_", ms=1) passed an all-reduce that waited 409 ms a
    step for a slower rank: the op's time is its launch; its limit holds for the collective gloo
    ran on its own threads (range gloo:all_reduce), said apart from the launch."""
    pytester.makepyfile(test_dist=COLLECTIVE_BUDGET)
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--opprof")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*c10d::allreduce_: * ms/step > limit 0.000001 ms (median of 5 steps*; c10d::allreduce_ launched a "
            "collective that gloo ran on its own threads, over the op's limit: gloo:all_reduce: * ms/step > limit "
            "0.000001 ms (median of 5 steps*; the op's own time is its launch alone*"
        ]
    )
    assert not dist.is_initialized()
