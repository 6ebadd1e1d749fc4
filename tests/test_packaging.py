"""What the distributions hold: a release trial found the sdist without the tests' helpers
(`builders.py`, `conftest.py`...) and examples, so its own tests could not run (29 collection
errors), and the license in a form setuptools stops building in 2027."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ("pytest_opprof/", "tests/", "conftest_examples/", "docs/", "scripts/", "bench/")


def _tracked() -> list[str]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: no list of tracked files to check the sdist against")
    found = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [name for name in found.decode().split("\0") if name]


def test_the_sdist_holds_every_tracked_file_its_tests_and_examples_need(tmp_path):
    """Built from the tracked files alone (setuptools' own backend, as `python -m build` runs it):
    the package, the tests and every helper they import, the examples, docs, scripts, benchmarks,
    changelog and CI script; no bytecode."""
    pytest.importorskip("setuptools", minversion="77")
    tracked = _tracked()
    source = tmp_path / "src"
    for name in tracked:
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    build = "import sys; from setuptools import build_meta; print(build_meta.build_sdist(sys.argv[1]))"
    done = subprocess.run(
        [sys.executable, "-c", build, str(tmp_path / "dist")], cwd=source, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "deprecated" not in done.stderr.lower(), done.stderr[-2000:]
    name = done.stdout.strip().splitlines()[-1]
    with tarfile.open(tmp_path / "dist" / name) as sdist:
        held = {member.split("/", 1)[1] for member in sdist.getnames() if "/" in member}
    wanted = {n for n in tracked if n.startswith(SHIPPED) or n in ("CHANGELOG.md", ".ci/run", "LICENSE", "README.md")}
    assert sorted(wanted - held) == []
    assert [n for n in held if "__pycache__" in n or n.endswith(".pyc")] == []
    assert {"tests/builders.py", "tests/conftest.py", "conftest_examples/conftest.py"} <= held
