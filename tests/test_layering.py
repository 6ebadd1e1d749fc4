"""The package's imports run one way (docs/architecture.md): no cycle, even through an import
inside a function, and no module imports from a layer above its own. Read from the source: no
torch, no pytest internals."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_opprof"

# Lowest first. A module may import from its own layer or the ones below.
LAYERS = [
    {
        "units",
        "errors",
        "opmessages",
        "leakmessages",
        "flops",
        "dtypes",
        "files",
        "events",
        "chrome",
        "tables",
        "hooks",
        "opnames",
        "clock",
        "textout",
        "layout",
        "rules",
        "jsontext",
        "torchstate",
        "owntorch",
    },  # know no Profile
    {
        "analysis",
        "analysis.model",
        "analysis.stages",
        "analysis.checks",
        "analysis.compiled",
        "analysis.timeline",
        "analysis.ranges",
    },  # the model
    {
        "trace",
        "kineto",
        "runargs",
        "threadwatch",
        "references",
        "capture",
        "breaks",
        "device",
        "assertions",
    },  # sources, device facts, checks on a Profile
    {"documents", "baseline", "verdicts", "excuses", "timing", "compare", "sidebyside"},  # documents and verdicts
    {"decide", "settings"},  # the per-test outcome, run settings
    {
        "results",
        "runfiles",
        "renames",
        "report",
        "verdictlines",
        "runlines",
        "structurelines",
        "summarylines",
        "fixture",
        "htmlreport",
        "showtables",
    },  # views of results; the fixture object
    {
        "plugin",
        "plugin.base",
        "plugin.collect",
        "plugin.judge",
        "plugin.run",
        "plugin.summary",
        "plugin.watch",
        "plugin.options",
        "cli",
        "clibase",
        "comparecmd",
        "",
        "__main__",
    },  # the entry points ("" is the package's __init__)
]
LAYER_OF = {module: i for i, layer in enumerate(LAYERS) for module in layer}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


class Imports(ast.NodeVisitor):
    """Our modules a module imports when it runs (`if TYPE_CHECKING:` blocks never run)."""

    def __init__(self, name: str, is_package: bool) -> None:
        self.name, self.is_package, self.found = name, is_package, set()

    def visit_If(self, node: ast.If) -> None:
        if isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if not node.level:
            return
        parts = self.name.split(".") if self.name else []
        base = parts if self.is_package else parts[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
        modules = [m for a in node.names if (m := f"{target}.{a.name}".lstrip(".")) in LAYER_OF]
        self.found.update(modules or [target])


def import_graph() -> dict[str, set[str]]:
    graph = {}
    for path in PACKAGE.rglob("*.py"):
        name = module_name(path)
        visitor = Imports(name, path.name == "__init__.py")
        visitor.visit(ast.parse(path.read_text()))
        graph[name] = {m for m in visitor.found if m != name}
    return graph


def test_every_module_has_a_layer():
    """A new module gets a place in the layers (and in docs/architecture.md)."""
    assert set(import_graph()) == set(LAYER_OF)


def test_imports_go_down_the_layers_only():
    """No module imports from a layer above its own, at module level or inside a function."""
    graph = import_graph()
    upward = sorted(
        f"{m} -> {d}" for m, deps in graph.items() for d in deps if LAYER_OF[d] > LAYER_OF[m] and not d.startswith(m)
    )
    assert upward == []


def test_no_import_cycle():
    """Following the imports from any module never comes back to it."""
    graph = import_graph()

    def cycle_from(start: str) -> list[str] | None:
        stack, seen = [(start, [start])], set()
        while stack:
            module, path = stack.pop()
            for d in graph[module]:
                if d == start:
                    return [*path, d]
                if d not in seen:
                    seen.add(d)
                    stack.append((d, [*path, d]))
        return None

    assert [c for m in graph if (c := cycle_from(m))] == []
