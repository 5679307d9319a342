"""Where the shipped prompts, default config and sample corpus live.

In a wheel, the top-level ``prompts/`` and ``config/`` folders are installed inside the package
(``streamrag/prompts``, ``streamrag/config``); in a source checkout or editable install they are
beside the package. Both are looked up here, so an installed ``streamrag`` finds them from any
working directory.
"""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent


def asset_dir(name: str) -> Path:
    """The folder of shipped files called ``name`` (``prompts``, ``config`` or ``data``)."""
    for candidate in (_PKG / name, _PKG.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"streamrag's {name}/ folder is missing; reinstall streamrag")


def asset(name: str, filename: str) -> Path:
    return asset_dir(name) / filename
