"""What the plugin costs a run that does not measure: pytest loads it in every run of a project
that has it installed, `--opprof` or not. Runs `pytest -q` on a one-test project (no torch, no
opprof fixture) with the plugin (`-p opprof`, as installed) and without it (`-p no:opprof`),
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
import sys
def pytest_unconfigure(config):
    found = sorted(m for m in sys.modules if m.startswith("pytest_opprof."))
    print("\\nOPPROF-MODULES", len(found), " ".join(m.split(".", 1)[1] for m in found))
"""


def _project(folder: Path) -> None:
    (folder / "pytest.ini").write_text("[pytest]\n")
    (folder / "test_plain.py").write_text("def test_plain():\n    assert 1 + 1 == 2\n")
    (folder / "conftest.py").write_text(CONFTEST)


def _run(folder: Path, code: Path, plugin: bool) -> tuple[float, str]:
    env = {**os.environ, "PYTHONPATH": str(code)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as a user's run: bytecode cached
    args = [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "-p", "no:xdist"]
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
        best: dict[str, float] = {}
        modules: dict[str, str] = {}
        for _ in range(args.repeat):
            for code in codes:
                for plugin in (True, False):
                    key = f"{code} {'with' if plugin else 'without'}"
                    took, out = _run(folder, code, plugin)
                    best[key] = min(best.get(key, took), took)
                    if plugin:
                        modules[str(code)] = next(
                            line for line in out.splitlines() if line.startswith("OPPROF-MODULES")
                        )
    for code in codes:
        with_ms, without_ms = best[f"{code} with"] * 1000, best[f"{code} without"] * 1000
        print(f"{code}: pytest -q of one test {with_ms:.0f} ms with the plugin, {without_ms:.0f} ms with -p no:opprof:")
        print(f"  the plugin costs {with_ms - without_ms:.0f} ms (x{with_ms / without_ms:.2f}), best of {args.repeat}")
        print(f"  {modules[str(code)].replace('OPPROF-MODULES ', 'modules imported: ')}")


if __name__ == "__main__":
    main()
