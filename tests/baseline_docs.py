"""The hand-built profiles and documents the baseline tests share: no torch."""

from __future__ import annotations

from dataclasses import replace

from builders import op, step

from pytest_opprof.analysis import analyze
from pytest_opprof.baseline import baseline_from_profile
from pytest_opprof.compare import compare
from pytest_opprof.verdicts import Rule

NODE = "tests/test_mlp.py::test_fwd"
ENV = {"torch": "2.13.0", "cuda": None, "cpu_model": "x"}


def profile(addmm_us=(700,) * 8, extra_ops=(), linear=True):
    """Steps of aten::linear around aten::addmm (`addmm_us` each) and 9.2 ms outside the ops: a
    step of 10 ms at the default, longer by what the ops take longer."""
    events, base = [], 0
    for i, d in enumerate(addmm_us):
        base += 10_000 + (addmm_us[i - 1] - 700 if i else 0)  # each step after the one before
        events.append(step(i + 1, base, 9_300 + d))
        if linear:
            events.append(op("aten::linear", base + 10, d + 100))
        events.append(op("aten::addmm", base + 20, d))
        for j, name in enumerate(extra_ops):
            events.append(op(name, base + 5000 + j * 10, 5))
    return analyze(events)


def doc(p, key="cpu-x86_64", env=ENV):
    return baseline_from_profile(p, NODE, key, env)


def on_device(d, name="aten::addmm"):
    """The document with that op's CPU times as device times."""
    op = d.ops[name]
    return d.replace(ops={**d.ops, name: replace(op, on_device=True, device_ms=op.cpu_ms)})


def addmm_verdict(new, base, machine=None):
    return next(v for v in compare(new, base, Rule(), machine=machine).verdicts if v.op == "aten::addmm")


def threaded(d, threads, setup="2 cpus"):
    """The document as a capture on `threads` torch threads on a machine whose thread setup
    (CPUs, OMP_NUM_THREADS) is `setup`."""
    return d.replace(threads=threads, environment={**d.environment, "torch_threads": 2, "thread_setup": setup})


def walled(d, wall_ms):
    """The document with every step's wall time set to `wall_ms`, as a baseline recorded before
    the time outside the ops was (no `outside_ms`): its wall is judged beyond what slower ops add."""
    return d.replace(wall_ms=(wall_ms,) * d.steps, outside_ms=None)


def mlp_profile(hidden=1024, dtype="float", extra_copy=False, steps=8, with_flops=True):
    """An MLP's ops with their inputs recorded: two addmm of [64,256]x[256,hidden] and back."""
    flops = 2 * 64 * 256 * hidden if with_flops else 0  # a profiler made without with_flops records none
    events = []
    for i in range(steps):
        base = i * 10_000
        events.append(step(i + 1, base, 10_000))
        events.append(
            op(
                "aten::addmm",
                base + 10,
                700,
                shapes=((hidden,), (64, 256), (256, hidden), (), ()),
                dtypes=(dtype, dtype, dtype, "Scalar", "Scalar"),
                flops=flops,
            )
        )
        events.append(op("aten::relu", base + 1000, 50, shapes=((64, hidden),), dtypes=(dtype,)))
        events.append(
            op(
                "aten::addmm",
                base + 2000,
                700,
                shapes=((256,), (64, hidden), (hidden, 256), (), ()),
                dtypes=(dtype, dtype, dtype, "Scalar", "Scalar"),
                flops=flops,
            )
        )
    return analyze(events)
