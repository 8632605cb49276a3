"""Docs that drift fail CI: every file path, app name and model field the docs mention exists, and docs/schema.md
lists every model with the fields it has."""

import importlib
import re
from pathlib import Path

import pytest
from django.apps import apps

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TOP = ("research", "researchsite", "workers", "tests", "bench", "scripts", "devtools", "templates", "deploy", "docs")


def mentions(pattern: str) -> list[tuple[str, str]]:
    found = []
    for doc in DOCS:
        for match in re.finditer(pattern, doc.read_text()):
            found.append((doc.name, match.group(1)))
    return found


def test_every_path_the_docs_mention_exists() -> None:
    tops = "|".join(TOP)
    paths = mentions(rf"`((?:{tops})/[\w./-]*\w)(?:::\w+)?`")
    assert len(paths) > 50
    missing = sorted({f"{doc}: {path}" for doc, path in paths if "*" not in path and not (ROOT / path).exists()})
    assert missing == []


def resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(target, name):
                return False
            target = getattr(target, name)
        return True
    return False


def names_a_module(dotted: str) -> bool:
    """`research.collection.documents.fetch_link` names a module; `research.last_event_seq` is a field of the API's
    JSON."""
    parts = dotted.split(".")
    return (ROOT / parts[0] / f"{parts[1]}.py").exists() or (ROOT / parts[0] / parts[1]).is_dir()


def test_every_app_name_the_docs_mention_exists() -> None:
    names = [(doc, name) for doc, name in mentions(r"`((?:research|workers|researchsite)\.[\w.]+?)(?:\(\))?`")]
    names = [(doc, name) for doc, name in names if names_a_module(name)]
    assert len(names) > 5
    assert sorted({f"{doc}: {name}" for doc, name in names if not resolves(name)}) == []


def schema_rows() -> dict[str, str]:
    text = (ROOT / "docs/schema.md").read_text()
    return dict(re.findall(r"^\| `(\w+)` \|[^|]*\|([^\n]*)$", text, re.M))


SUMMARISED = {
    # Fields a schema row names together rather than one by one.
    "timestamps": {"created_at", "updated_at"},
}


@pytest.mark.parametrize("model", list(apps.get_app_config("research").get_models()), ids=lambda model: model.__name__)
def test_schema_md_lists_the_model_and_its_fields(model) -> None:
    rows = schema_rows()
    assert model.__name__ in rows, f"docs/schema.md has no row for {model.__name__}"
    row = rows[model.__name__]
    named = set(re.findall(r"`(\w+)`", row))
    for phrase, fields in SUMMARISED.items():
        if phrase in row:
            named |= fields
    fields = {field.name for field in model._meta.concrete_fields}
    assert sorted(fields - named - {"id"}) == [], f"{model.__name__}: fields missing from docs/schema.md"
