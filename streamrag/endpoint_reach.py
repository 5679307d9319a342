"""Whether the endpoint answers: it has answered this client at all (``reached``), it has
refused every connection since when (``down_s``: a server stopped or restarting), and tries of
more than one call have timed out, none answered, for as long as one call's tries take to end
(``silent``: the server hangs). An HTTP answer, errors too, clears the refusals and the
timeouts; a refused connection clears the timeouts (the server is down, not hung). No HTTP and
no waiting: the client (``llm.LLMClient``) tells it what its tries met and decides what to do.
"""

from __future__ import annotations

import time

from streamrag.errors import LLMUnavailableError


# Tries of a call whose connections are refused by an endpoint that has never answered: nothing
# listens there (a wrong llm.api_base, a server not started), so say so in seconds rather than a
# minute (``LLMClient._never_answered``; ``Outage.still_down`` says it of a daemon's failed sync).
REFUSED_ATTEMPTS = 3


class EndpointReach:
    """What one client's tries have met of its endpoint: answers, refusals, timeouts."""

    def __init__(self) -> None:
        self.reached = False     # some request got an HTTP answer (the endpoint exists)
        self._refused_since: float | None = None  # every attempt refused since then
        self.last_answer = time.monotonic()    # (or when the client was made)
        self._timing_out_since: float | None = None   # tries have timed out since, none answered
        self._timing_out_calls: set[int] = set()      # ... of these calls (the client's numbers)
        self.silent = False    # ... for as long as one call's tries take to end: it hangs

    def answered(self) -> None:
        """The endpoint gave an HTTP answer: it exists, and it is up."""
        self.reached = True
        self._refused_since = None
        self.last_answer = time.monotonic()
        self._quiet_again()

    def refused(self) -> None:
        """A connection was refused: the server is down (or restarting), not hung."""
        if self._refused_since is None:
            self._refused_since = time.monotonic()
        self._quiet_again()

    @property
    def refusing(self) -> bool:
        """Every connection has been refused since some try, none answered since."""
        return self._refused_since is not None

    def down_s(self) -> float:
        """Seconds every connection has been refused (0 while the endpoint answers)."""
        return 0.0 if self._refused_since is None else time.monotonic() - self._refused_since

    def timed_out(self, call: int, timeout: float, hang_s: float) -> None:
        """A try of ``call`` timed out after ``timeout``: the server is ``silent`` once tries of
        more than one call have timed out for ``hang_s``, no answer to any meanwhile (a slow
        server answering other calls meanwhile is not; nor one call slower than any timeout)."""
        now = time.monotonic()   # (a try begun before the last answer counts from it)
        began = max(self.last_answer, now - timeout)
        self._timing_out_since = min(self._timing_out_since or began, began)
        self._timing_out_calls.add(call)
        if now - self._timing_out_since >= hang_s and len(self._timing_out_calls) > 1:
            self.silent = True

    def _quiet_again(self) -> None:
        """Forgets that tries timed out: an answer came, or a refused connection says the
        server is down (``down_s`` says that, not "it hangs")."""
        self._timing_out_since = None
        self._timing_out_calls = set()
        self.silent = False

    def silent_error(self, url: str, timeout_s: float, then: str, also: str = "") -> LLMUnavailableError:
        """The error of a call ended because the server stopped answering (``silent``);
        ``timeout_s``: llm.request_timeout_s; ``then``: what to do once it is fixed ("" for a
        caller that retries by itself, the daemon); ``also``: more to check (the proxy the tries
        went through, ``proxies.proxy_failed``: a proxy that holds every request hangs as well)."""
        return LLMUnavailableError(
            f"{url} has answered nothing for {time.monotonic() - self.last_answer:.0f} s, every try "
            "timed out (one try at a time checks whether it answers again): the server hangs, or is "
            f"too slow for llm.request_timeout_s = {timeout_s:g}; restart it or raise the setting"
            + (f"; {also}" if also else "") + (f", {then}" if then else ""), run_again=bool(then))
