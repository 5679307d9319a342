"""Whether an endpoint fails everything: the evidence of a client's failed tries, kept until one
is answered usably (or, of tries answered only with errors and requests to wait, until the model
answers). Pure: no HTTP, no clock but ``time.monotonic`` (or the one a test gives it);
``LLMClient`` tells it each try's outcome (``tried``) and ends its calls once it says
``hopeless`` (``GaveUp``).

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
please try again"), llama.cpp's 500 "Context size has been exceeded." (its KV cache filled by the
requests in progress: ``provider_errors.KV_CACHE_FULL``; so in any 5xx that relays it). Neither
way: a timeout (a slow model's first answers: its timeouts grow; a host taking no connection for
a while times out connecting), a gateway's timeout (504, Cloudflare's 524: a slow model behind a
proxy; not one that quotes llama.cpp's KV cache full), a refused connection (the client's
``_never_answered``'s). A flaky endpoint answers one usably long before (with 30% of tries
failing, the first 12 all fail once in 2 million runs); an outage at the start shorter than
HOPELESS_S is waited out as before. Unusable answers alone never make it (a model that cannot
follow the format: GIVE_UP_AFTER's).

A server that only asks to wait is up, so the rule above never counts it; but a proxy or load
balancer whose server behind it is down answers every request so too (a bare 503 "please try
again later", a 408 to everything), and every call then spent all its retries, run after run (a
1,000-chunk index: hours). So an endpoint is hopeless too once it has answered tries only with
errors and requests to wait (``failure``'s "hard" and "wait") for ``llm.give_up_after_s``
(``give_up_after_s``; 0: never), HOPELESS_TRIES of them at least, none answered by the model
since (usable, unusable or cut off), before any usable answer or since the last. It counts from
the first such try after the model last answered, not from that answer (a run idle for an hour is
no outage). A wall clock, not a count of calls: with llm.max_retries 0 a call is one try, and a
blip of 503s ends a dozen at once. Five minutes by default: a provider's limits are per minute,
so a real 429 lets some request through within about one (and any usable answer starts the span
again); an overloaded engine or a restarting upstream is back within a minute or two; a call
spends its own retries in about a minute (backoff 1 + 2 + ... + 32 s), so five minutes of nothing
is several calls in a row spent in vain. A server loading its model (llama.cpp's 503 "Loading
model", "loading") is waited for by the client for up to ``llm.LOADING_MAX_S``, and counts
neither way; timeouts and refusals have their own bounds (``endpoint_reach``).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

from streamrag import proxies
from streamrag.errors import LLMUnavailableError
from streamrag.provider_errors import Retryable, duration

HOPELESS_TRIES = 12
GATEWAY_TIMEOUTS = (504, 524)
HOPELESS_SERVER_ERRORS = 3
HOPELESS_S = 30.0
# What the kinds of failed tries (``failure``) are called in the error of a hopeless client.
FAILURES = (("hard", "HTTP errors, dropped connections or malformed answers"), ("unusable", "unusable answers"),
            ("cut_off", "answers cut off (finish_reason length)"), ("wait", "asked to wait"),
            ("loading", "said the model was loading"), ("timeout", "timed out or refused"))
# The kinds of tries the model answered (usably or not), which end a span of only failed tries.
ANSWERED = ("usable", "unusable", "cut_off")
# The llm_calls row of a call a hopeless client ended (an error, not cancelled: ``CallLog.cancelled``).
GAVE_UP = "the client gave up: the endpoint's tries had all failed (the run's error says how)"
# How an error about an endpoint that failed ends for a command run once (a daemon retries by itself).
RUN_AGAIN = "then run the same command (finished work is kept)"
# ... and for a daemon, which retries by itself, stopped while its calls failed (``LLMClient``'s
# ``stopped``): it said "retried until it answers", a retry that process never makes. No "it":
# after "start the server again" (``provider_errors.stopped_answering``) it named two things.
START_AGAIN = "then start the watch again (this watch has stopped; finished work is kept)"
# The statuses a proxy or load balancer answers while the server behind it is down.
PROXY_STATUSES = frozenset({408, 502, 503})


class GaveUp(LLMUnavailableError):
    """A call ended by its client, not by its own tries: every try of the client failed, or every
    one for ``llm.give_up_after_s`` (``hopeless``). Recorded as failed: its tries failed."""


class EndpointHealth:
    """The tries of one client that failed before any was answered usably, by kind, and whether
    they say the endpoint fails everything (``hopeless``: it stays so); and the tries answered
    only with errors and requests to wait since the model last answered (``give_up_after_s``)."""

    def __init__(self, give_up_after_s: float = 0.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.usable = False       # some try was answered usably (an answer passed its check)
        self.failed: Counter[str] = Counter()   # ... before it: tries that failed, by kind
        self._failing_since: float | None = None
        self._hard_since: float | None = None   # ... the first "hard" one (``failure``)
        self.failing_for = 0.0
        self.hopeless = False      # ... HOPELESS_TRIES of them over HOPELESS_S: every call ends
        self.give_up_after_s = give_up_after_s   # (llm.give_up_after_s; 0: never)
        self._clock = clock
        self.unanswered: Counter[str] = Counter()   # "hard" and "wait" tries since the model answered
        self.unanswered_statuses: Counter[int | None] = Counter()   # ... by HTTP status (None: none)
        self.unanswered_fixes: Counter[str] = Counter()   # ... by what their errors said to change ("": none)
        self._unanswered_since: float | None = None   # ... the first of them
        self.waited_out = False    # hopeless for those, not for the tries before any usable one

    def tried(self, kind: str, status: int | None = None, fix: str = "") -> bool:
        """A try was answered usably ("usable"), or failed (``failure``'s kinds, or an answer
        "unusable" or "cut_off"; ``status``: its HTTP status, if any; ``fix``: what its error says
        to change, ``Retryable.fix``); True when this try made the endpoint ``hopeless``."""
        if self.hopeless:
            return False
        now = self._clock()
        if self._answered_nothing(kind, status, fix, now):
            self.hopeless = self.waited_out = True
            self.failing_for = now - (self._unanswered_since or now)
            return True
        if kind == "usable":
            self.usable = True
        if self.usable:
            return False
        self._failing_since = self._failing_since or now
        if kind == "hard":
            self._hard_since = self._hard_since or now
        self.failed[kind] += 1
        if self._hard_since is not None and hopeless(self.failed, now - self._hard_since):
            self.hopeless = True
            self.failing_for = now - self._failing_since
            return True
        return False

    def _answered_nothing(self, kind: str, status: int | None, fix: str, now: float) -> bool:
        """Notes ``kind`` in the span of tries answered only with errors and requests to wait;
        whether that span has lasted ``give_up_after_s`` (``unanswered_too_long``)."""
        if kind in ANSWERED:
            self.unanswered.clear()
            self.unanswered_statuses.clear()
            self.unanswered_fixes.clear()
            self._unanswered_since = None
            return False
        if kind not in ("hard", "wait"):   # (loading, timeouts: neither way)
            return False
        if self._unanswered_since is None:
            self._unanswered_since = now
        self.unanswered[kind] += 1
        self.unanswered_statuses[status] += 1
        self.unanswered_fixes[fix] += 1
        return unanswered_too_long(self.unanswered, now - self._unanswered_since, self.give_up_after_s)

    def error(self, url: str, setting: str, then: str = RUN_AGAIN, proxy: proxies.Proxy | None = None) -> GaveUp:
        """The error of a call ended because every try failed (``hopeless``); ``setting`` names
        what set the endpoint; ``then``, what to do once it is fixed ("": nothing, a daemon);
        ``proxy``, the one the tries went through (``proxies.proxy_for``), named as more to check
        (``proxies.proxy_failed``), but not where the tries' 502s or 503s are said already
        (``only_errors``: as that proxy's, or an https:// server's through its tunnel): one case
        was said twice over, "a proxy or load balancer answers so ..." and "requests go through
        the proxy ...: check it too; ... check the proxy's logs". Nor where every try's error said
        what to change (``_fix_said``): the server's own words came through the proxy, which so
        reached it (a KV cache full relayed in a 500 named the proxy, in a 502, 503 or 504 not)."""
        own = proxies.answering(proxy, url)   # (an https:// server's statuses come through its tunnel)
        if self.waited_out:
            said = self._waited_out(url, setting, own)
        else:
            failed = self.failed
            said = (f"{url} failed every one of the {failed.total()} tries made in {duration(self.failing_for)} "
                    f"({kinds_said(failed)}) and answered none usably: check the server and the model at "
                    f"{setting}")
        said_so = self.waited_out and (bool(self._fix_said()) or behind_a_proxy(self.unanswered_statuses)
                                       or self._waits_said())
        also = proxies.proxy_failed(proxy) if proxy is not None and not said_so else ""
        return GaveUp(said + (f"; {also}" if also else "") + (f"; {then}" if then else ""), run_again=bool(then))

    def _waited_out(self, url: str, setting: str, proxy: proxies.Proxy | None) -> str:
        """``error``'s words, before what to do once fixed, of tries answered only with errors and
        requests to wait for ``give_up_after_s``; ``proxy``: the one that may answer for the
        server (``only_errors``)."""
        tries = self.unanswered
        fix = self._fix_said() or only_errors(self.unanswered_statuses, setting, proxy) or (
            waits_fix(setting, proxy) if self._waits_said() else f"check the server and the model at {setting}")
        return (f"{url} answered none of the {tries.total()} tries of the last {duration(self.failing_for)} "
                f"({kinds_said(tries)}): {fix}; raising llm.give_up_after_s ({self.give_up_after_s:g} s) "
                "waits longer")

    def _fix_said(self) -> str:
        """What every try answered only with errors and requests to wait said to change, or "":
        llama.cpp's KV cache full, a crowded server, up, whose logs say only that (``_waited_out``
        says it, not "answers only HTTP 500: check its logs"). Of several stages' tries, the words
        most of them carried."""
        fixes = self.unanswered_fixes
        return fixes.most_common(1)[0][0] if fixes and "" not in fixes else ""

    def _waits_said(self) -> bool:
        """Whether ``_waited_out`` says its tries as requests to wait that a proxy or load
        balancer may answer (``waits_fix``), none of them said by their statuses (``only_errors``)."""
        return (only_errors(self.unanswered_statuses, "") is None
                and self.unanswered["wait"] >= self.unanswered["hard"])


def waits_fix(setting: str, proxy: proxies.Proxy | None = None) -> str:
    """What tries answered mostly with requests to wait (429s, busy 503s) say to check: the
    server behind what answers them, which a proxy or load balancer may be; ``proxy``: the
    environment's, which the requests went through (``proxies.proxy_for``), named as that one,
    once (it was "a proxy or load balancer ...", and after it "requests go through the proxy
    ...: check it too", two wordings of one case)."""
    what = f"check that server and the model behind {setting} (for HTTP 429, the account's limits)"
    if proxy is None:
        return f"a proxy or load balancer answers so while the server behind it is down: {what}"
    return (f"requests to the server at {setting} go through {proxies.through(proxy)}, which may answer so "
            "while the server behind it is down or out of its reach: "
            + proxies.fix(proxy, f"{what}, and the proxy's logs"))


def only_errors(statuses: Counter[int | None], setting: str, proxy: proxies.Proxy | None = None) -> str | None:
    """What tries all answered with HTTP errors and requests to wait say, ``statuses`` by HTTP
    status: which the server behind ``setting`` answers, and to check it; None when some try was
    no such answer (no status, a gateway's timeout, a 501) or one of a rate limit (429s alone).
    ``proxy``: the environment's, which the requests went through (``proxies.proxy_for``): its
    502 or 503 is named as its, with NO_PROXY for a server on this machine (it was "a proxy or
    load balancer", that proxy unnamed)."""
    if not statuses or any(s is None or s in GATEWAY_TIMEOUTS or s == 501 or (s < 500 and s not in (408, 409, 429))
                           for s in statuses):
        return None
    if set(statuses) == {429}:   # a provider's rate limit: its own advice
        return None
    said = " and ".join(str(s) for s in sorted(statuses))   # (None ruled out above)
    if PROXY_STATUSES & set(statuses) and proxy is not None:
        fix = (f"requests to the server at {setting} go through {proxies.through(proxy)}, which answers only HTTP "
               f"{said} (as a proxy does while the server behind it is down or out of its reach): "
               + proxies.fix(proxy, "check that server, and the proxy's logs"))
    elif PROXY_STATUSES & set(statuses):
        fix = (f"the server behind {setting} answers only HTTP {said} (a proxy or load balancer answers "
               "so while the server behind it is down): check that server and its logs")
    else:
        fix = f"the server at {setting} answers only HTTP {said}: check its logs"
    return fix + (" and, for HTTP 429, the account's limits" if 429 in statuses else "")


def behind_a_proxy(statuses: Counter[int | None]) -> bool:
    """Whether tries answered so, ``statuses`` by HTTP status, are said as a proxy's whose server
    behind it is down (``only_errors``: "the server behind ... answers only HTTP 503")."""
    return only_errors(statuses, "") is not None and bool(PROXY_STATUSES & set(statuses))


def unreadable_only(statuses: Counter[int | None]) -> bool:
    """Whether tries that failed so, ``statuses`` by HTTP status, were all answered with HTTP 200
    and text the client could not read (not JSON, no choices: ``replies.Replies.json``): the
    server answered, with no error to look for in its logs."""
    return set(statuses) == {200}


def kinds_said(failed: Counter[str]) -> str:
    """How many tries failed of each kind, as an error says it (``FAILURES``)."""
    return ", ".join(f"{failed[kind]} {what}" for kind, what in FAILURES if failed[kind])


def failure(e: Retryable) -> str:
    """What a failed try says of the endpoint (``hopeless``): "hard", it is not serving (an HTTP
    error of the server: 500, 502, a bare 503; a dropped connection; an answer that is not JSON);
    "wait", it is up and asks to wait (429, a busy or loading 503), or is crowded (llama.cpp's
    KV cache full, ``Retryable.busy``, in whatever status relays it: a gateway's 504 quoting it
    is the server's answer, and its advice the crowded one); "timeout", nothing either way
    (a timeout, a gateway's, a refused connection: the client's ``_never_answered``'s); "loading",
    it is up and loading its model (a 503 that says so: the client waits for it apart)."""
    if e.refused or e.unconnected or e.timed_out or (e.status in GATEWAY_TIMEOUTS and not e.busy):
        return "timeout"
    if e.loading:
        return "loading"
    if e.busy or (e.status is not None and e.status < 500 and e.status != 200):
        return "wait"
    return "hard"


def hopeless(failed: Counter[str], seconds: float) -> bool:
    """Whether tries that all failed, ``failed`` by kind (``failure``, and "unusable" and
    "cut_off" answers), the first "hard" one ``seconds`` ago, say the endpoint fails everything
    (``HOPELESS_TRIES``)."""
    against = failed["cut_off"] + failed["wait"] + failed["loading"]
    evidence = failed["hard"] + failed["unusable"]
    return (evidence + against >= HOPELESS_TRIES and evidence > against
            and failed["hard"] >= HOPELESS_SERVER_ERRORS and seconds >= HOPELESS_S)


def unanswered_too_long(tries: Counter[str], seconds: float, limit: float) -> bool:
    """Whether tries answered only with errors and requests to wait, ``tries`` by kind, the first
    ``seconds`` ago, say the endpoint serves nothing: HOPELESS_TRIES of them over ``limit``
    (``llm.give_up_after_s``; 0: never)."""
    return limit > 0 and tries.total() >= HOPELESS_TRIES and seconds >= limit
