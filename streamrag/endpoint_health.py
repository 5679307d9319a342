"""Whether an endpoint fails everything: the evidence of a client's failed tries, kept until one
is answered usably. Pure: no HTTP, no clock but ``time.monotonic``; ``LLMClient`` tells it each
try's outcome (``tried``) and ends its calls once it says ``hopeless`` (``GaveUp``).

Before any try of a client was answered usably, an endpoint that plainly does not serve ends
every call at once, its try in flight or its backoff cut short: a run whose every call had failed
waited for a hung try, 30 s a time, and each call's retries after it (3 small files against an
endpoint failing every request: 150 s). It is one when HOPELESS_TRIES tries failed, most of them
as such an endpoint fails (``failure``: "hard", an HTTP 500 or 502, a bare 503, a dropped
connection, an answer that is not JSON; or "unusable", an answer that is not what was asked and
not cut off), HOPELESS_SERVER_ERRORS of them "hard", the first of those at least HOPELESS_S
before. Against it count the signs of a server that is up and working: an answer cut off at
max_tokens (a thinking model's first answers, asked again with more room), a 429, a 503 that is
busy, overloaded or loading or says when to come back (Ollama with its queue full: "server busy,
please try again"). Neither way: a timeout (a slow model's first answers: its timeouts grow; a
host taking no connection for a while times out connecting), a gateway's timeout (504,
Cloudflare's 524: a slow model behind a proxy), a refused connection (the client's
``_never_answered``'s). A flaky endpoint answers one usably long before (with 30% of tries
failing, the first 12 all fail once in 2 million runs); an outage at the start shorter than
HOPELESS_S is waited out as before. Unusable answers alone never make it (a model that cannot
follow the format: GIVE_UP_AFTER's).
"""

from __future__ import annotations

import time
from collections import Counter

from streamrag.errors import LLMUnavailableError
from streamrag.provider_errors import Retryable

HOPELESS_TRIES = 12
GATEWAY_TIMEOUTS = (504, 524)
HOPELESS_SERVER_ERRORS = 3
HOPELESS_S = 30.0
# What the kinds of failed tries (``failure``) are called in the error of a hopeless client.
FAILURES = (("hard", "HTTP errors, dropped connections or malformed answers"), ("unusable", "unusable answers"),
            ("cut_off", "answers cut off at max_tokens"), ("wait", "asked to wait"),
            ("timeout", "timed out or refused"))
# The llm_calls row of a call a hopeless client ended (a cancelled one: ``CallLog.cancelled``).
GAVE_UP = "the client gave up: every try of the endpoint had failed (the run's error says how)"


class GaveUp(LLMUnavailableError):
    """A call ended by its client, not by its own tries: every try of the client failed
    (``hopeless``). Recorded as cancelled, as the run that gives up with it would have it."""


class EndpointHealth:
    """The tries of one client that failed before any was answered usably, by kind, and whether
    they say the endpoint fails everything (``hopeless``: it stays so)."""

    def __init__(self) -> None:
        self.usable = False       # some try was answered usably (an answer passed its check)
        self.failed: Counter[str] = Counter()   # ... before it: tries that failed, by kind
        self._failing_since: float | None = None
        self._hard_since: float | None = None   # ... the first "hard" one (``failure``)
        self.failing_for = 0.0
        self.hopeless = False      # ... HOPELESS_TRIES of them over HOPELESS_S: every call ends

    def tried(self, kind: str) -> bool:
        """A try was answered usably ("usable"), or failed (``failure``'s kinds, or an answer
        "unusable" or "cut_off"); True when this try made the endpoint ``hopeless``."""
        if kind == "usable":
            self.usable = True
        if self.usable or self.hopeless:
            return False
        now = time.monotonic()
        self._failing_since = self._failing_since or now
        if kind == "hard":
            self._hard_since = self._hard_since or now
        self.failed[kind] += 1
        if self._hard_since is not None and hopeless(self.failed, now - self._hard_since):
            self.hopeless = True
            self.failing_for = now - self._failing_since
            return True
        return False

    def error(self, url: str, setting: str) -> GaveUp:
        """The error of a call ended because every try failed (``hopeless``); ``setting`` names
        what set the endpoint."""
        failed = self.failed
        kinds = ", ".join(f"{failed[kind]} {what}" for kind, what in FAILURES if failed[kind])
        return GaveUp(
            f"{url} failed every one of the {failed.total()} tries made in {self.failing_for:.0f} s "
            f"({kinds}) and answered none usably: check the server and the model at "
            f"{setting}, then run the same command (finished work is kept)")


def failure(e: Retryable) -> str:
    """What a failed try says of the endpoint (``hopeless``): "hard", it is not serving (an HTTP
    error of the server: 500, 502, a bare 503; a dropped connection; an answer that is not JSON);
    "wait", it is up and asks to wait (429, a busy or loading 503); "timeout", nothing either way
    (a timeout, a gateway's, a refused connection: the client's ``_never_answered``'s)."""
    if e.refused or e.unconnected or e.timed_out or e.status in GATEWAY_TIMEOUTS:
        return "timeout"
    if e.busy or e.loading or (e.status is not None and e.status < 500 and e.status != 200):
        return "wait"
    return "hard"


def hopeless(failed: Counter[str], seconds: float) -> bool:
    """Whether tries that all failed, ``failed`` by kind (``failure``, and "unusable" and
    "cut_off" answers), the first "hard" one ``seconds`` ago, say the endpoint fails everything
    (``HOPELESS_TRIES``)."""
    against = failed["cut_off"] + failed["wait"]
    evidence = failed["hard"] + failed["unusable"]
    return (evidence + against >= HOPELESS_TRIES and evidence > against
            and failed["hard"] >= HOPELESS_SERVER_ERRORS and seconds >= HOPELESS_S)
