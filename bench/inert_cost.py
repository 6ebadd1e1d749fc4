"""What the plugin costs a run that does not measure: pytest loads it in every run of a project
that has it installed, `--opprof` or not. Runs `pytest -q` on a one-test project (no torch, no
opprof fixture) with the plugin (its installed entry point) and without it (`-p no:opprof`),
interleaved, and prints the best of each and their difference; `--code DIR` adds another version
of pytest_opprof (a folder holding its `pytest_opprof/`) in the same run, e.g. a checkout of an
older commit. Also prints which of the package's modules the plain run imported.

    python bench/inert_cost.py [--repeat 9] [--code /tmp/old]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFTEST = """
import atexit, sys
def _modules():  # at the process's end: after every hook and cleanup
    found = sorted(m for m in sys.modules if m.startswith("pytest_opprof."))
    print("\\nOPPROF-MODULES", len(found), " ".join(m.split(".", 1)[1] for m in found))
atexit.register(_modules)
"""


def _project(folder: Path) -> None:
    (folder / "pytest.ini").write_text("[pytest]\n")
    (folder / "test_plain.py").write_text("def test_plain():\n    assert 1 + 1 == 2\n")
    (folder / "conftest.py").write_text(CONFTEST)


def _run(folder: Path, code: Path, plugin: bool) -> tuple[float, str]:
    env = {**os.environ, "PYTHONPATH": str(code)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as a user's run: bytecode cached
    args = [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "-p", "no:xdist", "-p", "no:randomly"]
    args += [] if plugin else ["-p", "no:opprof"]
    start = time.perf_counter()
    done = subprocess.run(args, cwd=folder, env=env, capture_output=True, text=True, check=True)
    return time.perf_counter() - start, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--code", type=Path, action="append", default=[], help="another pytest_opprof's folder")
    args = parser.parse_args()
    codes = [ROOT, *args.code]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _project(folder)
        for code in codes:  # once each, unmeasured: bytecode written
            _run(folder, code, True)
        without = float("inf")  # the same work for every code: measured once, beside each
        best: dict[Path, float] = {}
        modules: dict[Path, str] = {}
        for _ in range(args.repeat):
            without = min(without, _run(folder, ROOT, False)[0])
            for code in codes:
                took, out = _run(folder, code, True)
                best[code] = min(best.get(code, took), took)
                modules[code] = next(line for line in out.splitlines() if line.startswith("OPPROF-MODULES"))
    print(f"pytest -q of one test with -p no:opprof: {without * 1000:.0f} ms, best of {args.repeat}")
    for code in codes:
        if " plugin" not in modules[code]:  # pytest found no opprof plugin to load from there
            raise SystemExit(f"{code}: the run loaded no pytest_opprof.plugin; install the package (pip install -e .)")
        with_ms, without_ms = best[code] * 1000, without * 1000
        print(
            f"{code}: {with_ms:.0f} ms with the plugin: it costs {with_ms - without_ms:.0f} ms (x{with_ms / without_ms:.2f})"
        )
        print(f"  {modules[code].replace('OPPROF-MODULES ', 'modules imported: ')}")


if __name__ == "__main__":
    main()
