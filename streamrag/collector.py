"""Fewer garbage collections while a sync or an ask runs.

A sync makes millions of objects that live (mentions, tokens, the graph), few of them in cycles:
at Python's default thresholds the collector ran 4,700 times in an offline index of 3,000
documents and took 3 s of its 32 s, most of it in full collections as the heap grew. A local ask
reads every edge of the graph for PageRank: 720 collections in an ask of an index of 10,000
documents (200,000 edges), 0.06 s of it, and 0.11-0.15 s beside a daemon's or a bench's graph
kept in memory. While a sync (``index``, each of a daemon's syncs and extractions ahead of
them) or an ask runs, the collector runs about once per 50,000 new objects instead (for that
index of 3,000 documents: 0.7 s, 22 collections); the thresholds are put back once none runs.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

_THRESHOLDS = (50_000, 20, 10)
_running = 0
_saved: tuple[int, ...] = ()


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """The collector's thresholds raised while this runs (nested and overlapping runs share it)."""
    global _running, _saved
    if _running == 0:
        _saved = gc.get_threshold()
        gc.set_threshold(*_THRESHOLDS)
    _running += 1
    try:
        yield
    finally:
        _running -= 1
        if _running == 0:
            gc.set_threshold(*_saved)
