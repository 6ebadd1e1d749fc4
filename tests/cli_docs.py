"""Baseline folders and traces the `opprof show`/`compare` tests build: profiles of linear > addmm
steps, device-key folders written from them, and the CLI run in-process."""

from __future__ import annotations

from builders import kernel, launch, op, step

from pytest_opprof.analysis import analyze
from pytest_opprof.baseline import baseline_from_profile, baseline_path, write_baseline
from pytest_opprof.cli import main

ENV = {"torch": "2.13.0", "cuda": "12.4", "driver": "550.54.15", "gpu_name": "x"}


def profile(addmm_us=700.0, extra=False, steps=5, kernel_name="sm90_gemm"):
    """Steps of linear > addmm (launching one kernel of addmm_us/2), relu, and optionally clone."""
    events = []
    for i in range(steps):
        base = i * 10_000
        events += [
            step(i + 1, base, 9_000),
            op("aten::linear", base + 10, addmm_us + 100),
            op("aten::addmm", base + 20, addmm_us),
            launch(base + 30, corr=i + 1),
            kernel(kernel_name, base + 40, addmm_us / 2, corr=i + 1),
            op("aten::relu", base + 1000 + addmm_us, 50),
        ]
        if extra:
            events.append(op("aten::clone", base + 2000 + addmm_us, 120))
    return analyze(events)


def write_folder(root, key, profiles):
    for nodeid, p in profiles.items():
        write_baseline(baseline_path(root, key, nodeid), baseline_from_profile(p, nodeid, key, ENV))
    return root / key


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def steps_with(durations_us):
    events = []
    for i, d in enumerate(durations_us):
        events += [step(i + 1, i * 10_000, 9_000), op("aten::mm", i * 10_000 + 10, d)]
    return events


def two_folders(tmp_path):
    """Two device-key folders: on B test_mlp's addmm takes 2x and adds a clone; test_small is the
    same; test_old only on A, test_new only on B."""
    root = tmp_path / ".opprof"
    a = write_folder(
        root,
        "nvidia-tesla-t4",
        {
            "tests/test_m.py::test_mlp": profile(700),
            "tests/test_m.py::test_small": profile(300),
            "tests/test_m.py::test_old": profile(100),
        },
    )
    b = write_folder(
        root,
        "nvidia-a10",
        {
            "tests/test_m.py::test_mlp": profile(1400, extra=True, kernel_name="ampere_sgemm"),
            "tests/test_m.py::test_small": profile(300, kernel_name="ampere_sgemm"),
            "tests/test_m.py::test_new": profile(100),
        },
    )
    return a, b
