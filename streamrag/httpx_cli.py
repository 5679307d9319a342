"""httpx without its command-line client, until that is used.

``import httpx`` imports ``httpx._main``, httpx's own command-line client, and with it click,
rich and pygments whenever click is installed (80-90 ms, half of httpx's import; encode/httpx
#3547), paid by every command that calls a model though streamrag never runs that client.
``defer()``, called before httpx is first imported (the package's ``__init__``), stands a small
module in for ``httpx._main``: its ``main`` imports the real client when called, and any other
name of it is looked up there too, so ``httpx.main`` still works. An httpx imported already is
left as it is, and so is one whose client cannot load (click is not a dependency of httpx or of
streamrag): httpx then stands in its own ``main``, which says to install ``httpx[cli]``, where
the stand-in would raise ModuleNotFoundError, even from ``hasattr``.
"""

from __future__ import annotations

import importlib.util
import sys
import types

NAME = "httpx._main"
CLIENT_NEEDS = ("click", "pygments", "rich")   # (what ``httpx/_main.py`` imports)


def defer() -> None:
    """Stands a lazy module in for ``httpx._main`` unless httpx is imported already."""
    if "httpx" in sys.modules or NAME in sys.modules:
        return
    if not all(importlib.util.find_spec(name) for name in CLIENT_NEEDS):
        return   # (its import fails at once, and httpx's own ``main`` says what to install)
    stand_in = types.ModuleType(NAME, "httpx's command-line client, imported when first used")

    def real() -> types.ModuleType:
        import importlib

        if sys.modules.get(NAME) is stand_in:
            del sys.modules[NAME]
        return importlib.import_module(NAME)

    def main(*args, **kwargs):
        return real().main(*args, **kwargs)

    def other(name: str):   # (any other name, PEP 562; not those the import system looks for)
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(real(), name)

    stand_in.main = main   # (what ``httpx/__init__`` imports of it)
    stand_in.__getattr__ = other
    sys.modules[NAME] = stand_in
