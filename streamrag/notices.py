"""The model clients' retry and wait lines: at most one of each kind per endpoint every
``NOTICE_EVERY_S``, the rest debug lines (-v). A flaky endpoint printed a warning per retry,
fifty for one small run. The lines are the client's: they are said under its logger's name
(``streamrag.llm``), as before they moved here.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import math
import time
from collections.abc import Iterator

log = logging.getLogger("streamrag.llm")

# Retry and wait lines: at most one of each kind this often; the rest are debug lines (-v).
NOTICE_EVERY_S = 30.0


class Notices:
    """When a retry or wait line was last said, per endpoint and kind, and how many were held back
    since. A client keeps its own, unless it is made inside ``sharing_notices``: ``watch`` makes a
    client per sync, and with one each, the limit began again at every retry of an outage (a
    line per retry). ``held``: another says it meanwhile (``watch``'s outage lines), so each is a
    debug line until it is cleared. ``failed_at``: when the first retry line came since it was
    last cleared (wall clock), the time a call first failed (``watch``'s outage "since")."""

    def __init__(self) -> None:
        self._last: dict[tuple[str, str], tuple[float, int]] = {}  # -> (last said, held back since)
        self.held = False
        self.failed_at: float | None = None

    def say(self, endpoint: str, kind: str, line: str) -> None:
        """A warning, unless one of this endpoint and kind was given in the last
        ``NOTICE_EVERY_S``, or ``held``: then a debug line (a flaky endpoint printed a warning per
        retry, fifty for one small run)."""
        if kind == "retry" and self.failed_at is None:
            self.failed_at = time.time()
        now = time.monotonic()
        last, back = self._last.get((endpoint, kind), (-math.inf, 0))
        if self.held or now - last < NOTICE_EVERY_S:
            log.debug(line)
            self._last[endpoint, kind] = (last, back + 1)
            return
        more = f" (and {back} more like it since the last; -v shows each)" if back else ""
        log.warning(line + more)
        self._last[endpoint, kind] = (now, 0)


_SHARED_NOTICES: contextvars.ContextVar[Notices | None] = contextvars.ContextVar("notices", default=None)


@contextlib.contextmanager
def sharing_notices(notices: Notices) -> Iterator[Notices]:
    """The clients made within the block (and the tasks it starts) say their notices through
    ``notices``: its limit carries from one client to the next."""
    token = _SHARED_NOTICES.set(notices)
    try:
        yield notices
    finally:
        _SHARED_NOTICES.reset(token)


def current_notices() -> Notices:
    """The notices of the ``sharing_notices`` block under way, else new ones of its own (a client's)."""
    return _SHARED_NOTICES.get() or Notices()
