"""Make this checkout importable as an installed pytest plugin without building anything.

    python scripts/install_from_source.py            (into this interpreter's site-packages)
    python scripts/install_from_source.py --check    (exit 0 when the plugin is installed from here)

The fallback of scripts/gpu_check.sh when `pip install --no-deps --no-build-isolation -e .`
cannot build (a machine without network whose setuptools lacks `wheel`, say): it writes a
`.pth` line naming this checkout and a minimal dist-info holding the `pytest11` entry point and
the `opprof` console name into the interpreter's site-packages, so `-p no:opprof`, pytester
runs and `python -m pytest_opprof` behave exactly as after a pip install.
"""

from __future__ import annotations

import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NAME = "pytest_opprof"


def version() -> str:
    """The package's one version string (pyproject.toml reads it from there too)."""
    for line in (ROOT / NAME / "__init__.py").read_text(encoding="utf-8").splitlines():
        if line.startswith("__version__ = "):
            return line.split("=", 1)[1].strip().strip('"')
    raise SystemExit(f"install_from_source: no `__version__ = ` line in {NAME}/__init__.py")


def install(site: Path) -> Path:
    """Write the .pth line and the dist-info into `site`; return the dist-info folder."""
    ver = version()
    (site / f"{NAME}_source.pth").write_text(f"{ROOT}\n", encoding="utf-8")
    info = site / f"{NAME}-{ver}.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: pytest-opprof\nVersion: {ver}\n", encoding="utf-8")
    entry_points = "[console_scripts]\nopprof = pytest_opprof.cli:main\n\n[pytest11]\nopprof = pytest_opprof.plugin\n"
    (info / "entry_points.txt").write_text(entry_points, encoding="utf-8")
    (info / "INSTALLER").write_text("install_from_source\n", encoding="utf-8")
    (info / "RECORD").write_text("", encoding="utf-8")
    return info


def installed() -> str | None:
    """None when `pytest11: opprof` loads this checkout's plugin, else why not."""
    from importlib.metadata import entry_points

    found = [e for e in entry_points(group="pytest11") if e.name == "opprof"]
    if not found:
        return "no pytest11 entry point named opprof"
    try:
        module = found[0].load()
    except ImportError as exc:
        return f"the opprof entry point does not import: {exc}"
    package = sys.modules[module.__name__.split(".")[0]]  # pytest_opprof: the plugin is a subpackage of it
    if Path(package.__file__ or "").resolve().parent.parent != ROOT:
        return f"the opprof entry point loads {module.__file__}, not this checkout"
    return None


def main(argv: list[str]) -> int:
    if argv[:1] == ["--check"]:
        why = installed()
        print(f"install_from_source: {why or 'installed from ' + str(ROOT)}")
        return 1 if why else 0
    site = Path(argv[0]) if argv else Path(sysconfig.get_paths()["purelib"])
    print(f"install_from_source: {install(site)} (source {ROOT})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
