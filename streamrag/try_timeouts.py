"""How long a try waits for its answer: the timeout of each model, grown after a timeout and
brought back down once answers come quickly again (``ModelTimeouts``), and the deadline of the
try under way, which a streamed answer moves on as its text comes (``TRY``, ``progress``).
No HTTP here but httpx's timeout object: the client (``llm.LLMClient``) makes the tries.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Iterator
from typing import Any

import anyio
import httpx

log = logging.getLogger("streamrag.llm")   # (the client's lines, under its name)

# A try that timed out gives the model's next tries twice the time, up to this many times
# llm.request_timeout_s: an answer that takes longer than the timeout (a long report from a
# model on a CPU) timed out the same way on every retry, each try paid for in full. A call
# whose timed-out tries add up to 1 + 2 + 4 timeouts ends: a server that never answers fails as
# soon as its 7 tries of one timeout each did before (a later call, at 4 times: after two).
TIMEOUT_GROWTH_MAX = 4
# ... and comes back down once answers come well within it again: after this many answers of the
# model in a row, each within half its grown timeout, the timeout is halved (not below
# llm.request_timeout_s). A server that hung once no longer keeps every later try of a long run
# (or a daemon's life) waiting up to TIMEOUT_GROWTH_MAX timeouts before a hang is noticed.
TIMEOUT_SHRINK_AFTER = 8


class ModelTimeouts:
    """Each model's timeout for a try: ``base`` (llm.request_timeout_s) until one timed out."""

    def __init__(self, base: float) -> None:
        self.base = base
        self.grown: dict[str, float] = {}   # model -> a try's timeout, grown after timeouts
        self._quick: dict[str, int] = {}    # model -> answers in a row within half of that

    def of(self, model: str) -> float:
        return self.grown.get(model, self.base)

    def hang_s(self) -> float:
        """How long tries that all time out take, 1 + 2 + 4 timeouts, before they say the
        server does not answer (a little less: rounding)."""
        return (2 * TIMEOUT_GROWTH_MAX - 1) * self.base * (1 - 1e-9)

    def timed_out(self, model: str, timeout: float) -> None:
        """A try of ``model`` timed out after ``timeout``: its next tries (every call's) get twice
        the time, up to ``TIMEOUT_GROWTH_MAX`` times ``base``."""
        self.grown[model] = max(self.grown.get(model, self.base), min(timeout * 2, self.base * TIMEOUT_GROWTH_MAX))
        self._quick.pop(model, None)

    def answered(self, model: str, seconds: float) -> None:
        """An answer of ``model`` took ``seconds``: its grown timeout is halved (not below
        ``base``) after ``TIMEOUT_SHRINK_AFTER`` answers in a row within half of it."""
        grown = self.grown.get(model)
        if grown is None:
            return
        quick = self._quick.get(model, 0) + 1 if seconds < grown / 2 else 0
        if quick < TIMEOUT_SHRINK_AFTER:
            self._quick[model] = quick
            return
        self._quick[model] = 0
        if grown / 2 > self.base:
            self.grown[model] = grown / 2
        else:
            del self.grown[model]
        log.debug("%s answered %d times in a row within %g s: its tries now wait %g s", model,
                  TIMEOUT_SHRINK_AFTER, grown / 2, self.grown.get(model, self.base))


class Try:
    """A try under way (the client's ``_attempt``): its deadline and the time each sign of
    progress gives it (a streamed answer moves it on as text comes: ``progress``), the timeout
    of its requests, and what of its answer had come when the deadline passed (``arriving``):
    nothing, a whole answer still arriving, or a stream; the timeout's words say which."""

    def __init__(self, deadline: anyio.CancelScope, allowance: float, timeout: float) -> None:
        self.scope, self.allowance, self.timeout = deadline, allowance, timeout
        self.answering = False   # its headers came: the answer was under way
        self.streamed = False


# The ``Try`` under way, told by the client's requests (``arriving``, ``progress``, ``request_timeout``).
TRY: contextvars.ContextVar[Try | None] = contextvars.ContextVar("streamrag_try", default=None)


@contextlib.contextmanager
def try_under_way(deadline: anyio.CancelScope, allowance: float, timeout: float) -> Iterator[Try]:
    """Within the block, ``deadline`` is the try's, moved on by ``progress``, and its requests
    time out at ``timeout`` (``request_timeout``); it gives the try, which says what of the
    answer came."""
    under_way = Try(deadline, allowance, timeout)
    token = TRY.set(under_way)
    try:
        yield under_way
    finally:
        TRY.reset(token)


def arriving(*, streamed: bool) -> None:
    """The answer of the try under way began to come (its headers did)."""
    current = TRY.get()
    if current is not None:
        current.answering, current.streamed = True, streamed


def timed_out_said(under_way: Try, *, stalled: bool = False) -> str:
    """What a try cut off at its deadline was doing: a server sending a whole answer 1 byte a
    second was said to have "made no progress", though it was still arriving. ``stalled``: cut
    off by httpx's own timeout, which is per read: nothing at all came for the try's timeout."""
    timeout = under_way.timeout
    if not under_way.answering:
        return f"no answer within {timeout:g} s (timeout)"
    if under_way.streamed:
        return f"the streamed answer was under way but sent no text for {timeout:g} s (timeout)"
    if stalled:
        return f"the answer began but nothing more came for {timeout:g} s (timeout)"
    return f"the answer was still arriving after {timeout:g} s (timeout)"


def progress() -> None:
    """A streamed answer moved on: the try under way gets its whole allowance again."""
    current = TRY.get()
    if current is not None:
        current.scope.deadline = anyio.current_time() + current.allowance


def request_timeout() -> httpx.Timeout | Any:
    """httpx's timeout for a request of the try under way (its own, grown after a timeout)."""
    current = TRY.get()
    return httpx.USE_CLIENT_DEFAULT if current is None else httpx.Timeout(current.timeout)
