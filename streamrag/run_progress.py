"""The counters a run's stages bump (``Progress``), apart from the pipeline that makes them, so
a stage, the daemon and the display can name them without importing it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable


class Progress:
    """Counters the stages bump; a display (``progress.py``) reads them. No I/O here."""

    def __init__(self) -> None:
        self.stage = "scanning"
        # Set by a run whose scan found nothing to redo, before it passes through the later
        # stages at once (a watch still says each): `index` leaves them unsaid, as nothing runs.
        self.nothing_to_redo = False
        self.counts: dict[str, int] = defaultdict(int)
        self.totals: dict[str, int] = defaultdict(int)
        self.listeners: list[Callable[[Progress], None]] = []

    def set_stage(self, stage: str) -> None:
        self.stage = stage
        self.changed()

    def add(self, key: str, n: int = 1) -> None:
        self.counts[key] += n
        self.changed()

    def total(self, key: str, n: int) -> None:
        self.totals[key] = n
        self.changed()

    def changed(self) -> None:
        for listener in self.listeners:
            listener(self)
