"""A model endpoint that stops answering, as ``streamrag watch`` follows it and says it.

An outage is said once: a full error line when it begins (the endpoint, the fix: said by
the daemon with ``began``'s fields), then a short ``outage`` line only when the pause
between retries grows, once an hour at the cap, or when a sync's own lines left it unsaid
(``still_down``), and one ``recovered`` line when the endpoint answers again. While it lasts
the model clients' own retry lines are held (``notices``, shared by the clients of every
sync). ``since`` is when calls began failing with none answered (wall clock); the pauses
are timed with ``time.monotonic``.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamrag.config import without_secrets
from streamrag.endpoint_reach import REFUSED_ATTEMPTS
from streamrag.notices import Notices
from streamrag.proxies import Proxy, answering, through
from streamrag.watch_lines import answered, clock, clocks, ends_outage, span

if TYPE_CHECKING:
    from streamrag.config import Settings
    from streamrag.pipeline import Indexer

OUTAGE_REMIND_S = 3600.0
"""While the endpoint stays down with the pause between retries at its cap, a line this often."""
UNTIL_IT_ANSWERS = "retrying until it answers, less often as it stays down, said briefly"
UNTIL_READABLE = "retrying after a pause, less often as it goes on, said briefly"
"""... of a server whose answers could not be read: it answers, so not "until it answers"."""
LOOKUP_FIX = "check that this machine is online (its network and DNS)"
"""What to do when the endpoint's host name cannot be looked up, as the model client says it
(``provider_errors.stopped_answering``): no server to start."""


class Outage:
    """The endpoint's outage, if one is under way (``current``), and what the lines about it need;
    ``emit`` says a line (``Daemon.emit``)."""

    def __init__(self, settings: Settings, emit: Callable[..., None]) -> None:
        self.settings = settings
        self.emit = emit
        # The endpoint is down (no call of the last sync got an answer): since, endpoint, the
        # pause last said ("every", None: the full line only), when ("at"), "owed": a sync's
        # lines were shown without saying it is still down, "to_second": its lines last gave
        # "since" to the second (``down_since``; ``stopped``, to the minute unless in the minute
        # it last answered; a line that began it with no time, to the second, as a short one's).
        self.current: dict[str, Any] | None = None
        # The last sync or extraction ahead got HTTP answers, errors too: during an outage, the
        # endpoint answers with errors only (an HTTP 500 to every request), rather than not at all.
        self.server_errors = False
        # ... and its failed tries by HTTP status (``LLMClient.failed_statuses``), for ``errors_said``.
        self.statuses: Counter[int | None] = Counter()
        # ... and by what their errors said to change (``LLMClient.failed_fixes``; "": nothing).
        self.fixes: Counter[str] = Counter()
        # When the calls began failing, no call answered since (wall clock): an outage's "since".
        self.failing_since: float | None = None
        self.tried_s = 0.0   # how long the last sync took, failed or not (its calls' retries in it)
        # ... and its endpoint refused every connection, never answering: each call then stopped
        # after ``REFUSED_ATTEMPTS`` tries, not llm.max_retries + 1 (said "up to 7 times").
        self.refused = False
        # ... and the last of them failed at looking up its host name (``LLMClient.lookups_failing``):
        # this machine is offline, or its DNS; no server to start (it said "stopped answering").
        self.unnamed = False
        # ... the proxy the environment sends its requests through (``proxies.proxy_for``): then the
        # connections refused were the proxy's, down, not the endpoint's (said "http://127.0.0.1:...
        # still down", or "stopped answering at ...", of a server that was up).
        self.proxy: Proxy | None = None
        # When the endpoint last answered a call (wall clock), in this watch or, before it, in a
        # run of the index (``index_rows.answered_at``); None: never, as far as it knows. An
        # outage of an endpoint that answered is said as one that stopped (``stopped``), not as
        # a wrong llm.api_base.
        self.answered_at: float | None = None
        # The model clients' retry and wait lines, limited across the clients of every sync and
        # extraction ahead (each makes its own), and held while the outage lines speak for them.
        self.notices = Notices()

    def base_setting(self) -> str:
        """What set the endpoint, as the user would change it: ``--api-base``, ``llm.api_base`` ..."""
        from streamrag.provider_errors import base_setting   # (httpx: 70 ms more for every command)

        return base_setting(self.settings.llm, self.settings.api_base_from)

    def began(self) -> dict[str, Any]:
        """Notes that the endpoint stopped answering; the fields of the line that says so."""
        endpoint = without_secrets(self.settings.llm.api_base) or f"({self.base_setting()} not set)"
        since = self.failing_since or time.time()
        self.current = {"since": since, "endpoint": endpoint, "every": None,
                        "at": time.monotonic(), "owed": False, "to_second": True}
        self.notices.held = True   # the outage lines say it from now on
        return self.fields()

    def errors_said(self) -> str:
        """What the line of an outage begun says of a server answering with errors (``server_errors``):
        as the model client says it (``endpoint_health.only_errors``) when the failed tries were all
        HTTP errors and requests to wait, a proxy's bare 503 whose server behind it is down too
        (it said "kept answering with errors: check its logs", the proxy's logs), the environment's
        proxy named when one is in use (``proxy``). Tries all
        answered with HTTP 200 the client could not read are said so, as the model client says
        them (``provider_errors.advice``): it said "kept answering with errors" of answers. Tries
        whose errors all said what to change (``fixes``) are said by that."""
        from streamrag.endpoint_health import only_errors, unreadable_only   # (httpx, as ``base_setting``)

        assert self.current is not None
        if self.fixes and "" not in self.fixes:
            # Every failed try's error said what to change (llama.cpp's KV cache full, a crowded
            # server whose logs say only that): said "answers only HTTP 500: check its logs".
            return self.fixes.most_common(1)[0][0]
        if unreadable_only(self.statuses):
            return (f"the server at {self.current['endpoint']} answered, but its answers could not be read: "
                    f"check that {self.base_setting()} is an OpenAI-compatible endpoint")
        own = answering(self.proxy, self.settings.llm.api_base)   # (not an https:// server's, tunnelled)
        return only_errors(self.statuses, self.base_setting(), own) or (
            f"the server at {self.current['endpoint']} kept answering with errors: check its logs")

    def retrying(self) -> str:
        """How a line of the outage says it is retried: ``UNTIL_IT_ANSWERS``, or ``UNTIL_READABLE``
        when every failed try was an HTTP 200 that could not be read (``errors_said``), of a server
        that answered every request."""
        from streamrag.endpoint_health import unreadable_only   # (httpx, as ``base_setting``)

        return UNTIL_READABLE if self.server_errors and unreadable_only(self.statuses) else UNTIL_IT_ANSWERS

    def stopped(self) -> str | None:
        """How the line of an outage begun says an endpoint that answered before (``answered_at``)
        and now answers nothing, not even errors: ``http://... stopped answering at 18:05, having
        answered at 17:58``, the watch retrying it. None when it never answered, as far as this
        watch knows (a wrong endpoint is then as likely: the line names the setting to fix), or
        when it answers with errors (``errors_said``)."""
        o = self.current
        assert o is not None
        if self.answered_at is None or self.server_errors or self.refused and self.proxy is not None:
            return None   # (a proxy refused: the client's error names it, ``proxies.proxy_down``)
        since, answered_at = clocks(o["since"], self.answered_at)
        o["to_second"] = since != clock(o["since"])   # (to the minute but in the minute it answered)
        if self.unnamed:
            return (f"the host name {self._host()} of {o['endpoint']} could not be looked up since {since}, "
                    f"though it answered at {answered_at}: {LOOKUP_FIX}")
        return f"{o['endpoint']} stopped answering at {since}, having answered at {answered_at}"

    def unreachable(self) -> str:
        """How the line of an outage begun says an endpoint that never answered, as far as this
        watch knows (``stopped``: None), and answers nothing: a wrong address as likely as a
        server down, or its host name not looked up (a typo, or this machine offline: it said
        "Start it" of a provider's host)."""
        o = self.current
        assert o is not None
        if self.unnamed:
            return (f"the host name {self._host()} of {o['endpoint']} could not be looked up: check its "
                    f"spelling in {self.base_setting()}, and {LOOKUP_FIX.removeprefix('check ')}")
        return f"is the endpoint {o['endpoint']} down? Start it, or fix {self.base_setting()}"

    def _host(self) -> str:
        """The endpoint's host name."""
        from urllib.parse import urlsplit   # (httpx, as ``base_setting``)

        return urlsplit(self.settings.llm.api_base).hostname or "?"

    def fields(self) -> dict[str, Any]:
        """The fields of a line that says the outage under way."""
        o = self.current
        assert o is not None
        # (``name_unknown``: its host name could not be looked up, as the line says it; a script
        # read it only from the words. Not through a proxy: the connections refused were the proxy's.)
        return {"outage": True, "endpoint": o["endpoint"], "since": round(o["since"], 3),
                "server_errors": self.server_errors,
                "name_unknown": self.refused and self.unnamed and self.proxy is None,
                "answered_at": None if self.answered_at is None else round(self.answered_at, 3)}

    def down_since(self) -> str:
        """How a line says the outage under way: ``http://... still down since 18:05``; still
        answering with errors, when the endpoint is up but fails every call; ``the server behind
        http://... still down``, when it answers only as a proxy does for a server down behind
        it, as the line of the outage begun says it (``errors_said``): it said "still answering
        with errors", the proxy's logs to check (``http://... behind the proxy ... (set by
        HTTP_PROXY)``, the environment's proxy named); still giving answers that cannot be read, when
        every failed try was such an answer (``errors_said``)."""
        from streamrag.endpoint_health import behind_a_proxy, unreadable_only   # (httpx, as ``base_setting``)

        o = self.current
        assert o is not None
        # Under a minute, to the second: the error line just before gave 00:38:19, this one 00:38.
        o["to_second"] = time.time() - o["since"] < 60
        since = clock(o["since"], seconds=o["to_second"])
        own = answering(self.proxy, self.settings.llm.api_base)   # (not an https:// server's, tunnelled)
        if self.server_errors and behind_a_proxy(self.statuses) and own is not None:
            return f"{o['endpoint']} behind {through(own)} still down since {since}"
        if self.server_errors and behind_a_proxy(self.statuses):
            return f"the server behind {o['endpoint']} still down since {since}"
        if self.refused and self.proxy is not None:
            return f"{through(self.proxy)} to {o['endpoint']} still down since {since}"
        if self.refused and self.unnamed:
            return f"the host name {self._host()} of {o['endpoint']} still not looked up since {since}"
        still = "still down"
        if self.server_errors:
            still = ("still giving answers that cannot be read" if unreadable_only(self.statuses)
                     else "still answering with errors")
        return f"{o['endpoint']} {still} since {since}"

    def attempted(self, indexer: Indexer, began: float, *, failed: bool = False) -> None:
        """Notes, after a sync or an extraction ahead that began at ``began`` (wall clock; ``failed``:
        for want of an endpoint), whether the endpoint gave any HTTP answer (a server answering
        500 to every call is up, and its logs say why; one that refuses or times out is down),
        and since when calls have failed with none answered: its first failed try, when a
        client said one, else the start of the first such sync."""
        stats = indexer.llm.stats if indexer.llm is not None else {}
        self.server_errors = indexer.llm is not None and indexer.llm.reached
        self.refused = indexer.llm is not None and not indexer.llm.reached and indexer.llm.refusing
        self.unnamed = self.refused and indexer.llm.lookups_failing
        self.proxy = indexer.llm.proxy if indexer.llm is not None else None
        self.statuses = Counter(indexer.llm.failed_statuses) if indexer.llm is not None else Counter()
        self.fixes = Counter(indexer.llm.failed_fixes) if indexer.llm is not None else Counter()
        if answered(stats):
            self.answered_at = time.time()
        if answered(stats) or not (failed or any(s.get("errors", 0) for s in stats.values())):
            self.failing_since = None
        elif self.failing_since is None:
            self.failing_since = self.notices.failed_at or began
        self.notices.failed_at = None   # the next one's own

    def answered_ahead(self, indexer: Indexer) -> None:
        """An extraction ahead (or a sync that failed) one of whose calls was answered usably, or
        all of whose calls were answered (``ends_outage``), ends the outage, said now: the sync
        after it may ask the endpoint nothing (its chunks extracted, nothing to summarize or
        report), and then has no news of it to say (``Daemon._outage_after``)."""
        if self.current is not None and indexer.llm is not None and ends_outage(indexer.llm.stats):
            self.recovered()

    def recovered(self) -> None:
        """The endpoint answers again: one line, and the outage is over."""
        was, self.current = self.current, None
        self.notices.held = False
        if was is None:
            return
        down = time.time() - was["since"]
        # (as the outage's lines last gave it: to the second after the error line and a short
        # outage's, "since 08:31" followed lines saying 08:31:08; to the minute after a long one's,
        # "since 08:31:08" followed "still down since 08:31 (12 min)"; and in whole seconds, as
        # they say how long: "7.52 s")
        self.emit("recovered", f"{was['endpoint']} answers again, after {span(round(down))} down "
                               f"(since {clock(was['since'], seconds=was['to_second'])})",
                  outage=False, endpoint=was["endpoint"], since=round(was["since"], 3),
                  down_s=round(down, 3))

    def still_down(self, pause: float, **counts: int) -> None:
        """After a failed sync, during an outage: a short line when the pause before the next
        retry grew, an hour went by, or the sync's own lines left it unsaid; else nothing.
        ``counts``: what waits for the endpoint (``pending``, ``failed_items``, and of those,
        ``claims_failed``, the chunks indexed without their claims), for the line."""
        o = self.current
        if o is None:
            return
        now = time.monotonic()
        if o["every"] is None and not o["owed"]:   # the full line said it just now
            o.update(every=pause, at=now)
            return
        if not o["owed"] and pause <= (o["every"] or 0) and now - o["at"] < OUTAGE_REMIND_S:
            return
        o.update(every=pause, at=now, owed=False)
        down = time.time() - o["since"]
        # The pause runs from the end of a failed sync, and each sync retries each call first
        # ("retrying every 8 s" was said of syncs 40 s apart).
        tries = self.settings.llm.max_retries + 1
        if self.refused:
            tries = min(tries, REFUSED_ATTEMPTS)
        took = f"the last took {span(self.tried_s)}" + (
            f", each call in it tried up to {tries} times" if tries > 1 else "")
        # (whole seconds: "(7.52 s)" of an outage said to the minute or second)
        fix = f"{LOOKUP_FIX}; " if self.refused and self.unnamed and self.proxy is None else ""
        self.emit("outage", f"{self.down_since()} ({span(round(down))}); {fix}retrying {span(pause)} after each "
                            f"failed sync ({took})",
                  **self.fields(), took_s=round(self.tried_s, 3), call_tries=tries,
                  down_s=round(down, 3), retry_s=round(pause, 3), **counts)

    def owe(self, *, quiet: bool) -> None:
        """A sync failed during the outage, said already: its lines, unless ``quiet``, were shown
        without saying the outage goes on, so the next ``still_down`` says it."""
        assert self.current is not None
        self.current["owed"] = self.current["owed"] or not quiet

    def no_news(self) -> None:
        """Nothing is left to ask the endpoint: the outage is over unsaid."""
        self.current = None
        self.notices.held = False
