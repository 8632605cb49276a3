"""Render the demo's document collection: the Python standard library's own documentation, by pydoc.

Every page is pydoc's HTML for one module of this Python (the docstrings its maintainers wrote), so the demo
researches real documents that every machine with Python has; nothing here is written for the demo. Then index
them: `python manage.py index_documents var/demo-collection --replace`.

Usage: python scripts/build_demo_collection.py [FOLDER]   (default: var/demo-collection)
"""

from __future__ import annotations

import importlib
import pydoc
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FOLDER = ROOT / "var" / "demo-collection"

# Concurrency in the standard library: threads, processes, asyncio, and what they are built on and used with.
MODULES = [
    "threading",
    "_thread",
    "queue",
    "concurrent.futures",
    "concurrent.futures._base",
    "concurrent.futures.thread",
    "concurrent.futures.process",
    "multiprocessing",
    "multiprocessing.process",
    "multiprocessing.pool",
    "multiprocessing.queues",
    "multiprocessing.managers",
    "multiprocessing.shared_memory",
    "multiprocessing.synchronize",
    "asyncio.runners",
    "asyncio.tasks",
    "asyncio.events",
    "asyncio.base_events",
    "asyncio.futures",
    "asyncio.locks",
    "asyncio.queues",
    "asyncio.taskgroups",
    "asyncio.threads",
    "asyncio.subprocess",
    "subprocess",
    "sched",
    "selectors",
    "contextvars",
]

# A request these documents can answer: the demo's default prompt (scripts/demo.py) and its test's.
DEMO_PROMPT = (
    "How should a Python program run work concurrently: threads, processes or asyncio, and what do the standard "
    "library docs say about how each one starts, shares data, waits for results and handles errors?"
)
# A question the demo asks of its research once the report is written (scripts/demo.py): answered offline from the
# sentences of the pages it analysed.
DEMO_QUESTION = "How do threads wait for a condition?"


def render(name: str) -> str:
    """pydoc's HTML page for a module, exactly as `python -m pydoc -w NAME` writes it."""
    module = importlib.import_module(name)
    return pydoc.html.page(pydoc.describe(module), pydoc.html.document(module, name))


def build(folder: Path, modules: list[str] = MODULES) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name in modules:
        try:
            page = render(name)
        except ImportError as exc:  # a Python built without a module (e.g. no _multiprocessing): skip it
            print(f"skipped {name}: {exc}", file=sys.stderr)
            continue
        path = folder / f"{name}.html"
        path.write_text(page, encoding="utf-8")
        written.append(path)
    return written


def main() -> None:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_FOLDER
    written = build(folder)
    size = sum(path.stat().st_size for path in written)
    print(f"wrote {len(written)} pydoc pages ({size // 1024} KiB) to {folder}")


if __name__ == "__main__":
    main()
