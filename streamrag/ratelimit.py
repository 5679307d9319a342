"""Rate limits: the per-minute budgets a client keeps, and the waits a provider asks for.

``MinuteBudget`` is a sliding window of a minute, not a refilled bucket: an idle client sends up
to a whole minute's budget at once, and no window of a minute ever holds more than the limit, so
sustained throughput stays within it whichever way the provider counts. A booking is corrected
once a request's usage is known (``settle``): more used is taken, and a guess not used given back.
``asked_wait`` reads the
wait a 429 or 503 asks for (``Retry-After``, ``retry-after-ms``, the words of its message, or
OpenAI's ``x-ratelimit-reset-*``).
"""

from __future__ import annotations

import email.utils
import math
import re
import time
from collections import deque
from collections.abc import Callable
from datetime import timezone

import httpx

MAX_RETRY_AFTER_S = 600.0


# A minute, plus a second for a request's way to the server: a budget freed here must be free
# at the server too, which stamps the request a little later than the client does.
WINDOW_S = 61.0


class MinuteBudget:
    """At most ``limit`` units (requests or tokens) taken in any ``WINDOW_S`` seconds.

    An idle budget lets a whole minute's worth through at once; after that, units come back as
    the ones taken a minute earlier leave the window. An amount above ``limit`` counts as
    ``limit``: it waits for an empty window instead of forever. ``clock`` is for tests.
    """

    def __init__(self, limit: int, clock: Callable[[], float] = time.monotonic, *, setting: str = "") -> None:
        self.limit = limit
        self.setting = setting                    # the setting it enforces, for messages
        self.clock = clock
        self.taken: deque[list[float]] = deque()  # [time, amount], oldest first
        self.total = 0.0                          # the amounts in ``taken``
        self.waited_s = 0.0                       # time spent waiting for this budget
        # What answers under way may use beyond their booking, by ticket (id: it is held until released)
        self._risks: dict[int, float] = {}

    def clamp(self, amount: float) -> float:
        return min(max(amount, 1.0), float(self.limit))

    def _expire(self, now: float) -> None:
        while self.taken and self.taken[0][0] <= now - WINDOW_S:
            self.total -= self.taken.popleft()[1]
        if not self.taken:
            self.total = 0.0  # no float drift left behind

    def wait_s(self, amount: float) -> float:
        """Seconds until ``amount`` (clamped) fits in the window; 0 when it fits now."""
        amount = self.clamp(amount)
        now = self.clock()
        self._expire(now)
        excess = self.total + amount - self.limit
        if excess <= 1e-9:
            return 0.0
        freed = 0.0
        for stamp, taken in self.taken:
            freed += taken
            if freed >= excess - 1e-9:
                return max(stamp + WINDOW_S - now, 1e-6)
        return max(self.taken[-1][0] + WINDOW_S - now, 1e-6)  # unreachable: amount <= limit

    def take(self, amount: float) -> list[float]:
        """Take ``amount`` (clamped) now, whether or not it fits; the ticket gives it back."""
        ticket = [self.clock(), self.clamp(amount)]
        self.taken.append(ticket)
        self.total += ticket[1]
        return ticket

    def risk(self, ticket: list[float], risk: float) -> None:
        """``ticket``'s request may use ``risk`` beyond it, until ``released`` (``holds``)."""
        if risk > 0:
            self._risks[id(ticket)] = risk

    def holds(self, amount: float, risk: float = 0.0) -> bool:
        """Whether ``amount`` (with its own ``risk``), which fits the window, is to wait for the
        answers under way to be settled: beside what they may use beyond their bookings, it
        would not fit. (Their bookings are guesses: before any answer is seen, the first minute's
        burst went over the limit.)"""
        at_risk = sum(self._risks.values())   # (of the few requests under way)
        return at_risk > 0 and self.total + at_risk + self.clamp(amount) + risk > self.limit

    def release(self, ticket: list[float]) -> None:
        """``ticket``'s request has ended (answered, settled or failed): its risk is no more."""
        self._risks.pop(id(ticket), None)

    def settle(self, ticket: list[float], used: float, refund: float = 0.0) -> None:
        """``ticket``'s request used ``used``: what it used beyond what it took is taken now, a
        debt the next requests wait for (a request books what its answer may be, and one without
        max_tokens books the answers' mean: a longer answer went uncounted, and the window after
        it was as full as if it had not been). What it took beyond ``used`` is given back, up to
        ``refund`` (the part of its booking that was a guess of its answer: a booking of
        max_tokens, which a provider counts as sent, is kept), while the ticket is in the window:
        a shorter answer than the mean kept the rest of its guess booked for a minute, and the
        requests after it waited for tokens no one used."""
        if used > ticket[1]:
            self.take(used - ticket[1])
            return
        unused = min(refund, ticket[1] - max(used, 1.0))
        now = self.clock()
        self._expire(now)
        if unused > 0 and ticket[0] > now - WINDOW_S:   # (still in ``taken``: stamps come in order)
            ticket[1] -= unused
            self.total -= unused

    def give_back(self, ticket: list[float]) -> None:
        for i, held in enumerate(self.taken):
            if held is ticket:
                del self.taken[i]
                self.total -= ticket[1]
                ticket[1] = 0.0   # (out of the window: nothing of it to give back again)
                if not self.taken:
                    self.total = 0.0
                return


def minute_budget(per_minute: int, setting: str) -> MinuteBudget | None:
    return MinuteBudget(per_minute, setting=setting) if per_minute > 0 else None


def parse_retry_after(value: str | None, now: float | None = None, *, unit: float = 1.0,
                      cap: float = MAX_RETRY_AFTER_S) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta seconds or HTTP date), at most
    ``cap``; ``unit`` is the seconds a number counts (0.001 for OpenAI's and Azure's
    ``retry-after-ms``)."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value) * unit
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        seconds = when.timestamp() - (time.time() if now is None else now)
    if math.isnan(seconds):
        return None
    return min(max(seconds, 0.0), cap)


# "Please try again in 6m0s." (OpenAI), "Please retry after 20 seconds." (Azure), and the Go
# durations of OpenAI's x-ratelimit-reset-* headers ("1s", "6m0s", "20ms", "1h2m3.5s").
_TRY_AGAIN_IN = re.compile(r"(?:try again|retry) in ((?:\d+(?:\.\d+)?(?:ms|h|m|s))+)\b"
                           r"|retry after (\d+(?:\.\d+)?) ?(?:seconds?|s)\b", re.IGNORECASE)
_GO_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def _go_duration(text: str) -> float | None:
    parts = _GO_DURATION.findall(text.strip())
    if not parts or "".join(n + u for n, u in parts) != text.strip():
        return None
    return sum(float(n) * _UNIT_S[u] for n, u in parts)


def asked_wait(resp: httpx.Response, message: str) -> float | None:
    """Seconds a 429 or 503 asks to wait, uncapped: ``Retry-After`` (or ``retry-after-ms``),
    else the wait its message names, else the reset of an OpenAI limit its headers say is used
    up (``x-ratelimit-remaining-requests: 0`` -> ``x-ratelimit-reset-requests``); None when it
    does not say."""
    headers = resp.headers
    wait = parse_retry_after(headers.get("retry-after"), cap=math.inf)
    if wait is None:
        wait = parse_retry_after(headers.get("retry-after-ms"), unit=0.001, cap=math.inf)
    if wait is None and (m := _TRY_AGAIN_IN.search(message)):
        wait = _go_duration(m.group(1)) if m.group(1) else float(m.group(2))
    if wait is None:
        resets = [_go_duration(headers.get(f"x-ratelimit-reset-{kind}", ""))
                  for kind in ("requests", "tokens") if headers.get(f"x-ratelimit-remaining-{kind}") == "0"]
        wait = max((r for r in resets if r is not None), default=None)
    return wait
