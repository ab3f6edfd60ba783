"""docs/architecture.md stays a true map: its module tables list every module of the package as it is."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _module_index() -> ModuleType:
    spec = importlib.util.spec_from_file_location("module_index", ROOT / "tools" / "module_index.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_module_tables_are_up_to_date() -> None:
    index = _module_index()
    document = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert index.with_tables(document) == document, "run `python tools/module_index.py` and commit"


def test_every_module_of_the_package_is_listed() -> None:
    document = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    for module in (ROOT / "rewards_lab").rglob("*.py"):
        if module.name != "__init__.py":
            relative = module.parent.relative_to(ROOT / "rewards_lab").as_posix()
            package = "rewards_lab" if relative == "." else relative
            assert f"#### `{package}/`" in document and f"| `{module.name}` |" in document, module
