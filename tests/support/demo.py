"""`make demo`'s script (scripts/demo.py) loaded as a module, to test its functions without running it."""

import importlib.util
from types import ModuleType

from devtools.processes import ROOT


def load_demo_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("demo_script", ROOT / "scripts" / "demo.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
