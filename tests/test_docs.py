"""The public API documents itself: every name in pytest_opprof.__all__, every public method and
property of its classes and of the records a Profile holds, and the fixture's methods."""

from __future__ import annotations

import inspect
import os
import re
from pathlib import Path

import pytest

import pytest_opprof
from pytest_opprof import analysis
from pytest_opprof.fixture import OpprofFixture

RECORDS = [
    getattr(analysis.model, name) for name in dir(analysis.model) if inspect.isclass(getattr(analysis.model, name))
]


def public_members(cls: type) -> list[tuple[str, object]]:
    return [
        (name, member)
        for name, member in vars(cls).items()
        if not name.startswith("_") and (inspect.isfunction(member) or isinstance(member, (property, classmethod)))
    ]


def undocumented() -> list[str]:
    missing = []
    objects = [getattr(pytest_opprof, name) for name in pytest_opprof.__all__ if name != "__version__"]
    classes = {
        o
        for o in [*objects, *RECORDS, OpprofFixture]
        if inspect.isclass(o) and o.__module__.startswith("pytest_opprof")
    }
    for obj in objects:
        if (inspect.isfunction(obj) or inspect.isclass(obj)) and not inspect.getdoc(obj):
            missing.append(obj.__qualname__)
    for cls in sorted(classes, key=lambda c: c.__qualname__):
        if not cls.__doc__:
            missing.append(cls.__qualname__)
        for name, member in public_members(cls):
            target = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
            if not inspect.getdoc(target):
                missing.append(f"{cls.__qualname__}.{name}")
    return missing


def test_the_public_api_has_docstrings():
    """No public name, method or property of the API lacks a docstring."""
    assert undocumented() == []


def test_the_readmes_own_project_example_runs_as_it_says(pytester, fake_clock):
    """The README's self-contained test for one's own project (pyproject at the root), run as
    the README says: --opprof passes and says there is no baseline, then
    --opprof-update-baseline writes the file the README names (under this machine's key)."""
    import re
    from pathlib import Path

    pytest.importorskip("torch")
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    section = readme.split("**In your own project**", 1)[1]
    (code,) = re.findall(r"```python\n(.*?)```", section.split("\n## ", 1)[0], flags=re.S)
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    (pytester.path / "tests").mkdir()
    (pytester.path / "tests" / "test_model.py").write_text(code)
    first = pytester.runpytest("-p", "no:cacheprovider", "--opprof")
    first.assert_outcomes(passed=1)
    first.stdout.fnmatch_lines(
        [
            "opprof: no baseline for 1 test (tests/test_model.py::test_model_budget) in .opprof/cpu-* (no such folder); record it: pytest --opprof-update-baseline tests/test_model.py::test_model_budget"
        ]
    )
    pytester.runpytest("-p", "no:cacheprovider", "--opprof-update-baseline").assert_outcomes(passed=1)
    (written,) = (pytester.path / ".opprof").rglob("*.json")
    assert written.relative_to(pytester.path / ".opprof").parts[1:] == (
        "tests",
        "test_model.py",
        "test_model_budget.json",
    )
    assert "`.opprof/cpu-x86_64/tests/test_model.py/test_model_budget.json`" in section


ROOT = Path(__file__).resolve().parents[1]


def _doc(name: str) -> str:
    """A page of the project's docs, by its path from the repository root."""
    return (ROOT / name).read_text(encoding="utf-8")


def _doc_paragraph(name: str, starts: str) -> str:
    text = _doc(name)
    start = text.index(starts)
    return text[start : text.index("\n- **", start + 1)]


def _field_names(doc: dict) -> set[str]:
    """The field names a reader of a baseline file meets, at every level (not the op and kernel
    names that key its tables)."""
    names = set(doc) | set(doc["environment"]) | set(doc["capture"]) | set(doc.get("workload_reference") or {})
    for entry in doc["ops"].values():
        names |= set(entry) | set(entry.get("work") or {})
        for signature in (entry.get("work") or {}).get("signatures", []):
            names |= set(signature)
    for entry in doc["kernels"].values():
        names |= set(entry)
        for share in (entry.get("by_op") or {}).values():
            names |= set(share)
    for entry in doc["memory_ops"].values():
        names |= set(entry)
    return names


def test_the_docs_name_every_field_of_a_baseline_and_of_a_trace_header(tmp_path):
    """A trial found baseline keys the format paragraph (docs/verdicts.md) left out: every field a baseline
    file holds at any level (a live CPU run()'s, with threads, list shapes, work and the workload
    reference; a device trace's kernels launched by two ops, and copies), and every key of an
    exported trace's `opprof` header, is named there in backticks."""
    import gzip
    import json

    from builders import kernel, launch, memcpy, op, step

    from pytest_opprof.analysis import analyze
    from pytest_opprof.baseline import baseline_from_profile
    from pytest_opprof.documents import ENVIRONMENT_KEYS

    torch = pytest.importorskip("torch")
    from pytest_opprof import measure

    a, w = torch.randn(64, 128), torch.randn(256, 128)
    live = measure(lambda: torch.cat([a, a]) @ w.t(), warmup=1, steps=3)
    device = analyze(
        [
            step(1, 0, 1000),
            op("aten::mm", 10, 100),
            launch(20, corr=1),
            kernel("gemm", 30, 50, corr=1),
            op("aten::addmm", 200, 100),
            launch(210, corr=2),
            kernel("gemm", 220, 50, corr=2),
            launch(400, corr=3, name="cudaMemcpyAsync"),
            memcpy("Memcpy HtoD", 410, 20, 4096, corr=3),
        ]
    )
    env = dict.fromkeys(ENVIRONMENT_KEYS, "x")
    fmt = _doc_paragraph("docs/verdicts.md", "- **Format (schema 2):**")
    for profile in (live, device):
        names = _field_names(baseline_from_profile(profile, "t.py::t", "cpu-x86_64", env).to_dict())
        assert sorted(name for name in names if f"`{name}`" not in fmt) == []
    assert live.workload_reference is not None and live.threads and live.list_shapes  # what the check covered
    trace = tmp_path / "t.json.gz"
    live.export_chrome_trace(trace, "cpu-x86_64")
    header = json.loads(gzip.decompress(trace.read_bytes()))
    described = _doc_paragraph("docs/reports.md", "- `--opprof-trace-dir DIR`:")
    keys = ["schemaVersion", *header["opprof"], *(header["opprof"]["workload_reference"] or {})]
    assert sorted(key for key in keys if f"`{key}`" not in described) == []


def test_ci_runs_the_readmes_test_command():
    """`.ci/run` runs exactly the test command the README's "The two commands" gives."""
    root = Path(__file__).resolve().parent.parent
    readme = re.search(
        r"^(python -m pytest[^#\n]*?)\s*# the project's own tests", (root / "README.md").read_text(), re.M
    )
    ci = [line for line in (root / ".ci" / "run").read_text().splitlines() if line.startswith("python -m pytest")]
    assert readme is not None and ci == [readme.group(1)]


def _json_keys(value, found: set[str]) -> set[str]:
    """Every key of a JSON value at any level."""
    if isinstance(value, dict):
        found |= set(value)
        for item in value.values():
            _json_keys(item, found)
    elif isinstance(value, list):
        for item in value:
            _json_keys(item, found)
    return found


def test_the_json_block_of_the_cli_docs_names_every_key_of_a_profiles_json_and_no_other():
    """A mutation trial renamed keys of `Profile.to_dict()`, which `opprof analyze --json` and the
    JSON report print (a compiled region's `eager`, an eager op's `cpu_ms`, a launch-bound op's
    `launch_ms`, a graph launch's `calls`), and no test noticed: every key the profiles below
    write, at any level, is in the JSON block of docs/cli.md or named in backticks under it, and every
    key the block names is one of theirs (a device trace with a launch-bound op, copies, NCCL and
    a range; a CUDA graph replay; a compiled capture with a graph break; one compiling in its
    steps; a live CPU `measure()`, with inputs and the machine references)."""
    from builders import annotation, kernel, launch, op, step
    from test_compiled import compilation_in_step_1, graph_break_step
    from test_timeline import two_steps

    from pytest_opprof.analysis import analyze

    torch = pytest.importorskip("torch")
    from pytest_opprof import measure

    replay = []
    for n, t0 in ((1, 0), (2, 200)):
        replay += [
            step(n, t0, 100),
            op("CUDAGraph.replay", t0 + 1, 20),
            launch(t0 + 2, corr=n, name="cudaGraphLaunch", dur_us=5),
            kernel("k_a", t0 + 30, 3, corr=n),
        ]
    traces = [
        two_steps() + [annotation("encoder", 1, 60), annotation("encoder", 101, 60)],
        replay,
        graph_break_step(1, 0) + graph_break_step(2, 300),
        compilation_in_step_1(),
    ]
    a, w = torch.randn(64, 128), torch.randn(256, 128)
    profiles = [analyze(events) for events in traces] + [measure(lambda: torch.cat([a, a]) @ w.t(), warmup=1, steps=3)]
    keys = {"schema"}  # `opprof analyze --json` puts it first
    for profile in profiles:
        keys = _json_keys(profile.to_dict(), keys)
    text = _doc("docs/cli.md")
    section = text[text.index("### JSON (`schema: 1`)") : text.index("## `opprof show`")]
    block = section.split("```")[1]
    named = set(re.findall(r'"(\w+)"', block))
    assert sorted(keys - named - set(re.findall(r"`(\w+)`", section))) == []
    assert sorted(named - keys) == []


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but `-` and `_` dropped, spaces to `-`."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(text: str) -> set[str]:
    """The anchors of a page's headings; a repeated heading gets `-1`, `-2`... as on GitHub."""
    anchors: set[str] = set()
    for line in _outside_code(text).splitlines():
        if match := re.match(r"#{1,6} (.+)", line):
            slug = _slug(match[1])
            count = sum(1 for a in anchors if a == slug or re.fullmatch(re.escape(slug) + r"-\d+", a))
            anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def _outside_code(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


DOC_PAGES = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]


def test_every_link_between_the_docs_pages_reaches_its_file_and_heading():
    """The README was split into docs/ pages that link each other by heading: a link to a file
    that is not there, or to a heading that was renamed, fails (GitHub's anchors)."""
    broken = []
    for page in [*DOC_PAGES, *(str(p.relative_to(ROOT)) for p in (ROOT / "conftest_examples").rglob("README.md"))]:
        for target in re.findall(r"\]\(([^)\s]+)\)", _outside_code(_doc(page))):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            file = (ROOT / page).parent / path if path else ROOT / page
            if not file.exists():
                broken.append(f"{page}: {target} (no such file)")
            elif anchor and anchor not in _anchors(file.read_text(encoding="utf-8")):
                broken.append(f"{page}: {target} (no such heading)")
    assert broken == []


def test_the_readme_links_every_docs_page_and_stays_a_readable_length():
    """The README is the path from install to a CI gate, the reference is in docs/ (the README had
    grown to 235,000 characters): every docs page is linked from it, and it stays under 60,000."""
    readme = _doc("README.md")
    assert [page for page in DOC_PAGES[1:] if f"]({page})" not in readme] == []
    assert len(readme) < 60_000


def test_the_packages_public_names_are_the_ones_it_imports_lazily():
    """`__all__` (what `from pytest_opprof import *` and the docs read) and the table of names the
    package imports when first used say the same names, each resolving to its object."""
    from pytest_opprof import _PUBLIC

    assert sorted(pytest_opprof.__all__) == sorted([*_PUBLIC, "__version__"])
    assert dir(pytest_opprof) == sorted(pytest_opprof.__all__)
    assert all(getattr(pytest_opprof, name) is not None for name in _PUBLIC)


def test_each_public_name_is_its_function_whichever_module_was_imported_first():
    """The package imports its public names when first used (a plain pytest run imports none):
    `pytest_opprof.capture` stays the function after its submodule of that name is imported (a
    review's `from pytest_opprof import capture` gave the module once the plugin had measured)."""
    import subprocess
    import sys

    code = (
        "import types, pytest_opprof.capture, pytest_opprof.trace, pytest_opprof.analysis\n"
        "import pytest_opprof\n"
        "from pytest_opprof import capture\n"
        "assert callable(capture) and not isinstance(capture, types.ModuleType), capture\n"
        "bad = [n for n in pytest_opprof.__all__ if isinstance(getattr(pytest_opprof, n), types.ModuleType)]\n"
        "assert bad == [], bad\n"
        "assert pytest_opprof.capture.__module__ == 'pytest_opprof.capture'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_type_checker_still_refuses_a_mistyped_public_name(tmp_path):
    """The package's lazy `__getattr__` is hidden from type checkers, so mypy reads the names it
    really has: `from pytest_opprof import mesure` stays an error naming `measure` (a review's
    first version typed every attribute `Any` and let it pass), and `measure` keeps its type."""
    pytest.importorskip("mypy")
    import subprocess
    import sys

    user = tmp_path / "user.py"
    user.write_text("from pytest_opprof import measure, mesure\nreveal_type(measure)\n")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--follow-imports=silent", str(user)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "MYPYPATH": str(ROOT)},  # an editable install is an import hook mypy does not follow
    )
    assert 'Module "pytest_opprof" has no attribute "mesure"; maybe "measure"?' in done.stdout, done.stdout
    assert "-> pytest_opprof.analysis.model.Profile" in done.stdout  # measure's type, not Any


def _assertion_methods() -> list[str]:
    return sorted(name for name in vars(OpprofFixture) if name.startswith("assert_"))


def test_every_assertion_is_in_both_tables_and_the_fixtures_help_and_no_other():
    """The fixture's assertions are listed by hand in the README's table, docs/fixture.md's and
    the `opprof` fixture's help (`pytest --fixtures`), which had left out assert_range_below (a
    contributor's trial): each lists every `assert_*` method, and names no method there is not."""
    from pytest_opprof import plugin

    help_text = inspect.getdoc(plugin.opprof) or ""
    for where, text in [
        ("README.md", _doc("README.md")),
        ("docs/fixture.md", _doc("docs/fixture.md")),
        ("the fixture's help", help_text),
    ]:
        table = text if where == "the fixture's help" else "\n".join(re.findall(r"^\| `(assert_\w+)", text, re.M))
        named = set(re.findall(r"\b(assert_\w+)", table))
        assert (where, sorted(set(_assertion_methods()) - named)) == (where, [])
        assert (where, sorted(named - set(_assertion_methods()))) == (where, [])


def test_every_public_fixture_method_checks_its_arguments_first():
    """Each assertion and capture method is wrapped by `_arguments_checked`, so a wrong keyword
    is one line naming it and what the method takes, not Python's TypeError: a method added
    without it would lose that, and nothing else would notice."""
    public = [name for name, member in vars(OpprofFixture).items() if inspect.isfunction(member)]
    public = [name for name in public if name.startswith("assert_") or name in ("run", "capture")]
    assert [name for name in public if not hasattr(vars(OpprofFixture)[name], "__wrapped__")] == []
    assert len(public) == len(_assertion_methods()) + 2


def test_every_op_assertion_refuses_a_mistyped_op_name_in_a_plain_run():
    """Without --opprof an op assertion still refuses an op name torch does not know, so a typo
    shows on the first plain run: each method that takes an `op` does (a method added without
    the plain run's name check would pass the typo until someone measured)."""
    pytest.importorskip("torch")
    from pytest_opprof.errors import OpprofUsageError

    plain = OpprofFixture("t.py::t", False, None, pytest.fail)
    values = {"ms": 1.0, "n": 1, "pct": 50.0}
    takes_op = [n for n in _assertion_methods() if "op" in inspect.signature(getattr(OpprofFixture, n)).parameters]
    assert len(takes_op) >= 3
    for name in takes_op:
        params = inspect.signature(getattr(OpprofFixture, name)).parameters
        args = {p: values[p] for p in params if p in values}
        with pytest.raises(OpprofUsageError, match="adddmm"):
            getattr(plain, name)("aten::adddmm", **args)


def checks_the_code_builds() -> set[str]:
    """The name of every Check the package builds with a name it spells out (a text, or a module's
    constant); names a caller passes in (`stepped_aside`, `unmeasured`) are not found here."""
    import ast

    package = Path(pytest_opprof.__file__).parent
    found = set()
    for path in package.rglob("*.py"):
        module = ".".join(path.relative_to(package.parent).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Check" and node.args:
                first = node.args[0]  # a name, or one of two (`THREADS if ... else SETTINGS`)
                for named in (first.body, first.orelse) if isinstance(first, ast.IfExp) else (first,):
                    found |= _spelled_out(named, module, path)
    return found


def _spelled_out(node: object, module: str, path: Path) -> set[str]:
    """A check's name as a text, or as a constant of its module or of one it imports in the hook."""
    import ast
    import importlib

    if isinstance(node, ast.Constant):
        return {node.value}
    if not isinstance(node, ast.Name):
        return set()
    value = getattr(importlib.import_module(module), node.id, None)
    if isinstance(value, str):
        return {value}
    for imported in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):  # `from ..runlines import THREADS`
        if isinstance(imported, ast.ImportFrom) and any(a.name == node.id for a in imported.names):
            package = module if path.name == "__init__.py" else module.rpartition(".")[0]
            source = importlib.import_module(("." * imported.level) + (imported.module or ""), package)
            if isinstance(getattr(source, node.id, None), str):
                return {getattr(source, node.id)}
    return set()


def test_the_trust_check_table_names_every_check_the_code_builds():
    """docs/devices.md's trust-check table has a row for each check a profile or a test can carry
    (a docs audit found `compiled_kernels`, which the fixture's docs point to, missing from it)."""
    table = set(re.findall(r"^\| `([a-z_]+)` \|", (ROOT / "docs" / "devices.md").read_text(), re.M))
    built = checks_the_code_builds()
    assert {
        "events",
        "spread",
        "compiled_kernels",
        "mps_untraced",
        "threads",
        "settings",
    } <= built  # the scan reads them
    assert sorted(built - table) == []
