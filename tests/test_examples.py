"""Every folder of conftest_examples/ runs as its README says, from the repository root, in a
fresh process (as a newcomer runs it), so that none of them can rot."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "conftest_examples"
FOLDERS = sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir() and p.name[:2].isdigit())


def release(version: str) -> str:
    """A torch version without its build tag: `2.13.0+cpu` -> `2.13.0` (the tag names the wheel's
    CUDA, not the release; CI pins the release)."""
    return version.split("+")[0]


def baselines_torch() -> set[str]:
    """The torch versions the committed example baselines were recorded with."""
    files = (EXAMPLES / ".opprof").rglob("*.json")
    return {json.loads(f.read_text())["environment"]["torch"] for f in files}


def same_torch_as_the_baselines() -> None:
    """Another torch release runs other ops (its decompositions and compiler differ): a structure
    change against baselines recorded with another torch is a true verdict, not a defect here."""
    import torch

    recorded = baselines_torch()
    if {release(v) for v in recorded} != {release(torch.__version__)}:
        pytest.skip(
            f"the example baselines were recorded with torch {', '.join(sorted(recorded))}, not {torch.__version__}"
        )


def pytest_in_repo(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`pytest ARGS` at the repository root, as the README shows it (no cache files written).
    Time verdicts are off here: the examples' baselines were recorded on another machine, and
    the time rule has its own deterministic tests; structure and work are compared."""
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", *args]
    return subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=600, env={**os.environ, **(env or {})}
    )


def test_example_baselines_are_one_machines_recording_of_now() -> None:
    """The committed example baselines come from one machine and hold every environment fact a
    recording writes now: the README's Quick start names that CPU, and a newcomer on it sees no
    `environment differs` line, nor lines added to the `git diff` it shows (a docs audit found
    two recorded on another CPU, and none with `cpu_capability`)."""
    from pytest_opprof.documents import ENVIRONMENT_KEYS

    environments = {
        f.relative_to(EXAMPLES): json.loads(f.read_text())["environment"]
        for f in (EXAMPLES / ".opprof").rglob("*.json")
    }
    assert environments
    assert {
        name: sorted(set(ENVIRONMENT_KEYS) - env.keys())
        for name, env in environments.items()
        if set(ENVIRONMENT_KEYS) - env.keys()
    } == {}
    models = {env["cpu_model"] for env in environments.values()}
    assert len(models) == 1, models
    readme = (ROOT / "README.md").read_text()
    assert f"recorded them (an {models.pop()})" in " ".join(readme.split())


def counts(stdout: str) -> dict[str, int]:
    last = stdout.strip().splitlines()[-1]
    return {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|skipped|errors?)", last)}


def test_each_folder_has_its_conftest_tests_and_readme():
    """Every example folder has a README; every folder but the CI recipes a conftest.py and tests."""
    assert len(FOLDERS) >= 6
    for name in FOLDERS:
        folder = EXAMPLES / name
        assert (folder / "README.md").is_file(), name
        if name != "06_ci":
            assert (folder / "conftest.py").is_file() and list(folder.glob("test_*.py")), name


def test_the_examples_measured_compare_with_their_committed_baselines(tmp_path):
    """`pytest --opprof conftest_examples`: every test passes (the GPU folder skips, saying
    why), prints its table, and every test is compared with its committed baseline."""
    same_torch_as_the_baselines()
    report = tmp_path / "r.json"
    result = pytest_in_repo(
        "--opprof", "conftest_examples", "--opprof-fail-on=structure,work", f"--opprof-json={report}", "-rs"
    )
    assert counts(result.stdout) == {"passed": 13, "skipped": 3}, result.stdout[-3000:]
    assert "needs a CUDA device" in result.stdout
    assert "01_mlp_budgets/test_mlp.py::test_budgets [passed] (10 steps" in result.stdout
    listed = json.loads(report.read_text())["tests"]
    skipped = [t["nodeid"].split("/")[0] for t in listed if t["outcome"] == "skipped"]
    assert skipped == ["05_gpu_only"] * 3  # listed, as skipped before they ran
    tests = [t for t in listed if t["outcome"] != "skipped"]
    assert {t["baseline"]["status"] for t in tests} <= {"compared", "kept"}, [t["baseline"] for t in tests]
    assert len(tests) == 13 and {t["nodeid"].split("/")[0] for t in tests} == {
        "01_mlp_budgets",
        "02_transformer_block",
        "03_rules_and_keys",
        "04_compiled",
        "07_training",
    }
    assert "Failed to initialize NumPy" not in result.stdout + result.stderr
    assert "USDT:" not in result.stdout + result.stderr and "warnings summary" not in result.stdout
    # the committed files are today's: a trial's run read `recorded before pytest-opprof read
    # torch.compile's graph call` for 04_compiled's, whose CompiledFxGraph went uncompared
    assert not [t["nodeid"] for t in tests if t["baseline"]["graph_call_unread"]]
    assert "graph call (CompiledFxGraph)" not in result.stdout


def test_the_examples_pass_without_opprof():
    """Without --opprof the examples pass as plain tests and the plugin says it is off."""
    result = pytest_in_repo("conftest_examples")
    assert counts(result.stdout) == {"passed": 13, "skipped": 3}, result.stdout[-3000:]
    assert "opprof: off" in result.stdout


def test_the_regression_demo_fails_as_its_readme_says():
    """OPPROF_EXAMPLE_REGRESSION=1 adds a layer: the budget fails on its count, the baselines
    of the other tests fail on structure."""
    result = pytest_in_repo("--opprof", "conftest_examples/01_mlp_budgets", env={"OPPROF_EXAMPLE_REGRESSION": "1"})
    assert counts(result.stdout) == {"failed": 5}, result.stdout[-3000:]
    assert "aten::addmm: 3 calls/step, expected 2" in result.stdout
    assert "structure changed: aten::linear 2 -> 3/step, aten::addmm 2 -> 3/step" in result.stdout  # costliest first


def test_the_training_demo_fails_as_its_readme_says():
    """OPPROF_EXAMPLE_OPTIMIZER=adam swaps the optimizer: both tests fail on their range
    assertion, which names the range that ran instead."""
    result = pytest_in_repo("--opprof", "conftest_examples/07_training", env={"OPPROF_EXAMPLE_OPTIMIZER": "adam"})
    assert counts(result.stdout) == {"failed": 2}, result.stdout[-3000:]
    raised = [line for line in result.stdout.splitlines() if line.startswith("E ")]  # not the summary, cut or not
    wanted = (
        "Optimizer.step#SGD.step: no range of that name ran in the measured code; closest: Optimizer.step#Adam.step"
    )
    assert sum(wanted in line for line in raised) == 2, result.stdout[-3000:]


def test_the_ci_workflows_use_only_flags_that_exist():
    """The CI recipes use only flags the plugin has, run pytest --opprof and upload the reports."""
    from pytest_opprof.settings import OPTIONS

    known = {o.flag for o in OPTIONS}
    for workflow in (EXAMPLES / "06_ci" / "workflows").glob("*.yml"):
        text = workflow.read_text()
        used = set(re.findall(r"(--opprof[a-z-]*)", text))
        assert used and used <= known, (workflow.name, used - known)
        assert "upload-artifact" in text and "pytest --opprof" in text


def test_a_workflow_uploading_the_baseline_folder_includes_hidden_files():
    """actions/upload-artifact 4.4+ leaves out dot folders by default: the record workflow's
    artifact held no `.opprof/` (a newcomer trial's finding)."""
    for workflow in (EXAMPLES / "06_ci" / "workflows").glob("*.yml"):
        for step in workflow.read_text().split("- name:"):
            if "upload-artifact" in step and ".opprof/" in step:
                assert "include-hidden-files: true" in step, workflow.name
                assert "if-no-files-found: error" in step, workflow.name
    assert ".opprof/" in (EXAMPLES / "06_ci" / "workflows" / "opprof-record.yml").read_text()


def test_the_gpu_workflow_states_the_torch_range_the_package_declares():
    """The GPU recipe keeps the runner's CUDA torch only within the declared range: it says which."""
    declared = re.search(r'"(torch[^"]+)"', (ROOT / "pyproject.toml").read_text()).group(1)
    assert f"({declared})" in (EXAMPLES / "06_ci" / "workflows" / "opprof-gpu.yml").read_text()


def test_ci_pins_the_torch_the_example_baselines_were_recorded_with():
    """The comparison above skips under another torch; CI must never be that case."""
    pinned = re.search(r"torch==([\d.]+)", (ROOT / ".ci" / "run").read_text())
    assert pinned is not None
    assert {release(v) for v in baselines_torch()} == {pinned.group(1)}
