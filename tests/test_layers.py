"""Imports go one way: text ← config ← core ← clients ← agents ← pipeline ← tasks ← web.

A module may import modules of its own layer and of the layers before it, never of a later one, and no modules
import each other in a cycle. Imports inside functions count too: deferring an import hides a cycle, it does not
remove it.
"""

import ast
from pathlib import Path

import pytest

from tests.support.source import parse as source_tree

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("research", "researchsite", "workers")

# Lowest first. A module belongs to the layer of the longest prefix that names it.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("text", ("research.text",)),
    ("config", ("researchsite",)),
    ("core", ("research",)),
    ("clients", ("workers.errors", "workers.clients")),
    ("agents", ("workers.agents",)),
    ("pipeline", ("workers.pipeline",)),
    ("tasks", ("workers", "workers.tasks")),
    ("web", ("research.web", "research.admin", "research.management", "researchsite.urls", "researchsite.asgi")),
]
RANK = {name: rank for rank, (name, _) in enumerate(LAYERS)}


def layer_of(module: str) -> str | None:
    """The layer of an app module; None for anything outside the app (Django, the standard library, ...)."""
    best, best_length = None, -1
    for name, prefixes in LAYERS:
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_length:
                best, best_length = name, len(prefix)
    return best


def imported_modules(source: str) -> list[tuple[int, str]]:
    """(line, module) of every import in the source, the names of `from x import y` included as `x.y`."""
    found = []
    for node in ast.walk(source_tree(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def violations(sources: dict[str, str]) -> list[str]:
    """Imports that point to a later layer, as 'module:line imports target (layer → layer)'."""
    wrong = []
    for module, source in sorted(sources.items()):
        own = layer_of(module)
        for line, target in imported_modules(source):
            other = layer_of(target)
            if own is None or other is None or RANK[other] <= RANK[own]:
                continue
            # `from workers import tasks` names workers (the tasks layer) and workers.tasks: report it once.
            wrong.append(f"{module}:{line} imports {target} ({own} → {other})")
    return sorted(set(wrong))


def app_sources() -> dict[str, str]:
    sources = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            parts = path.relative_to(ROOT).with_suffix("").parts
            module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            sources[module] = path.read_text()
    return sources


def test_layers_imports_go_one_way() -> None:
    assert violations(app_sources()) == []


def test_layers_every_app_module_has_a_layer() -> None:
    assert [module for module in app_sources() if layer_of(module) is None] == []


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("research.live.snapshot", "from workers.tasks import run_query_task"),
        ("workers.pipeline.scrape", "def f():\n    from workers import tasks\n"),
        ("research.text.quotes", "import research.models"),
        ("workers.clients.fetch", "from workers.pipeline.progress import website_finished"),
        ("research.control.services", "from research.web.api import start"),
        ("researchsite.settings", "from research.models import Research"),
    ],
)
def test_layers_check_catches_a_wrong_import(module: str, source: str) -> None:
    assert len(violations({module: source})) >= 1


def test_layers_check_allows_imports_down_and_sideways() -> None:
    sources = {
        "research.web.api": "from research import services\nfrom workers.pipeline.followups import generate_followups",
        "workers.pipeline.scrape": "from research import dispatch\nfrom workers.pipeline import progress",
        "research.collection.documents": "from research.text.lexical import BM25",
    }
    assert violations(sources) == []


def test_layers_no_test_module_imports_another_test_module() -> None:
    wrong = []
    for path in (ROOT / "tests").rglob("*.py"):
        for line, target in imported_modules(path.read_text()):
            last = target.split(".")[-1]
            if target.startswith("tests.") and (last.startswith("test_") or last == "conftest"):
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert wrong == []


def cycles(sources: dict[str, str]) -> list[list[str]]:
    """The app modules that import one another in a cycle (imports inside functions included), each cycle's
    modules sorted: the strongly connected components of the import graph with more than one module."""
    graph = {
        module: {t for _, t in imported_modules(source) if t in sources and t != module}
        for module, source in sources.items()
    }
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for target in graph[module]:
            if target not in order:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], order[target])
        if low[module] == order[module]:
            component = stack[stack.index(module) :]
            del stack[stack.index(module) :]
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return sorted(found)


def test_layers_no_modules_import_each_other() -> None:
    # Within a layer imports may go sideways, but never round: the agents' shared values live in
    # workers/agents/types.py so that the extractive engine and the LLM agents need not import each other.
    assert cycles(app_sources()) == []


def test_layers_cycle_check_catches_a_deferred_cycle() -> None:
    sources = {
        "workers.agents.evaluator": "def f():\n    from workers.agents import extractive\n",
        "workers.agents.extractive": "from workers.agents.evaluator import Learning",
        "workers.agents.types": "",
    }
    assert cycles(sources) == [["workers.agents.evaluator", "workers.agents.extractive"]]


def test_the_source_parser_tries_again_after_the_interpreters_race(monkeypatch: pytest.MonkeyPatch) -> None:
    real_parse, failures = ast.parse, ["AST constructor recursion depth mismatch (before=123, after=56)"]

    def racing(source: str) -> ast.Module:
        if failures:
            raise SystemError(failures.pop())
        return real_parse(source)

    monkeypatch.setattr(ast, "parse", racing)
    assert [type(node).__name__ for node in source_tree("import os\n").body] == ["Import"]
    assert failures == []


def test_the_source_parser_lets_other_errors_through(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(source: str) -> ast.Module:
        raise SystemError("something else")

    monkeypatch.setattr(ast, "parse", broken)
    with pytest.raises(SystemError, match="something else"):
        source_tree("import os\n")
