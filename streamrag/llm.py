"""The client for any OpenAI-compatible endpoint: rate-limited, cached, retried and accounted.

Every request passes, in order:

1. the **cache** (``llm_cache``, keyed by ``cache.cache_key``; ``answer_cache.AnswerCache``):
   a hit costs no HTTP call;
2. the **in-flight table** (``AnswerCache.flying``): an identical request already on the wire is
   awaited, not repeated;
3. a **concurrency slot** (``llm.concurrency`` requests in flight at most);
4. the **rate limits**: requests per minute and tokens per minute, each a budget over a sliding
   window of a minute (``ratelimit.MinuteBudget``): an idle client sends up to a whole minute's
   budget at once, and no window of a minute ever holds more than the limit, so sustained
   throughput stays within it whether the provider counts a sliding window or a continuously
   refilled bucket. A
   request booking more tokens than a whole minute's budget is clamped to it (it waits for an
   empty window instead of forever). An attempt that never reached the server (connection
   refused, connect or pool timeout) gives its budget back. A request to Azure OpenAI (by its
   api-version, its host in any Azure cloud, or an API Management gateway's) always sends a
   max_tokens (``AZURE_MAX_TOKENS`` when its caller sets none: Azure books one without at a
   whole context), booked as sent (``llm.azure``: true or false says whether the endpoint is
   Azure's, "auto" leaves it to those signs). Elsewhere, a request without
   max_tokens books a guess of its answer (the answers' mean), corrected once its usage is known
   (counted here when the server says none: llama.cpp, some vLLM versions): a longer
   answer takes the rest, a shorter one gives back what it did not use (a max_tokens booked is
   kept: OpenAI counts it as sent). A try that ends without an answer (its stream cut short,
   timed out, its call cancelled) books what it streamed beyond its booking: the provider bills
   it. Before any answer is seen, a request that fits only if the
   answers under way are no longer than their guesses (up to their prompts' length) waits for
   them, not the window;
5. **HTTP**, retried with jittered exponential backoff on 429, 5xx, timeouts, connection errors
   and truncated answers; a ``Retry-After`` pauses every request of this client, not just the
   one that saw it. Each retry passes the slot and the limiters again, because the provider
   counts it too. A refused connection to an endpoint that answered before (a restart) uses no
   retry: it is tried again every few seconds until the endpoint answers or has refused every
   connection for ``DOWN_AFTER_S``.

An answer is then checked: the caller's ``validate`` (what its stage can use) and, unless the
caller says otherwise, that it was not cut off (``finish_reason == "length"``: at ``max_tokens``, or
by the server's own limit when none was sent). A cut answer of the max_tokens sent (a caller's,
or Azure's own when it reached it) is asked again with twice the room (``more_room``); a 400 or
422 refusing that room (more than the model writes, or than its context holds beside the prompt),
or a 500 saying the context overflowed, ends the tries with the cut's error (``refused_room``); any
other 500 is retried, llama.cpp's "Context size has been exceeded." too (its KV cache filled by the
requests in progress).
An unusable answer is recorded but never cached, and asked for again (``USABLE_TRIES`` answers at
most, then ``LLMOutputError``). A cached answer is checked the same way, so an answer cached by an
older version that the checks now reject is asked for again and replaced.

A usable paid answer is written to the cache through the writer and committed before ``chat``
returns, so a crash right after never pays for it twice. Every call, served from the cache or
not, failed or not, becomes one ``llm_calls`` row, in the same transaction (``call_log.CallLog``);
so does a call cancelled by its caller once a try of it began (a run that gave up, Ctrl-C),
counted as ``cancelled``, not as an error, and one ended by the client when every try failed
(``hopeless``), counted as an error; both are written with the next row or as the client closes.
``stats`` keeps the same counts in memory for progress display; its token counts are what was
paid for (cache hits are counted in ``cached`` only).

Without a store the client works the same, minus the cache and the rows.

This module is the flow of a call (cache, admission, tries, record) and what ties its tries
together: retries and backoff, the one try that checks whether a silent server is back, and
when refusals end a call (``_never_answered``). Its parts live beside it: ``answer_cache`` (the
cache and the in-flight table), ``call_log`` (stats and ``llm_calls`` rows), ``ratelimit`` (the
minute budgets), ``try_timeouts`` (how long a try waits), ``replies`` (what an HTTP reply says,
in ``provider_errors``' words, and what an answer must be to be used), ``endpoint_reach``
(whether the endpoint answers, refuses or hangs), ``endpoint_health`` (whether it fails
everything), ``model_quirks`` (what models refuse or do) and ``notices`` (the retry and wait
lines).
"""

from __future__ import annotations

import functools
import itertools
import logging
import os
import random
import re
import ssl
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import anyio
import httpx
import msgspec
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type

from streamrag.answer_cache import Answer, AnswerCache
from streamrag.answer_json import read_embeddings, read_usage
from streamrag.cache import batch_key, cache_key, embedding_key
from streamrag.call_log import UNUSABLE, UNWRITTEN, CallLog, unwritten
from streamrag.config import LLMSettings, check_api_key
from streamrag.endpoint_health import (GAVE_UP, PROXY_STATUSES, RUN_AGAIN, START_AGAIN, EndpointHealth, GaveUp,
                                      failure, only_errors)
from streamrag.endpoint_reach import REFUSED_ATTEMPTS, EndpointReach
from streamrag.errors import ConfigError, LLMError, LLMOutputError, LLMRequestError, LLMUnavailableError
from streamrag.model_quirks import (REASONING_ALLOWANCE, THINKERS, ends_unmarked, leave_out, note_server_cut,
                                    note_whole_answer, refuses, sendable, server_cuts, thinks_aloud,
                                    unmarked_seen)
from streamrag.notices import current_notices
from streamrag.parsing import ReasoningFilter, split_reasoning, starts_with_reasoning
from streamrag.prompts import Prompt
from streamrag.proxies import (Proxy, answering, proxy_down, proxy_failed, proxy_for, proxy_refused,
                               socks_unreachable, unreadable)
from streamrag.provider_errors import (AZURE_HOST, CONTEXT_OVERFLOW, MORE_RETRIES, Refused, Retryable, advice,
                                       aside, hidden, html_page, key_not_sent, key_source,
                                       listing_refused, lookup_failed, model_settings, name_unknown, not_answering, of_model,
                                       one_line, provider_message, read_error, reason, shorter_answer, stopped_answering,
                                       tls_refused, unknown_model)
from streamrag.ratelimit import MinuteBudget, minute_budget
from streamrag.replies import (CUT_OFF, CUT_OFF_UNASKED, CUT_OFFS, OnLength, Replies, chat_answer, checker,
                               answer_thinking, event_deltas, event_usage, unstreamed)
from streamrag.store import Store
from streamrag.tokens import count_message_tokens, count_tokens
from streamrag.try_timeouts import (ModelTimeouts, arriving, progress, request_timeout, timed_out_said,
                                    try_under_way)
from streamrag.words import counted
from streamrag.writer import Writer

log = logging.getLogger(__name__)

EMBED_BATCH = 64
_COMPLETION_GUESS = 256        # answer tokens booked without max_tokens, until answers are seen
# The max_tokens sent to Azure OpenAI with a request that sets none. Azure's rate limiter books
# each request as it comes at its prompt plus max_tokens, kept for the minute; without one, at
# the model's whole context (128,000 tokens of gpt-4o: a minute of most deployments' TPM per
# request), while the client booked the prompt and the answers' mean. With one, both book the
# same. The output cap of gpt-35-turbo, gpt-4-turbo and the first gpt-4o (a higher one is refused):
# far above an extraction's answer (the simulator's: 530 tokens to a 1,150-token prompt). Models
# that write more (gpt-4o-2024-08-06, gpt-4.1, the o-series) get twice as much after a cut.
AZURE_MAX_TOKENS = 4096
# Azure API Management's gateways (public, Government, China clouds): in front of Azure OpenAI,
# which books their requests as its own, and with no api-version of theirs to tell it by.
AZURE_GATEWAY = re.compile(r"\.azure-api\.(?:net|us|cn)$")
# A 400 (or 422) refusing a max_tokens larger than the model writes (OpenAI's and Azure's
# "max_tokens is too large: 8192. This model supports at most 4096 completion tokens", vLLM's,
# Groq's "must be less than or equal to", pydantic's "Input should be less than or equal to").
MAX_TOO_LARGE = re.compile(r"max_(?:completion_)?tokens\W.{0,60}?(?:too large|at most|maximum|"
                           r"less than or equal|must be <=|> ?\d)", re.IGNORECASE | re.DOTALL)
USABLE_TRIES = 3              # answers asked for before an unusable one is an error


def max_too_large(e: LLMRequestError) -> bool:
    """Whether a request's error refuses its max_tokens as more than the model writes: a 400
    (``MAX_TOO_LARGE``'s wordings), or a 422 of a server that validates its request with
    pydantic (vLLM's, FastAPI's: "max_tokens: Input should be less than or equal to 4096")."""
    return e.status in (400, 422) and MAX_TOO_LARGE.search(str(e)) is not None


def _either(*remedies: str) -> str:
    """Remedies said as one choice, the empty ones left out: "a, b, or c"."""
    said = [r for r in remedies if r]
    return ", or ".join([", ".join(said[:-1]), said[-1]]) if len(said) > 1 else "".join(said)


def refused_room(e: LLMRequestError) -> str:
    """Why a request's error refuses the larger max_tokens a cut answer was asked again with, as
    the cut's error says it ("" for another error): more than the model writes
    (``max_too_large``), or more than its context holds beside the prompt (a 400 or 422 saying
    so, ``CONTEXT_OVERFLOW``: Azure's context_length_exceeded of an 8k gpt-4-0613 asked 8192;
    the same prompt with the smaller max fitted; llama.cpp's "request (N tokens) exceeds the
    available context size"; or a 500 saying so, as a server with no status for it does: final
    as the 400 is, ``Replies.reject``, where the same prompt with the smaller max fitted, which
    ended with "the request is longer than the model's context allows", the prompt's fault).
    llama.cpp's 500 "Context size has been exceeded." (its own, or relayed by a proxy: any 5xx
    holding the sentence) is no refusal of the room, and no error here: its KV cache, shared by
    its slots, filled by the requests in progress, is retried (``provider_errors.kv_cache_full``),
    as a 500 saying no overflow is, and a gateway's 502, 503 or 504 whatever it says
    (``replies.GATEWAY_STATUS``)."""
    if max_too_large(e):
        return "more than it writes"
    if e.status in (400, 422, 500) and CONTEXT_OVERFLOW.search(str(e)):
        return "more than its context holds beside the prompt"
    return ""


def more_room(problem: str, answer: Answer, estimated: bool, sent: int | None, *, asked: bool,
              extra: int = 0) -> int | None:
    """The max_tokens to ask again with after an unusable ``answer`` to a request that sent
    ``sent`` (None: none, and none gives room), or None to ask as it was: twice ``sent`` when
    the answer was cut off at it (``CUT_OFF``). A max the caller ``asked`` for is doubled after
    any cut; Azure's own (``AZURE_MAX_TOKENS``) only when the answer reached it (its token counts
    say so, or are counted here: ``estimated``; ``extra``: the reasoning's room a model sent
    max_completion_tokens has beyond ``sent``, which its counts include): one broken off before
    it (a provider's fault) comes whole at the same room, which a model capped at 4096 takes,
    where it refuses twice as much. A model that refuses the larger max ends the tries
    (``refused_room``)."""
    if problem != CUT_OFF or not sent:
        return None
    if asked or estimated or answer.completion_tokens >= sent + extra:
        return sent * 2
    return None


class ChatResult(msgspec.Struct):
    text: str
    prompt_tokens: int
    completion_tokens: int
    cached: bool
    finish_reason: str | None
    latency_ms: float          # the answering HTTP request (or cache lookup), not queueing
    key: str = ""              # the answer's key in llm_cache (``cache.cache_key``)
    estimated: bool = False    # its token counts were counted here: the server said none (a paid answer)


class _Tries:
    """What a call's tries got so far (chat or embeddings), for its row should it be cancelled
    (``_cancelled``): the tries begun and, of the try under way, whether its request went out
    whole (its prompt is the provider's then, and paid for) and the pieces of answer streamed
    (thinking too). ``whole``: its answer comes at once (a chat call not streamed), so a request
    sent may have been answered, and billed, though none of it was read. ``estimated``: the
    answer's token counts, or some, were counted here (the server said none). ``usage``: the
    token counts the try under way's stream has said so far (a server may say them in every
    event), for the token budget should it end without an answer (``LLMClient._book_streamed``)."""

    __slots__ = ("begun", "sent", "pieces", "whole", "estimated", "usage", "owed")

    def __init__(self, whole: bool = False) -> None:
        self.begun = 0
        self.owed = False   # a try under way, or answered and not yet cached (``LLMClient.drain``)
        self.sent = False
        self.pieces: list[str] = []
        self.whole = whole
        self.estimated = False
        self.usage: dict = {}

    def next(self) -> None:
        self.begun += 1
        self.sent = False
        self.pieces = []
        self.estimated = False
        self.usage = {}

    def failed(self, e: Retryable) -> None:
        """The try under way failed: one the server answered with an HTTP error before any of
        its answer came had its prompt refused, not billed. (A call then cancelled in its
        backoff, by its caller or a hopeless client, counted it as sent and paid, "no answer
        begun".)"""
        if e.status not in (None, 200) and not self.pieces:
            self.sent = False

    def extensions(self) -> dict:
        """httpx's request extensions telling it when the request went out (httpcore's trace; a
        transport without one, ``MockTransport``, tells it by the answer's beginning)."""
        async def trace(event: str, _info: dict) -> None:
            if event.endswith("send_request_body.complete"):
                self.sent = True
        return {"trace": trace}


class _Silent(Exception):
    """A try not made: the server has stopped answering and another try is finding out whether
    it is back (``LLMClient._attempt``)."""


class _Hopeless(Exception):
    """A try not made, or cut short: every try of the client so far failed
    (``endpoint_health.HOPELESS_TRIES``)."""


# A server that answered, then refused every connection for this long, has stopped (not restarted):
# every call still waiting fails at its next refused attempt, instead of each one going through its
# own minute of backoff (a 50-document index against a server stopped mid-run took 8 minutes).
# Until then, a refused try of such an endpoint (a restart) uses none of llm.max_retries: a server
# down 12 s made calls fail after 7 quick tries.
DOWN_AFTER_S = 60.0
# The longest wait between those refused tries (full jitter below it), so a restarted server is
# found again within seconds.
REFUSED_WAIT_MAX_S = 5.0
# How long a server that says it is loading its model (llama.cpp's 503 "Loading model") is waited
# for, in tries that use none of llm.max_retries: a large model takes minutes to load.
LOADING_MAX_S = 600.0
# The longest wait between other tries (without Retry-After).
MAX_BACKOFF_S = 60.0
# The wait before a first retry (full jitter below it), doubled for each retry after it.
RETRY_BASE_S = 1.0


# A wait for rate budget at least this long is said (a run otherwise looks stuck for a minute).
WAIT_NOTICE_S = 5.0
# The lines said once per process of a key not sent beside api_base's password (``key_not_sent``):
# a watch makes a client per sync.
_KEYS_NOT_SENT: set[str] = set()
# The (models URL, model) pairs found served (``LLMClient.check_models``: listed, or answered by
# name), asked once a process: a daemon's every sync makes a client. A check that failed (no answer,
# a page, an error) finds nothing: the next sync asks again.
_MODELS_SERVED: set[tuple[str, str]] = set()
# The models URLs that gave no listing (an error, no answer in MODELS_TIMEOUT_S, no list), asked no
# more a process: a watch's every sync waited 10 s on a /models that hangs.
_MODELS_UNLISTED: set[str] = set()
# How long a run waits for the list of models, or for the answer to a model asked by name, before
# it goes on without (a listing and a refusal are quick; a server that hangs is found by the run's
# first call, and a run with nothing to ask paid a whole llm.request_timeout_s).
MODELS_TIMEOUT_S = 10.0
# How many of the models an endpoint lists its "unknown model" line names.
MODELS_SHOWN = 6
# The llm_calls stage of the request asking by name a model the listing leaves out
# (``LLMClient.check_models``, ``_refusal_by_name``): a chat of one word answered with one token
# (max_tokens 1), or an embedding of one word. (What follows a call's refusal of a model is no
# such check: a GET /models, no tokens and no row, ``_refused_model``.)
MODEL_CHECK = "model_check"
# The meta key of the models an index's endpoint answered when asked so by name (``LLMClient.
# check_models``), by models URL: asked once a process, such a model cost every `index` a paid
# call, one of an index unchanged too ("Nothing changed ...", "LLM 1 call, 9 tokens"). Taken back
# when a call is refused the model as unknown: a server that stopped serving it is checked again.
MODELS_ANSWERED = "models_answered_by_name"


def _noted(said: str | None) -> dict[str, set[str]]:
    """``MODELS_ANSWERED``'s value read: models URL -> models (none where it is not as written)."""
    try:
        noted = msgspec.json.decode(said or "{}")
    except (msgspec.DecodeError, RecursionError):
        return {}
    return {url: {m for m in models if isinstance(m, str)} for url, models in noted.items()
            if isinstance(models, list)} if isinstance(noted, dict) else {}


def _put_noted(store: Store, noted: dict[str, set[str]]) -> None:
    """Writes ``noted`` (as ``_noted`` reads it) as ``MODELS_ANSWERED``'s value, a URL left with
    no model left out."""
    said = {url: sorted(models) for url, models in noted.items() if models}
    store.set_meta(MODELS_ANSWERED, msgspec.json.encode(said).decode())


def listed(model: str, ids: set[str]) -> bool:
    """Whether ``GET /models``'s ``ids`` hold ``model``, as servers name them: Ollama lists
    "llama3:latest" and serves "llama3"; Gemini lists "models/gemini-2.0-flash"."""
    def plain(name: str) -> str:
        name = name.casefold().removeprefix("models/")
        return name.removesuffix(":latest")
    return model in ids or plain(model) in {plain(i) for i in ids}


def request_options(temperature: float, *, max_tokens: int | None = None, logit_bias: dict | None = None,
                    response_format: dict | None = None, stop: list[str] | None = None,
                    seed: int | None = None) -> dict:
    """A chat request's options as they are sent and as its cache key covers them (unset ones
    left out); ``index --estimate`` builds the same key to find answers already cached."""
    options = {"temperature": float(temperature), "max_tokens": max_tokens, "logit_bias": logit_bias or None,
               "response_format": response_format, "stop": stop, "seed": seed}
    return {k: v for k, v in options.items() if v is not None}


@functools.cache
def _tls(_cafile: str | None, _capath: str | None) -> ssl.SSLContext:
    return httpx.create_ssl_context()   # (which reads those two variables: they key the cache)


def tls_context() -> ssl.SSLContext:
    """The TLS context of every client of this process: made once, as httpx makes one (its CA
    bundle, or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``). httpx made one per client, loading the CA
    bundle again (50 ms, some 1 MB) for each sync of a daemon, an http:// endpoint's too.
    An ``SSLContext`` is shared safely between connections, clients and event loops."""
    cafile, capath = os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")
    try:
        return _tls(cafile, capath)
    except OSError as e:   # (ssl.SSLError is one: a file of no certificate)
        if not cafile:   # (SSL_CERT_DIR's folder is read at a handshake; certifi's bundle gone: a broken install)
            raise
        raise ConfigError(unread_ca_bundle(cafile, e)) from None


def unread_ca_bundle(cafile: str, e: OSError) -> str:
    """One line for a CA bundle ``SSL_CERT_FILE`` names that cannot be loaded: it was a
    traceback from inside httpx, the variable unnamed. (``SSL_CERT_DIR`` gives no such error:
    Python reads its folder only when a handshake looks a certificate up.)"""
    if isinstance(e, ssl.SSLError):
        what = f"holds no certificate that can be read ({e.reason or e})"
    else:
        what = "no such file" if isinstance(e, FileNotFoundError) else f"cannot be read ({e.strerror or e})"
    return (f"SSL_CERT_FILE={cafile}: {what}; set SSL_CERT_FILE to a PEM file of the certificates to trust "
            "(a company proxy's, a server's own), or unset it to trust the usual ones")


class LLMClient:
    """Chat completions and embeddings against ``settings.api_base``.

    Use as ``async with LLMClient(settings, api_key, store=store, writer=writer) as llm:``.
    ``store`` is read for cache lookups; every write goes through ``writer`` (or, without a
    writer, straight to a writable ``store``).
    """

    def __init__(self, settings: LLMSettings, api_key: str = "", *, store: Store | None = None,
                 writer: Writer | None = None, run_id: str | None = None,
                 transport: httpx.AsyncBaseTransport | None = None,
                 encoding: str = "o200k_base", retry_base_s: float | None = None,
                 base_setting: str = "", retried: bool = False, answered_at: float | None = None,
                 stopped: Callable[[], bool] | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        if not settings.api_base:
            raise ConfigError("no LLM configured: set llm.api_base in streamrag.toml or "
                              "STREAMRAG_API_BASE (any OpenAI-compatible endpoint, e.g. "
                              "https://api.openai.com/v1), or use the offline extractor")
        self.settings = settings
        self._api_key = check_api_key(api_key, key_source(settings, api_key) or "api_key") if api_key else ""
        self._cache = AnswerCache(store, settings.cache)
        self._call_log = CallLog(store, writer)
        self.run_id = run_id
        self.encoding = encoding
        base, auth = settings.api_base.rstrip("/"), None
        if (url := httpx.URL(base)).userinfo:
            # A user:password@ in api_base is sent as httpx sends it (Basic auth) but kept out of
            # the URLs that errors, the call log and `status --failures` quote.
            base, auth = str(url.copy_with(userinfo=b"")), httpx.BasicAuth(url.username, url.password)
        self.chat_url = f"{base}/chat/completions"
        self.embeddings_url = f"{base}/embeddings"
        self.models_url = f"{base}/models"
        # The proxy the environment sends its requests through (httpx reads none beside a transport
        # given), named by the errors it causes: a proxy down was said as a server not started.
        self._proxy = proxy_for(self.chat_url) if transport is None else None
        # How its replies are read; ``base_setting`` (Settings.api_base_from): what set api_base, for messages.
        self._replies = Replies(settings, api_key, base_setting, self.chat_url, self.embeddings_url,
                                proxy=self._proxy)
        # A key beside api_base's user:password was silently not sent (Basic auth takes its header).
        if (line := key_not_sent(settings, api_key, self._replies.setting)) and line not in _KEYS_NOT_SENT:
            _KEYS_NOT_SENT.add(line)
            log.warning(line)
        headers = {"Content-Type": "application/json"}
        if api_key:
            if settings.api_version:
                headers["api-key"] = api_key
            else:
                headers["Authorization"] = f"Bearer {api_key}"
        params = {"api-version": settings.api_version} if settings.api_version else None
        slots = max(1, settings.concurrency)
        try:
            self._http = httpx.AsyncClient(
                headers=headers, params=params, auth=auth, transport=transport, verify=tls_context(),
                timeout=httpx.Timeout(settings.request_timeout_s),
                limits=httpx.Limits(max_connections=slots, max_keepalive_connections=slots))
        except ImportError:   # (httpx's words name the package, not the variable that wants it)
            if (said := socks_unreachable()) is None:
                raise
            raise ConfigError(said) from None
        except httpx.InvalidURL as e:   # (the environment's proxy settings: no other URL is read here)
            raise ConfigError(unreadable(e)) from None
        self._slots = anyio.CapacityLimiter(slots)
        self._rpm = minute_budget(settings.requests_per_minute, "llm.requests_per_minute")
        self._tpm = minute_budget(settings.tokens_per_minute, "llm.tokens_per_minute")
        # Azure OpenAI (llm.azure, or by its api-version, its host or its gateway's): every chat
        # request sends a max_tokens.
        host = httpx.URL(base).host
        self._azure = settings.azure if isinstance(settings.azure, bool) else \
            bool(settings.api_version or AZURE_HOST.search(host) or AZURE_GATEWAY.search(host))
        self._notices = current_notices()
        self._admission = anyio.Lock()  # requests take rate budget one at a time, in order
        self._paused_until = 0.0
        self._timeouts = ModelTimeouts(settings.request_timeout_s)   # per model, grown after timeouts
        self._reach = EndpointReach()   # answered at all, refusing since, silent (it hangs)
        self._calls = itertools.count()
        self._probe: anyio.Event | None = None   # once it hangs, one try is finding out whether it is
        # back; set when that try ends (the calls that came meanwhile wait for it)
        self._answers = 0
        # What GET /models listed, asked after a call's refusal of its model (``_refused_model``):
        # False until asked, None when it gave no listing.
        self._listing: set[str] | None | bool = False
        self._listing_lock = anyio.Lock()
        self._health = EndpointHealth(settings.give_up_after_s)   # whether every try failed (``hopeless``)
        # Every failed try by HTTP status (None: no answer), a model loading left out, as a call's
        # own (``_call_advice``): what a caller says of calls that all failed (``only_errors``).
        self.failed_statuses: Counter[int | None] = Counter()
        # ... and by what their errors said to change ("": nothing; ``Retryable.fix``: llama.cpp's
        # KV cache full), for a caller that says them by their statuses (``outage.Outage.errors_said``).
        self.failed_fixes: Counter[str] = Counter()
        # What an error about the endpoint says to do once it is fixed (``_then``): nothing for a
        # caller that retries by itself (``retried``: the daemon), unless it has stopped since
        # (``stopped()``: a stop during the calls), else to run the command again.
        self._retried, self._stopped = retried, stopped
        # When the endpoint last answered, as the caller knows it (a daemon: its earlier syncs, a
        # run of the index; None: never): a refused connection is then a server stopped, not a
        # wrong llm.api_base (``stopped_answering``), though this client never reached it.
        self._answered_at = answered_at
        self._cut_short: set[anyio.CancelScope] = set()   # tries and backoffs under way
        self._released = anyio.Event()   # set as a try ends (``_release``), then a new one
        self.thinking: set[str] = set()   # models seen thinking aloud (``split_reasoning``)
        self.fresh = False   # chat answers are asked again, not taken from the cache (and replace it)
        # Chat answers are cached as this endpoint's (``cache.cache_key``'s endpoint: ask's, whose
        # --api-base names the server to answer), not as any server's of the model.
        self.by_endpoint = False
        # The last connection refused failed at looking up the host name (no network, no DNS),
        # not at a server: said so by a watch's outage lines (``outage.Outage.unnamed``).
        self.lookups_failing = False
        self._endpoint = base   # (api_base, its password out)
        self._answer_tokens = 0
        # Full jitter: the n-th retry waits up to retry_base_s * 2**(n-1), at most a minute (tests
        # shrink it; None: RETRY_BASE_S).
        self._retry_base_s = RETRY_BASE_S if retry_base_s is None else retry_base_s
        # What latencies are measured with, and so how long an answer took (``ModelTimeouts``:
        # quick answers bring a grown timeout back down); tests give their own.
        self._clock = clock
        # Drained (``drain``): no try begins; the calls whose try is under way (``_owed``) end first.
        self._holding = False
        self._owed = 0
        self._owed_less = anyio.Event()

    async def drain(self) -> None:
        """Begins no more tries (a try about to begin waits until its caller cancels it, asking
        nothing) and returns once every call whose try was under way has ended: answered and
        cached, or failed. What its caller then cancels was not sent, so a run that goes on
        later pays for no call twice (a cancellation cut the tries under way, whose provider
        bills them, and their calls were asked again). Waits as long as those tries take."""
        self._holding = True
        while self._owed:
            self._owed_less = anyio.Event()
            await self._owed_less.wait()

    def _owes(self, tries: _Tries, owed: bool) -> None:
        if tries.owed != owed:
            tries.owed = owed
            self._owed += 1 if owed else -1
            if not owed:
                self._owed_less.set()

    async def __aenter__(self) -> LLMClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._call_log.flush()   # (shielded: the rows of calls cancelled as a run stopped)
        await self._http.aclose()

    @property
    def _then(self) -> str:
        """What an error about the endpoint ends with, what to do once it is fixed: a watch
        stopped while its calls failed retries nothing, and its error fields and the failures
        it recorded said "retried until it answers" (``endpoint_health.START_AGAIN``)."""
        if not self._retried:
            return RUN_AGAIN
        return START_AGAIN if self._stopped is not None and self._stopped() else ""

    def _cancelled(self, row: dict, tries: _Tries, started: float, prompt: Callable[[], int],
                   why: str | None = None) -> None:
        """A call cancelled by its caller (a run that gave up, Ctrl-C): counted and recorded
        when a try of it had begun; one that only waited (for a slot, the rate limits, an
        identical request) asked nothing. ``prompt()``: the tokens of the prompt (a chat call's
        messages, an embedding call's inputs), counted when the try under way sent it (a provider
        bills it, answered or not), and the pieces of its answer streamed so far: the row counts
        them as an estimate does, not 0. An answer not streamed that the try under way sent for
        and did not read is not counted, of a length unknown here, and its row says so: a provider
        that has the request writes the answer whether or not its client stays, and bills it (the
        simulator does; a row said "no answer begun" of it). ``why``: who stopped it, when not its
        caller (``GAVE_UP``). Awaits nothing (``CallLog.cancelled``)."""
        if not tries.begun:
            return
        completion = count_tokens("".join(tries.pieces), self.encoding)
        self._call_log.cancelled(row, tries.begun, (self._clock() - started) * 1000,
                                 prompt() if tries.sent else 0, completion, why=why,
                                 unread=tries.sent and tries.whole)

    @property
    def hopeless(self) -> bool:
        """Whether every try of this client failed, as an endpoint that fails everything does
        (``endpoint_health``): every call ends."""
        return self._health.hopeless

    @property
    def stats(self) -> dict[str, dict[str, int]]:
        """Per stage: calls, cached, prompt_tokens, completion_tokens (paid), errors, unusable,
        asked_again, cancelled, gave_up (``call_log.STAT_FIELDS``)."""
        return self._call_log.stats

    # -- chat --------------------------------------------------------------------------------
    async def chat(self, messages: list[dict], *, model: str, stage: str,
                   prompt: Prompt | None = None,
                   max_tokens: int | None = None, temperature: float | None = None,
                   logit_bias: dict[str, float] | None = None, response_format: dict | None = None,
                   stop: str | list[str] | None = None, seed: int | None = None,
                   on_delta: Callable[[str], None] | None = None,
                   validate: Callable[[str], bool] | None = None,
                   on_length: OnLength | None = None, tries: int = USABLE_TRIES,
                   budget_setting: str = "") -> ChatResult:
        """One chat completion, from the cache when possible; ``on_delta`` streams the text.

        ``validate(text)`` says whether an answer is usable. An unusable answer is recorded but
        never cached, and the request is sent again (after a cut-off one, with twice the
        ``max_tokens`` sent: ``more_room``); after ``tries`` unusable answers ``LLMOutputError``
        is raised (after the second, when two in a row were cut off with no ``max_tokens`` sent,
        or broken off before Azure's ``AZURE_MAX_TOKENS``, at temperature 0: the
        server's own limit cuts it the same way each time; after the first while the model is
        known so, ``model_quirks.server_cuts``, until a longer whole answer or ten minutes; after
        a cut, when the model refuses twice the room: ``refused_room``).

        ``on_length`` is what an answer cut off at ``max_tokens`` (``finish_reason == "length"``)
        is: ``"retry"`` (the default without ``on_delta``) unusable, like one ``validate``
        rejects; ``"accept"`` usable and cached when ``validate`` passes (an answer that is
        expected to fill ``max_tokens``, such as a one-token YES/NO); ``"keep"`` (the default
        with ``on_delta``, whose text the caller has already shown) returned but never cached;
        a function of the text: usable and cached when it and ``validate`` say so, else
        ``"retry"`` (a summary already past its budget, which its caller trims anyway).

        ``budget_setting`` names the setting ``max_tokens`` comes from, for the error when every
        answer was cut off.
        """
        prompt_name, prompt_version = (prompt.name, prompt.version) if prompt is not None else ("", "")
        options = request_options(self.settings.temperature if temperature is None else temperature,
                                  max_tokens=max_tokens, logit_bias=logit_bias,
                                  response_format=response_format, stop=stop, seed=seed)
        key = cache_key(model, messages, options, prompt_name, prompt_version,
                        endpoint=self._endpoint if self.by_endpoint else "")
        row = {"run_id": self.run_id, "stage": stage, "model": model, "prompt": prompt_name,
               "prompt_version": prompt_version, "cache_key": key}
        payload = {"model": model, "messages": messages, **options}
        asked_max = max_tokens
        if not max_tokens and self._azure:
            # Sent, not asked: out of the cache key (the same answer whatever the endpoint), and
            # no setting's (the advice after cuts names what to lower instead: ``_cut_advice``).
            max_tokens = payload["max_tokens"] = AZURE_MAX_TOKENS
        if on_length is None:
            on_length = "keep" if on_delta is not None else "retry"
        check = checker(validate, on_length, limited=bool(max_tokens))
        last, asked, cuts, cut, most, sent, short = UNUSABLE, 0, 0, (0, 0, False), 0, max_tokens, False
        refusal = ""
        for i in range(tries):
            sent = payload.get("max_tokens")
            try:
                result = await self._chat_once(key, row, payload, on_delta, check,
                                               cache_length=on_length != "keep")
            except LLMRequestError as e:
                # The room a cut answer was given is more than the model writes (gpt-4-turbo,
                # gpt-35-turbo: 4096) or than its context holds (gpt-4-0613: 8192 with the
                # prompt): the cut is what to act on, not the refusal.
                if not (last == CUT_OFF and max_tokens and sent > max_tokens and (refusal := refused_room(e))):
                    raise await self._refused_model(e, model)
                most = sent
                break
            if isinstance(result, ChatResult):
                if i:   # the unusable answers before it failed as calls, not as this request
                    self._call_log.asked_again(stage, i)
                if not max_tokens and not result.cached and result.finish_reason == "stop":
                    note_whole_answer(self.settings.api_base, model, self.chat_url, result.prompt_tokens,
                                      result.completion_tokens, result.estimated)
                return result
            (last, answer, estimated), asked = result, i + 1
            room = more_room(last, answer, estimated, sent, asked=bool(asked_max),
                             extra=REASONING_ALLOWANCE if self.refuses(model, "max_tokens") else 0)
            short = last == CUT_OFF and room is None   # (before Azure's own max: not its doing)
            if room is not None:
                # The same request at temperature 0 is cut off the same way: give it room. The
                # answer is cached under the request as asked, so the next run finds it. A cut
                # given room is no cut "in a row" with the next (below): they count from here.
                payload = {**payload, "max_tokens": room}
                cuts, cut = 0, (0, 0, False)
            elif last in CUT_OFFS and not options["temperature"] and not self.refuses(model, "temperature"):
                # No max_tokens was sent, and none gives room: the server's own limit cut it
                # (Ollama's num_predict, llama.cpp's -n, a full context) and cuts the same request
                # the same way again (a model that answers so was paid three times for the one
                # cut-off answer), or its answer broke off (a provider's fault; the simulator's
                # truncated answers), and comes whole when asked again (its chunk failed until the
                # next run). Asked once more; cut twice in a row, the server's limit is known, and
                # this model's cut answers are asked for once while it is (``model_quirks``: it
                # lapses). (A model that refuses temperature samples at its own, and may answer
                # shorter: asked ``tries`` times.) Broken off before AZURE_MAX_TOKENS, the same:
                # no server's limit to note.
                cuts += 1
                cut = (max(cut[0], answer.completion_tokens),
                       max(cut[1], answer.prompt_tokens + answer.completion_tokens), cut[2] or estimated)
                unasked = last == CUT_OFF_UNASKED
                if cuts >= 2 and unasked:
                    note_server_cut(self.settings.api_base, model, self.chat_url, *cut)
                if cuts >= 2 or (unasked and server_cuts(self.settings.api_base, model)):
                    break
            else:
                # Answered otherwise in between (an unusable answer not cut off): the same request
                # at temperature 0 is not answered the same way each time, so the cuts before were
                # no limit's doing (cut, malformed, cut marked the model, paid 3 times).
                cuts, cut = 0, (0, 0, False)
        hint = "try another model or prompt"
        if last == CUT_OFF_UNASKED:
            hint = ("streamrag sent no max_tokens, so the server's own output or context limit cut "
                    f"{'it' if asked == 1 else 'them'} off: "
                    + _either("raise it (Ollama: num_predict, OLLAMA_CONTEXT_LENGTH; llama.cpp: -n, -c; vLLM: "
                              "--max-model-len; a hosted model's are fixed)", shorter_answer(stage),
                              "try a model that writes shorter answers"))
        if last == CUT_OFF:
            hint = self._cut_advice(model, stage, asked, max_tokens, sent, most, asked_max=bool(asked_max),
                                    budget_setting=budget_setting, short=short, refusal=refusal)
        raise LLMOutputError(f"{model} gave no usable answer in {counted(asked, 'try')} (stage "
                             f"{stage}, prompt {prompt_name or '-'}): {last}; they are kept in the index "
                             f"database (table llm_calls, error '{UNUSABLE}...'; `streamrag status` counts "
                             f"them as errors); {hint}")

    def _cut_advice(self, model: str, stage: str, asked: int, first: int, last: int, most: int, *,
                    asked_max: bool, budget_setting: str, short: bool = False, refusal: str = "") -> str:
        """What the error of a call whose answers were cut off at max_tokens says to do:
        ``first`` the max its first try sent, ``last`` its last try's, ``most`` the larger max
        the model refused (0: none was), ``refusal`` why (``refused_room``). ``asked_max``: the
        caller set it (``budget_setting`` names the setting it comes from), else it is Azure's
        ``AZURE_MAX_TOKENS``, which no setting sets: a shorter request is the fix. ``short``: the
        last answer stopped before Azure's max (``more_room``), so the max did not cut it: the
        provider did (a rerun may help) or the model's context filled up (Azure AI Foundry's
        models stop so: only a shorter request helps, so that comes first)."""
        limit, extra = "max_tokens", 0
        if self.refuses(model, "max_tokens"):   # max_completion_tokens is sent: the reasoning counts too
            limit, extra = "max_completion_tokens", REASONING_ALLOWANCE
        if short and not asked_max:
            return (f"{'it was' if asked == 1 else 'the answers were'} cut off (finish_reason length) before "
                    f"{limit}={last + extra}, the most streamrag asked for: the provider or the model's "
                    f"context stopped {'it' if asked == 1 else 'them'}; "
                    + _either(shorter_answer(stage), "run the same command again later", "try another model"))
        if most:
            said = (f"{'it was' if asked == 1 else 'the answers were'} cut off at {limit}={first + extra}"
                    + (f" and at {most // 2 + extra}" if most // 2 > first else "")
                    + f", and the model refused {most + extra} ({refusal or 'more than it writes'})")
        elif last > first:
            said = f"the answers were cut off at {limit}={first + extra} and at {last + extra} on the last try"
        else:
            said = f"{'it was' if asked == 1 else 'the answers were'} cut off at {limit}={first + extra}"
        if asked_max:
            if not budget_setting:   # (a room of the stage's own, a map's: what shortens its answer)
                return f"{said}: " + _either(shorter_answer(stage), "try a model that writes shorter answers")
            if most:
                return (f"{said}: raise {budget_setting} as far as the model takes (less than {most + extra}), "
                        "or try a model that writes shorter answers")
            return f"{said}: raise {budget_setting}, or try a model that writes shorter answers"
        # (no setting's: nothing to raise)
        return (f"{said}; streamrag sends Azure OpenAI {limit}={AZURE_MAX_TOKENS + extra} where no setting "
                "limits the answer (twice as much after a cut): "
                + _either(shorter_answer(stage), "try a model that writes shorter answers"))

    async def _chat_once(self, key: str, row: dict, payload: dict,
                         on_delta: Callable[[str], None] | None,
                         check: Callable[[Answer], str | None],
                         cache_length: bool) -> ChatResult | tuple[str, Answer, bool]:
        """A cached, shared or new answer; the reason when a new answer was unusable, the
        answer (paid: cached ones are checked before use), and whether its token counts were
        counted here (``ChatResult.estimated``)."""
        stale = self.fresh  # a cached answer not to use: the next good answer replaces it
        while True:
            started = self._clock()
            answer, unreadable = self._cache.answer(key) if not self.fresh else (None, False)
            stale = stale or unreadable
            if answer is not None and starts_with_reasoning(answer.text):
                # Cached before thinking was left out of answers (later ones are stored without
                # it: taking it out again could cut an answer that speaks of a closing tag).
                answer.text = self._answer_text(answer.text, payload["model"])
            if answer is not None and check(answer) is not None:
                answer, stale = None, True
            flight = self._cache.in_flight(key)
            if answer is None and flight is not None:
                await flight.done.wait()
                if flight.error is not None:
                    # Failed for its caller, but it asked nothing: its row is the shared error's,
                    # cached as a waiter's of a usable answer is, so `status` and the stats count
                    # one call and one error of N identical calls refused once, not N of each.
                    if not isinstance(flight.error, GaveUp):   # (a given-up call's waiters: no row)
                        unusable = isinstance(flight.error, LLMOutputError)   # (a content filter's stop)
                        await self._call_log.record(row, 0, 0, 0.0, cached=False, error=str(flight.error),
                                                    unusable=unusable, shared=True)
                    raise flight.error
                if flight.answer is None or check(flight.answer) is not None:
                    continue  # the first caller was cancelled or wants other answers: ask again
                answer = flight.answer
            if answer is None:
                break
            latency = (self._clock() - started) * 1000
            if on_delta is not None:
                on_delta(answer.text)
            await self._call_log.record(row, answer.prompt_tokens, answer.completion_tokens, latency,
                                        cached=True)
            return ChatResult(answer.text, answer.prompt_tokens, answer.completion_tokens, True,
                              answer.finish_reason, latency, key)

        # The answer is shared once committed (the block's end): a caller arriving later finds it cached.
        tries = _Tries(whole=on_delta is None)
        try:
            return await self._chat_flying(key, row, payload, on_delta, check, cache_length, tries, stale)
        finally:
            self._owes(tries, False)   # (answered and cached, or failed: ``drain``)

    async def _chat_flying(self, key: str, row: dict, payload: dict,
                           on_delta: Callable[[str], None] | None,
                           check: Callable[[Answer], str | None],
                           cache_length: bool, tries: _Tries, stale: bool) -> ChatResult | tuple[str, Answer, bool]:
        """``_chat_once``'s new answer, asked for (``stale``: one cached not to use, which it replaces)."""
        with self._cache.flying(key) as flight:
            started = self._clock()
            try:
                answer, latency = await self._chat_http(payload, on_delta, row["stage"], tries)
            except anyio.get_cancelled_exc_class():
                self._cancelled(row, tries, started, lambda: self._prompt_estimate(payload["messages"]))
                raise
            except GaveUp as e:
                flight.error = e
                self._cancelled(row, tries, started, lambda: self._prompt_estimate(payload["messages"]),
                                why=GAVE_UP)
                raise
            except LLMError as e:
                flight.error = e
                await self._call_log.record(row, 0, 0, 0.0, cached=False, error=str(e))
                raise
            if answer.finish_reason == "content_filter":   # Azure's, and some gateways'
                flight.error = LLMOutputError(
                    f"the provider's content filter stopped {payload['model']}'s answer (stage "
                    f"{row['stage']}); the same request is stopped again, so it is not retried in this run (each run "
                    "asks once): "
                    "change the deployment's content filter, rephrase, or use another model")
                await self._call_log.record(row, answer.prompt_tokens, answer.completion_tokens, latency,
                                            cached=False, error=str(flight.error), unusable=True)
                raise flight.error
            problem = check(answer)
            self._tried("usable" if problem is None else "cut_off" if problem in CUT_OFFS else "unusable")
            cacheable = problem is None and (cache_length or answer.finish_reason != "length")
            put = self._cache.put_answer(key, row["model"], answer, replace=stale) if cacheable else None
            await self._call_log.record(row, answer.prompt_tokens, answer.completion_tokens, latency,
                                        cached=False, error=problem, unusable=problem is not None, put=put)
            if cacheable:
                flight.answer = answer
        if problem is not None:
            return problem, answer, tries.estimated
        return ChatResult(answer.text, answer.prompt_tokens, answer.completion_tokens, False,
                          answer.finish_reason, latency, key, tries.estimated)

    def _prompt_estimate(self, messages: list[dict]) -> int:
        return count_message_tokens(messages, self.encoding)

    async def _chat_http(self, payload: dict, on_delta: Callable[[str], None] | None,
                         stage: str = "", tries: _Tries | None = None) -> tuple[Answer, float]:
        """The answer and its latency; ``tries`` follows its tries (``_attempt_in_slot``)."""
        messages = payload["messages"]
        tries = _Tries() if tries is None else tries
        # Counting tokens costs time; do it only for the token limiter or when usage is missing.
        prompt_tokens = self._prompt_estimate(messages) if self._tpm is not None else -1
        shown = [""]  # the answer (thinking left out) handed to on_delta, across retries
        unmarked: list[str] = []   # the texts of this call's streams that ended unmarked

        async def attempt() -> tuple[Answer, float]:
            tries.next()
            self._owes(tries, True)
            try:
                return await attempt_owed()
            except BaseException:
                self._owes(tries, False)   # (no answer to keep: ``drain``)
                raise

        async def attempt_owed() -> tuple[Answer, float]:
            try:
                if on_delta is None:
                    answer, latency = await self._post_chat(payload, stage, tries)
                else:
                    answer, latency = await self._stream_chat(payload, on_delta, shown, stage, unmarked, tries)
            except Retryable as e:
                tries.failed(e)
                raise
            # Counted here what the server did not say, before ``_settle`` books it: a server
            # that says no usage (llama.cpp, some vLLM versions, a stream whose server ignores
            # stream_options) left the request's booking as it was, a short answer's guess kept
            # booked for a minute and a long answer taken as the guess.
            if answer.prompt_tokens < 0:
                answer.prompt_tokens = prompt_tokens if prompt_tokens >= 0 else self._prompt_estimate(messages)
                tries.estimated = True
            if answer.completion_tokens < 0 or (answer.completion_tokens == 0 and answer.text):
                # (the thinking is paid for too: in the text, or streamed apart from it)
                answer.completion_tokens = count_tokens("".join(tries.pieces) or answer.text, self.encoding)
                tries.estimated = True
            return answer, latency

        def streamed() -> int:
            """The tokens of the try under way that ended without an answer (cut short, timed
            out, cancelled): what its stream said, else its prompt and the pieces it streamed."""
            prompt, completion = read_usage(tries.usage)
            if prompt >= 0 and completion >= 0:
                return prompt + completion
            if not tries.pieces:
                return 0
            return max(prompt, prompt_tokens) + count_tokens("".join(tries.pieces), self.encoding)

        model = payload["model"]
        spent = [0, 0]   # tries, kept across the askings again without a refused parameter
        while True:
            sent = sendable(self.settings.api_base, payload)
            most = sent.get("max_tokens") or sent.get("max_completion_tokens")
            expected = most or self._expected_completion()
            # Before any answer, a guess: its answer may be as long as its prompt (the simulator's
            # extraction answers 530 tokens to 1,150), which later requests wait to learn (``_admit``).
            risk = max(0, prompt_tokens - expected) if not most and not self._answers else 0
            try:
                answer, latency = await self._retrying(self.chat_url, model, prompt_tokens + expected,
                                                       attempt, spent, risk=risk, guess=0 if most else expected,
                                                       streamed=streamed)
                break
            except Refused as e:
                # (Calls under way when the first refusal came are refused too: each asks again.)
                log.debug("%s refused %s (HTTP %s: %s); asking again without it", model, e.param,
                          e.status, e.message)
                leave_out(self.settings.api_base, model, e.param)
        answer.text = self._answer_text(answer.text, payload["model"])
        self._answers += 1
        self._answer_tokens += answer.completion_tokens
        return answer, latency

    def refuses(self, model: str, param: str) -> bool:
        """Whether ``model`` is known to refuse the request parameter ``param`` (``model_quirks``)."""
        return refuses(self.settings.api_base, model, param)

    def _answer_text(self, text: str, model: str) -> str:
        """``text`` without its reasoning block (``split_reasoning``), noting a model that thinks."""
        answer, tag = split_reasoning(text)
        if tag is not None:
            thinks_aloud(model, tag, self.thinking)
        return answer

    def _expected_completion(self) -> int:
        if not self._answers:
            return _COMPLETION_GUESS
        return max(1, round(self._answer_tokens / self._answers))

    async def _post_chat(self, payload: dict, stage: str = "",
                         tries: _Tries | None = None) -> tuple[Answer, float]:
        started = self._clock()
        request = msgspec.json.encode(sendable(self.settings.api_base, payload))
        # (streamed in, to say a try cut off while its answer was arriving: ``arriving``)
        async with self._http.stream("POST", self.chat_url, content=request, timeout=request_timeout(),
                                     extensions=tries.extensions() if tries is not None else None) as resp:
            arriving(streamed=False)
            await resp.aread()
        self._check_status(resp, self.chat_url, payload["model"], stage)
        body = self._replies.json(resp)
        latency = (self._clock() - started) * 1000
        answer = chat_answer(body, resp, self._replies.secrets)
        if tries is not None and (thinking := answer_thinking(body)):
            tries.pieces = [answer.text, *thinking]   # (counted with it when no usage is said)
        return answer, latency

    async def _stream_chat(self, payload: dict, on_delta: Callable[[str], None],
                           shown: list[str], stage: str = "",
                           unmarked: list[str] | None = None,
                           tries: _Tries | None = None) -> tuple[Answer, float]:
        """One streamed attempt. Its answer, thinking left out, is passed on as it comes; after a
        retry, only the part beyond what was shown, while it says what was shown. A retry whose
        answer differs (a model that samples, or thinks) is shown whole after a line saying the
        answer starts over: its new end was spliced onto the old beginning.

        A stream that ends with neither a ``finish_reason`` nor ``[DONE]`` was cut short, and is
        asked again, unless the server is one that ends every stream so: the same text twice
        in one call (``unmarked``: this call's earlier such texts) says it is, and from then on
        its streams are taken as they end (``model_quirks.ends_unmarked``). ``tries``: the call's, told that the
        request went out and each piece of the answer, for the row of a call cancelled midway."""
        payload = {**payload, "stream": True, "stream_options": {"include_usage": True}}
        limit = payload.get("max_tokens")   # pieces are about a token each
        started = self._clock()
        parts: list[str] = []
        paid = tries.pieces if tries is not None else []   # ... and of thinking too, as they come
        thought = 0   # pieces of thinking streamed apart from the answer (``replies.THINKING_KEYS``)
        seen = ""   # this attempt's answer so far, thinking left out
        own = False   # what was shown is this attempt's answer

        def show(piece: str) -> None:
            nonlocal seen, own
            seen += piece
            before = shown[0]
            if own or (len(seen) > len(before) and seen.startswith(before)):
                on_delta(seen[len(before):])
                shown[0], own = seen, True
            elif not before.startswith(seen):
                on_delta(f"{RESTARTED}{seen}")
                shown[0], own = seen, True

        visible = ReasoningFilter(show, thinks=payload["model"] in THINKERS)   # (holds self.thinking)
        finish_reason = None
        usage: dict = {}
        done = False
        request = msgspec.json.encode(sendable(self.settings.api_base, payload))
        async with self._http.stream("POST", self.chat_url, content=request,
                                     timeout=request_timeout(),
                                     extensions=tries.extensions() if tries is not None else None) as resp:
            arriving(streamed=True)
            self._reach.answered()
            if resp.status_code != 200:
                await resp.aread()
                self._check_status(resp, self.chat_url, payload["model"], stage)
            if tries is not None:
                tries.sent = True   # (a transport without httpcore's trace says so here)
            events = 0
            other: list[str] = []   # the first lines that are no event: a web page, say
            async for line in resp.aiter_lines():
                if line.startswith("error:"):   # llama.cpp's server sends an error as its own event
                    self._replies.stream_error(line[6:].strip(), payload["model"], stage)
                if not line.startswith("data:"):
                    if not events and len(other) < 200:
                        other.append(line)
                    continue
                events += 1
                data = line[5:].strip()
                if data == "[DONE]":
                    done = True
                    break
                event = self._replies.stream_event(data, payload["model"], stage)
                if event is None:
                    continue
                usage = event_usage(event) or usage
                if tries is not None:
                    tries.usage = usage
                for piece, thinking, finish in event_deltas(event):
                    if piece:
                        parts.append(piece)
                        paid.append(piece)
                        visible.feed(piece)
                        progress()
                    elif thinking:
                        thought += 1
                        paid.extend(thinking)
                        progress()   # a model thinking aloud apart from its answer is not hung
                    if finish:
                        finish_reason = finish
                if limit and finish_reason is None and (
                        len(parts) > 2 * limit + 64 or thought > 2 * (limit + REASONING_ALLOWANCE) + 64):
                    # A server that ignores max_tokens and streams on (an answer, or thinking that
                    # never ends): cut off, as it should be.
                    finish_reason = "length"
                    break
        if not events and (page := html_page("\n".join(other))):
            raise self._replies.web_page(page, "a stream of events", self.chat_url)
        if not events and (body := unstreamed(other)) is not None:
            # The whole answer, as if not streamed (a server that ignores "stream"): paid for, and
            # asked again it is sent whole again; it was taken for a stream cut short, 3 times.
            whole = chat_answer(body, resp, self._replies.secrets)
            parts.append(whole.text)
            paid.extend([whole.text, *answer_thinking(body)])
            visible.feed(whole.text)
            finish_reason, usage = whole.finish_reason or "stop", event_usage(body) or usage
        if not done and finish_reason is None:
            text, server = "".join(parts), (self.settings.api_base, payload["model"])
            if not ends_unmarked(*server) and not (text and unmarked is not None and text in unmarked):
                if unmarked is not None:
                    unmarked.append(text)
                raise Retryable("the stream ended before the answer did (truncated)", 200)
            unmarked_seen(*server, self.chat_url)
            finish_reason = "stop"
        visible.flush()
        if not own and seen != shown[0]:   # a retry's whole answer is shorter than what was shown
            on_delta(f"{RESTARTED}{seen}")
            shown[0] = seen
        latency = (self._clock() - started) * 1000
        prompt_tokens, completion_tokens = read_usage(usage)
        return Answer(text="".join(parts), finish_reason=finish_reason,
                       prompt_tokens=prompt_tokens, completion_tokens=completion_tokens), latency

    # -- the key -----------------------------------------------------------------------------
    async def check_key(self) -> None:
        """Asks ``GET {api_base}/models`` once, which costs no tokens, and raises what a chat call
        would (``Replies.check_status``) when it answers 401 or 403: a watch of a folder that needs
        no call found a wrong key (or password in api_base) only at the first change, maybe hours
        later. Any other outcome says nothing: no answer (the first call says the outage), a 404
        (Azure's deployments and some servers list no models), a 5xx, a page that is not JSON, a
        refusal of the listing alone (``listing_refused``: a restricted key may chat, not list).
        One try, under a slot and the limits (a provider counts it), as a chat try is."""
        try:
            resp = await self._attempt(0, lambda: self._http.get(self.models_url),
                                       self.settings.request_timeout_s)
        except (Retryable, _Silent, _Hopeless):
            return
        if resp.status_code in (401, 403) and not listing_refused(provider_message(resp)) \
                or resp.status_code == 407 and self._proxy is not None:   # (the proxy's credentials)
            self._check_status(resp, self.models_url, self.settings.extraction_model)

    # -- the models ---------------------------------------------------------------------------
    async def check_models(self, names: list[str]) -> None:
        """Stops a run before its first call when one of the settings ``names`` (``"summary_model"``
        ...) names a model the endpoint does not serve: found only at that model's first call, a
        run extracted every chunk first (an hour, against Ollama) and then failed at summaries.

        ``GET {api_base}/models`` is asked once (no tokens); a model it lists (``listed``) is
        served. One it does not list is asked once, as small a request as its route takes (a
        paid call, recorded as any: stage ``MODEL_CHECK``; one answered is noted in the index,
        ``MODELS_ANSWERED``, and asked no more by its runs: an unchanged index asks nothing; a
        call's refusal of it as unknown takes the note back, ``_refused_model``), since
        a listing need not hold every name a server serves (llama.cpp serves any name and lists
        one; Gemini lists ``models/...``; aliases): only an answer that the model is unknown (a
        404, or a 400/422 naming it) stops the run; any other answer, an error too, lets it go on
        to fail, if it does, as it would have. Nothing is asked of Azure's deployments (by
        llm.api_version), nor more when the listing fails or is not a list of models."""
        if self.settings.api_version:
            return
        models = {getattr(self.settings, name): name for name in reversed(names) if getattr(self.settings, name)}
        models = {m: n for m, n in models.items() if (self.models_url, m) not in _MODELS_SERVED}
        if not models or self.models_url in _MODELS_UNLISTED:
            return
        ids = await self._listed_models()
        if ids is None:
            _MODELS_UNLISTED.add(self.models_url)
            return
        answered = self._answered_by_name()
        missing = []
        for model, name in models.items():
            if listed(model, ids) or model in answered:
                _MODELS_SERVED.add((self.models_url, model))
            # (one answered by name is found served there; one whose check failed, no answer, a
            # page, an error, is found nothing: the process's next run, a watch's sync, asks again)
            elif (words := await self._refusal_by_name(model, embedding=name == "embedding_model")) \
                    is not None:
                missing.append((model, words))
        if missing:
            raise LLMRequestError(f"{self._unserved(missing, ids)}. Stopped before any work of the run", 404,
                                  every_call=True)

    def _unserved(self, missing: list[tuple[str, str]], ids: set[str]) -> str:
        """The line of the models ``missing`` ((model, the provider's words refusing it) pairs)
        that the endpoint refused by name and does not list among ``ids``: each setting naming
        one, the provider's words (Ollama's "try pulling it first" is the fix), what it serves."""
        # (the ids are the server's words too: one holding "\x1b[2J" cleared the terminal; matched
        # as they came, ``listed``, shown safe to print)
        shown = ", ".join(map(one_line, sorted(ids)[:MODELS_SHOWN])) + (f" and {len(ids) - MODELS_SHOWN} more"
                                                                    if len(ids) > MODELS_SHOWN else "")
        # (every setting naming the model, as a call's error says it: one fixed at a time stopped
        # again; none for a library's call of a model no setting names: "llm.*_model" is no setting)
        said = "; ".join(
            f"{' / '.join(keys) + ' = ' if (keys := model_settings(self.settings, model)) else ''}{model!r}"
            for model, _ in missing)
        words = [f"{model!r}: {why}" if len(missing) > 1 else why for model, why in missing if why]
        return (f"unknown model: {said}: the endpoint does not serve {'them' if len(missing) > 1 else 'it'} "
                f"(not among the models {self.models_url} lists: {shown}, and refused by name"
                f"{': ' + '; '.join(words) if words else ''}); give a model it serves, or check "
                f"{self._replies.setting}")

    async def _refused_model(self, error: LLMRequestError, model: str) -> LLMRequestError:
        """``error``, a call's refusal of ``model`` as unknown ("unknown model ..."), said as
        ``check_models`` says it (what the endpoint lists beside it) when its listing leaves the
        model out; else ``error`` as it is. For a command that calls no ``check_models`` before
        its first call (``ask``: a GET /models on every question, for a setting that is nearly
        always right): the listing (a GET /models, no tokens and no ``llm_calls`` row; no request
        by name) is asked only after such a refusal, once a client."""
        if not str(error).startswith("unknown model"):
            return error
        if error.status == 404 and not of_model(error.said, model, error.code):
            # (words of no model, "Not Found", "404 page not found": a path's, maybe, as the check by
            # name takes them; said as they are, no "refused by name", the note of an answer kept)
            return error
        # Found served before (a check by name answered, noted in the index; this process's
        # check): refused now, so the next run (a watch's next sync) checks it again, and stops
        # before its work, not at this model's first call (at summaries, an hour in).
        _MODELS_SERVED.discard((self.models_url, model))
        await self._forget_answered_by_name(model)
        if self.settings.api_version or self.models_url in _MODELS_UNLISTED:
            return error
        async with self._listing_lock:   # (a global search's ratings all refused at once: one listing)
            if self._listing is False:
                self._listing = await self._listed_models()
        ids = self._listing
        if ids is None:
            _MODELS_UNLISTED.add(self.models_url)
            return error
        if listed(model, ids):
            return error   # (listed and refused: not a name to fix; the call's own words say more)
        return LLMRequestError(self._unserved([(model, error.said)], ids), error.status, every_call=True,
                               said=error.said)

    def _answered_by_name(self) -> set[str]:
        """The models this endpoint answered when an earlier run asked them by name, as its index
        says (``MODELS_ANSWERED``)."""
        store = self._call_log.store
        noted = _noted(store.get_meta(MODELS_ANSWERED) if store is not None else None)
        return noted.get(self.models_url, set())

    def _note_answered_by_name(self, model: str) -> Callable[[Store], None]:
        """Notes in the index, with the row of the request that asked it, that this endpoint
        answered ``model`` asked by name."""
        def put(store: Store) -> None:
            noted = _noted(store.get_meta(MODELS_ANSWERED))
            noted[self.models_url] = noted.get(self.models_url, set()) | {model}
            _put_noted(store, noted)
        return put

    async def _forget_answered_by_name(self, model: str) -> None:
        """Takes ``model`` out of the models this endpoint answered by name (``MODELS_ANSWERED``),
        the index's note, when it holds it. A write the index could not take (``UNWRITTEN``:
        another program's lock, a full disk, a read-only index) is let go (said at debug): the
        refusal it follows is what the caller must see, and a later run's call refused so takes
        the note back then."""
        store, writer = self._call_log.store, self._call_log.writer
        if store is None or model not in self._answered_by_name():
            return

        def drop(store: Store) -> None:
            noted = _noted(store.get_meta(MODELS_ANSWERED))
            noted[self.models_url] = noted.get(self.models_url, set()) - {model}
            _put_noted(store, noted)
        try:
            if writer is not None:
                await writer.run(drop)
            elif not store.readonly:
                with store.transaction():
                    drop(store)
        except UNWRITTEN as e:
            if not unwritten(e):
                raise   # (a bug, not the index refusing a write)
            log.debug("%s stays noted answered by name at %s (the index could not be written: %s)", model,
                      self.models_url, e)

    async def _listed_models(self) -> set[str] | None:
        """The ids ``GET {api_base}/models`` lists (None: no listing: an error, no answer, a page
        that is not OpenAI's list). One try, under a slot and the limits (``check_key``)."""
        timeout = min(self.settings.request_timeout_s, MODELS_TIMEOUT_S)
        try:
            resp = await self._attempt(0, lambda: self._http.get(self.models_url, timeout=timeout), timeout)
        except (Retryable, _Silent, _Hopeless):
            return None
        if resp.status_code != 200:
            return None
        try:
            data = msgspec.json.decode(resp.content)
        except (msgspec.DecodeError, RecursionError):
            return None
        data = data.get("data", data.get("models")) if isinstance(data, dict) else None
        if not isinstance(data, list):
            return None
        ids = {str(item["id"]) for item in data if isinstance(item, dict) and isinstance(item.get("id"), str)}
        return ids or None

    async def _refusal_by_name(self, model: str, *, embedding: bool) -> str | None:
        """The endpoint's refusal of ``model`` asked by name (one try of the smallest request of
        its route: a chat of one word with max_tokens 1, or an embedding of one word): the
        provider's words ("" for none) when it answers that it does not serve the model; None for
        anything else, an answer or a failed check. Only an answer marks ``model`` served
        (``_MODELS_SERVED``, ``MODELS_ANSWERED``)."""
        if embedding:
            url, body = self.embeddings_url, {"model": model, "input": ["x"]}
        else:
            url, body = self.chat_url, {"model": model, "messages": [{"role": "user", "content": "x"}],
                                        "max_tokens": 1}
        timeout = min(self.settings.request_timeout_s, MODELS_TIMEOUT_S)
        # A call like any (a provider bills it: its prompt, and a chat's one token), so an ``llm_calls``
        # row of stage MODEL_CHECK: `status` and the benches count what the run paid.
        key = embedding_key(model, "x") if embedding else \
            cache_key(model, body["messages"], {"max_tokens": 1}, "", "")
        row = {"run_id": self.run_id, "stage": MODEL_CHECK, "model": model, "prompt": "",
               "prompt_version": "", "cache_key": key}
        started = self._clock()
        try:
            resp = await self._attempt(1, lambda: self._http.post(url, content=msgspec.json.encode(body),
                                                                  timeout=timeout), timeout)
        except (Retryable, _Silent, _Hopeless) as e:
            said = f"{url}: no answer to the check of {model}" + (f": {e}" if str(e) else "")
            await self._call_log.record(row, 0, 0, (self._clock() - started) * 1000, cached=False, error=said,
                                        apart=True)
            return None
        latency = (self._clock() - started) * 1000
        answer = read_error(resp)
        whole = hidden(answer.said, self._replies.secrets)   # (a server quoting the key back)
        said = one_line(whole)
        if resp.status_code == 404:   # (of the model, not of the route: "no such route", a page, are not)
            unknown = not answer.page and of_model(whole, model, answer.code)
        else:
            unknown = resp.status_code in (400, 422) and unknown_model(answer.code, whole, model)
        if resp.status_code != 200:
            # (a refusal of the model stops the run, a failed call of it; any other error is the
            # check's alone, no call of the run's work: ``CallLog.record``'s apart)
            await self._call_log.record(row, 0, 0, latency, cached=False, apart=not unknown,
                                        error=f"{url}: HTTP {resp.status_code}{f': {said}' if said else ''}")
            return said if unknown else None
        try:
            usage = msgspec.json.decode(resp.content)
        except (msgspec.DecodeError, RecursionError):
            usage = None
        answer = "data" if embedding else "choices"   # (what a call of its route reads its answer from)
        if not isinstance(usage, dict) or not isinstance(usage.get(answer), list) or not usage[answer]:
            # Not the API's answer (a proxy's sign-in page; an error object sent with 200, which a
            # chat call says "answer without choices"): an error, as a call's is, not a paid call
            # answered and noted (a watch read it as the endpoint answering, ``watch_lines.answered``,
            # and every later run of the index asked the model no more).
            page = html_page(resp.text)
            if page:
                said = str(self._replies.web_page(page, "JSON", url))
            elif isinstance(usage, dict):   # (its words as an error status's: hidden, one line)
                said = f"{url}: HTTP 200: the answer to the check of {model} holds no {answer}{aside(said)}"
            else:
                said = f"{url}: HTTP 200: the answer to the check of {model} was not the API's JSON"
            await self._call_log.record(row, 0, 0, latency, cached=False, error=said, apart=True)
            return None   # (the run's first call says it, as it would have)
        prompt, completion = read_usage(usage.get("usage"))
        if prompt < 0:   # (no usage said: counted here, as a chat call's is)
            prompt = count_tokens("x", self.encoding) if embedding else count_message_tokens(body["messages"],
                                                                                            self.encoding)
        completion = 0 if embedding else completion if completion >= 0 else 1   # (the one token asked for)
        # (an answer of the API's, not a page: asked by name no more by a run of this index, nor
        # by this process's)
        await self._call_log.record(row, prompt, completion, latency, cached=False,
                                    put=self._note_answered_by_name(model))
        _MODELS_SERVED.add((self.models_url, model))
        return None   # (answered: served)

    # -- embeddings --------------------------------------------------------------------------
    async def embed(self, texts: list[str], *, model: str,
                    stage: str = "embed") -> list[list[float]]:
        """The embedding of each text, from the cache when possible, others in batches of 64."""
        keys = [embedding_key(model, t) for t in texts]
        vectors: dict[str, list[float]] = {}
        todo: dict[str, str] = {}
        started = self._clock()
        for key, text in zip(keys, texts, strict=True):
            if key in vectors or key in todo:
                continue
            vector = self._cache.vector(key)
            if vector is not None:
                vectors[key] = vector
            else:
                todo[key] = text
        if vectors:
            hit_keys = list(vectors)
            tokens = sum(count_tokens(t, self.encoding) for k, t in zip(keys, texts, strict=True)
                         if k in vectors)
            row = {"run_id": self.run_id, "stage": stage, "model": model, "prompt": "",
                   "prompt_version": "", "cache_key": batch_key(hit_keys)}
            await self._call_log.record(row, tokens, 0, (self._clock() - started) * 1000,
                                        cached=True)

        items = list(todo.items())
        errors: list[LLMError] = []

        async def run_batch(batch: list[tuple[str, str]]) -> None:
            try:
                vectors.update(await self._embed_batch(batch, model, stage))
            except LLMError as e:
                errors.append(e)

        async with anyio.create_task_group() as tg:
            for i in range(0, len(items), EMBED_BATCH):
                tg.start_soon(run_batch, items[i:i + EMBED_BATCH])
        if errors:
            if isinstance(errors[0], LLMRequestError):
                raise await self._refused_model(errors[0], model)
            raise errors[0]
        return [vectors[k] for k in keys]

    async def _embed_batch(self, batch: list[tuple[str, str]], model: str,
                           stage: str) -> dict[str, list[float]]:
        texts = [t for _, t in batch]
        payload = {"model": model, "input": texts}
        counted = sum(count_tokens(t, self.encoding) for t in texts)
        row = {"run_id": self.run_id, "stage": stage, "model": model, "prompt": "",
               "prompt_version": "", "cache_key": batch_key([k for k, _ in batch])}

        tries = _Tries()   # for the row of a call cancelled midway: its inputs went out, and are paid

        async def attempt() -> tuple[tuple[list[list[float]], int], float]:
            tries.next()
            started = self._clock()
            resp = await self._http.post(self.embeddings_url, content=msgspec.json.encode(payload),
                                         timeout=request_timeout(), extensions=tries.extensions())
            try:
                self._check_status(resp, self.embeddings_url, model, stage)
            except Retryable as e:
                tries.failed(e)
                raise
            body = self._replies.json(resp)
            data = body.get("data") if isinstance(body, dict) else None
            if not isinstance(data, list) or len(data) != len(texts):
                raise Retryable(f"expected {len(texts)} embeddings, got "
                                f"{len(data) if isinstance(data, list) else 'none'}", 200)
            tokens, _ = read_usage(body.get("usage"))
            return (read_embeddings(data), tokens), (self._clock() - started) * 1000

        began = self._clock()
        try:
            (embeddings, tokens), latency = await self._retrying(
                self.embeddings_url, model, counted, attempt)
        except anyio.get_cancelled_exc_class():
            self._cancelled(row, tries, began, lambda: counted)
            raise
        except GaveUp:
            self._cancelled(row, tries, began, lambda: counted, why=GAVE_UP)
            raise
        except LLMError as e:
            await self._call_log.record(row, 0, 0, 0.0, cached=False, error=str(e))
            raise
        self._tried("usable")
        out = {key: vec for (key, _), vec in zip(batch, embeddings, strict=True)}
        await self._call_log.record(row, counted if tokens < 0 else tokens, 0, latency, cached=False,
                                    put=self._cache.put_vectors(model, out))
        return out

    # -- the wire ----------------------------------------------------------------------------
    async def _retrying(self, url: str, model: str, tokens: int,
                        attempt: Callable[[], Any], spent: list[int] | None = None, *, risk: int = 0,
                        guess: int = 0, streamed: Callable[[], int] | None = None) -> Any:
        """``attempt()`` under the slot and the limiters, retried; raises ``LLMError``.

        Every failed try uses up one of ``llm.max_retries``, except a refused connection to an
        endpoint that has answered this client before (a restart): that is retried, at most
        ``REFUSED_WAIT_MAX_S`` apart, until the endpoint answers or has refused every connection
        for ``DOWN_AFTER_S`` (``_never_answered``). This call's own refused tries in a row are
        free for ``DOWN_AFTER_S`` too, so a call refused while other calls get answers ends.

        ``spent`` carries a call's counted and made tries over from an earlier ``_retrying`` of
        it (asked again without a refused parameter): a refusal does not start them afresh.
        ``attempt()`` returns its result and the milliseconds the answer took (``ModelTimeouts.answered``).
        ``risk``: the tokens its answer may use beyond ``tokens`` (``MinuteBudget.holds``); ``guess``:
        those of ``tokens`` booked for an answer of unknown length (no max_tokens sent), given back
        as far as the answer was shorter (``_settle``); ``streamed()``: the tokens a try that ended
        without an answer used, as far as known (``_book_streamed``)."""
        # [tries that used up llm.max_retries, tries in all]
        spent = [0, 0] if spent is None else spent
        statuses: Counter[int | None] = Counter()   # this call's failed tries, by HTTP status
        call = next(self._calls)   # (an id() of a freed object is reused)
        refused_n = 0                 # free refused (or loading) tries in a row
        streak: float | None = None   # when they began
        waited = 0.0   # seconds this call's tries timed out after
        hung = False   # ... as long as a dead server's tries took before the timeouts grew
        cut = False    # ended early: another call found the server silent (``EndpointReach.silent``)

        async def one() -> Any:
            nonlocal refused_n, streak, hung, waited, cut
            spent[1] += 1
            timeout = self._timeouts.of(model)
            try:
                result = await self._attempt(tokens, attempt, timeout, risk, guess, streamed)
            except _Silent:
                raise self._silent_error(url) from None
            except _Hopeless:
                raise self._hopeless_error(url) from None
            except Retryable as e:
                self._tried(failure(e), e.status, e.fix)
                if not e.loading:   # (a model loading is waited for apart)
                    statuses[e.status] += 1
                    self.failed_statuses[e.status] += 1
                    self.failed_fixes[e.fix] += 1
                if e.timed_out:
                    # The model's next tries (this call's and every other's) get twice the time,
                    # up to TIMEOUT_GROWTH_MAX times the setting. A call whose timed-out tries add
                    # up to 1 + 2 + 4 times the setting ends: a server that does not answer.
                    waited += timeout
                    hung = waited >= self._timeouts.hang_s()
                    self._timeouts.timed_out(model, timeout)
                    # Tries of any call timing out, and no answer to any, for as long as one
                    # call's would take to end: the server hangs (``_attempt``). A slow server
                    # answering other calls meanwhile does not.
                    self._reach.timed_out(call, timeout, self._timeouts.hang_s())
                    cut = self._reach.silent and not hung
                    if cut and self._probe is not None:   # (a try of this call begun before it)
                        await self._probe.wait()   # a try checks whether it is back: wait and see
                        cut = self._reach.silent and not hung
                if (e.refused and self._reach.reached or e.loading) and self.settings.max_retries > 0:
                    now = time.monotonic()   # (max_retries 0: never retry)
                    streak = now if streak is None else streak
                    e.refused_for = now - streak
                    e.free = e.refused_for < (LOADING_MAX_S if e.loading else DOWN_AFTER_S)
                if e.free:
                    refused_n += 1
                    e.tries = refused_n
                else:
                    spent[0] += 1
                    e.tries = spent[0]
                    if not (e.refused or e.loading):
                        refused_n, streak = 0, None
                raise
            self._timeouts.answered(model, result[1] / 1000)
            return result

        def stop(state: RetryCallState) -> bool:
            return (spent[0] >= self.settings.max_retries + 1 or hung or cut or self.hopeless
                    or self._never_answered(state))

        retrying = AsyncRetrying(
            stop=stop,
            wait=self._wait,
            retry=retry_if_exception_type(Retryable),
            sleep=self._backoff,
            before_sleep=self._log_retry(url),
            reraise=True,
        )
        try:
            async for state in retrying:
                with state:
                    return await one()
        except Retryable as e:
            attempts = spent[1]
            if cut:
                raise self._silent_error(url) from None
            if self.hopeless:
                raise self._hopeless_error(url) from None
            if e.refused and self._proxy is not None and not tls_refused(url, e.detail, self._replies.setting) \
                    and (not self._reach.reached or self._reach.down_s() >= DOWN_AFTER_S):
                # (every connection made is to the proxy: nothing is known of the server behind it)
                raise LLMUnavailableError(proxy_down(self._proxy, url, e.detail)) from None
            if e.refused and not self._reach.reached:
                setting = self._replies.setting
                # (a TLS failure, even of an endpoint that answered before, is the address or trust to fix)
                if self._answered_at is None or tls_refused(url, e.detail, setting):
                    raise LLMUnavailableError(not_answering(url, e.detail, setting)) from None
                raise LLMUnavailableError(stopped_answering(url, e.detail, setting, self._answered_at, self._then),
                                          run_again=bool(self._then)) from None
            if e.refused and self._reach.down_s() >= DOWN_AFTER_S:
                raise LLMUnavailableError(
                    f"{url} answered earlier but has refused every connection for "
                    f"{self._reach.down_s():.0f} s ({e.detail}); "
                    + ("its host name could not be looked up: check that this machine is online (its network and DNS)"
                       if name_unknown(url, e.detail, self._replies.setting) else "the server stopped: start it again")
                    + (f", {self._then}" if self._then else ""), run_again=bool(self._then)) from None
            raise LLMUnavailableError(
                f"{url} (model {model}) failed {counted(attempts, 'time')}, last: {e.detail}; "
                f"{self._call_advice(e, statuses)}") from None
        raise AssertionError("unreachable")

    def _call_advice(self, e: Retryable, statuses: Counter[int | None]) -> str:
        """What to do about a call whose tries all failed, the last with ``e`` (``statuses``: the
        call's failed tries by HTTP status). Answered only with HTTP errors and requests to wait
        (a proxy whose server behind it is down: a bare 503 to everything), it says that server
        answers only so, and that more retries help only a server failing now and then
        (``MORE_RETRIES``; llm.give_up_after_s ends calls sooner, never later: it is no help to
        this one). Through the environment's proxy, it names the proxy
        when the last try got no answer or one a proxy gives of a server it cannot reach (502, 503:
        an http:// endpoint's; an https:// one's come from behind the proxy's tunnel).
        Whether more retries would help is said in one wording (``MORE_RETRIES``), whatever the
        client's other calls got: the advice of a failure is its own tries', not the call order's
        (one run said "raising llm.max_retries only waits longer" of a call failed before any was
        answered, "or raise llm.max_retries" of the same failure after; daed40a's rule, whether
        the server answered a try begun after one failed, told them so too)."""
        setting = self._replies.setting
        limited = self.settings.requests_per_minute > 0
        if e.fix:   # (what its last try's error says to change: llama.cpp's KV cache full, not the server down)
            return advice(e, setting, limited)
        own = answering(self._proxy, self.chat_url)   # (an https:// server's statuses come through its tunnel)
        said = only_errors(statuses, setting, own) if self.settings.max_retries > 0 else None
        suspect = self._proxy if e.status is None else own if e.status in PROXY_STATUSES else None
        if said is None and suspect is not None:   # (no HTTP answer, or the proxy's own: maybe its fault)
            return f"{advice(e, setting, limited)}; {proxy_failed(self._proxy)}"
        if said is None:
            return advice(e, setting, limited)
        return f"{said}; {MORE_RETRIES}"

    def _tried(self, kind: str, status: int | None = None, fix: str = "") -> None:
        """A try's outcome, told to ``health`` (``fix``: what its error says to change); the tries
        and backoffs under way are cut short once it makes the endpoint ``hopeless``."""
        if self._health.tried(kind, status, fix):
            for scope in list(self._cut_short):
                scope.cancel()

    async def _backoff(self, seconds: float) -> None:
        """A wait (before a retry, for the limits or a pause) cut short once the client is ``hopeless``."""
        with anyio.CancelScope() as scope:
            self._cut_short.add(scope)
            try:
                await anyio.sleep(seconds)
            finally:
                self._cut_short.discard(scope)

    def _hopeless_error(self, url: str) -> LLMUnavailableError:
        """The error of a call ended because every try of the client failed (``hopeless``), the
        proxy they went through named (it may be what fails them)."""
        return self._health.error(url, self._replies.setting, self._then, self._proxy)

    def _proxy_too(self) -> str:
        """What an error about tries that all failed adds of the proxy they went through, if any
        (``proxies.proxy_failed``): it may be what failed them."""
        return proxy_failed(self._proxy) if self._proxy is not None else ""

    async def _attempt(self, tokens: int, attempt: Callable[[], Any], timeout: float, risk: int = 0,
                       guess: int = 0, streamed: Callable[[], int] | None = None) -> Any:
        """One try under a slot and the limits; transport failures become ``Retryable``.

        The try is abandoned as a timeout when it has made no progress for a little more than
        ``llm.request_timeout_s``: httpx's timeout is per read, so a server trickling a byte now
        and then (a keep-alive) would otherwise hold the call forever. Progress is the whole
        answer, or for a streamed one each piece of its text (``try_timeouts.progress``): a slow server
        streaming a long answer is not cut off. The little more lets httpx's own timeouts
        (connecting, the first byte) come first and say what they are. A streamed answer that runs on past
        twice its ``max_tokens`` pieces (a server that ignores it) ends as cut off. Waiting for
        the slot and the limits is not part of it.

        A try that never reached the server gives its rate budget back, so retrying a refused
        connection waits for its backoff only. ``timeout`` is the try's (``_retrying`` grows it
        after a timeout)."""
        allowance = timeout + min(1.0, timeout)   # httpx's own timeouts (at ``timeout``) come first
        while True:
            await self._probe_outcome()
            async with self._slots:
                if self._reach.silent and self._probe is not None:
                    continue   # a try began checking while this one waited for a slot: wait for it
                return await self._attempt_in_slot(tokens, attempt, timeout, allowance, risk, guess, streamed)

    async def _probe_outcome(self) -> None:
        """Once tries of more than one call have timed out for 1 + 2 + 4 timeouts with no answer
        to any call (``_retrying``), the server hangs: one try at a time finds out whether it is
        back, and the calls that come meanwhile wait for it. If it timed out too, they fail at
        once (each paid the whole hang, batch after batch: a run of 60 documents took 5 minutes
        at a 1 s timeout, 10 hours at the default); if it was answered, they go on (they failed
        as well, so a run that saw the server come back still ended with failed items)."""
        probe = self._probe
        if self._reach.silent and probe is not None:
            await probe.wait()
            if self._reach.silent:
                raise _Silent

    async def _attempt_in_slot(self, tokens: int, attempt: Callable[[], Any], timeout: float,
                               allowance: float, risk: int = 0, guess: int = 0,
                               streamed: Callable[[], int] | None = None) -> Any:
        """``_attempt``'s try, once it holds a slot. A try that ends with neither an answer
        (``_settle``) nor its budget given back books what it streamed (``_book_streamed``)."""
        if self.hopeless:
            raise _Hopeless
        probe = None
        if self._reach.silent:   # at the setting's time, not the grown one: each stage paid 4 timeouts
            probe = self._probe = anyio.Event()   # to learn it still hangs
            timeout = min(timeout, self.settings.request_timeout_s)
            allowance = timeout + min(1.0, timeout)
        tickets: list[tuple[MinuteBudget, list[float]]] = []
        booked = False   # the tickets settled with an answer, or given back
        try:
            tickets = await self._admit(tokens, risk)
            if self.hopeless:   # (while it waited for the limits or a pause)
                self._give_back(tickets)
                booked = True
                raise _Hopeless
            if self._holding:   # (drained: not sent, until its caller cancels it; ``drain``)
                self._give_back(tickets)
                booked = True
                await anyio.sleep_forever()
            try:
                with anyio.move_on_after(allowance) as deadline:
                    self._cut_short.add(deadline)
                    try:
                        with try_under_way(deadline, allowance, timeout) as arrival:
                            result = await attempt()
                            self._settle(tickets, result, guess)
                            booked = True
                            return result
                    finally:
                        self._cut_short.discard(deadline)
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as e:
                self._give_back(tickets)
                booked = True
                if isinstance(e, httpx.ConnectError):
                    self._reach.refused()
                    self.lookups_failing = lookup_failed(reason(e))
                    raise Retryable(f"connection failed ({reason(e)})", refused=True) from None
                raise Retryable(f"connection failed ({reason(e)})", unconnected=True) from None
            except httpx.TimeoutException:   # (per read: the headers may have come, then no more)
                raise Retryable(timed_out_said(arrival, stalled=True), timed_out=True) from None
            except httpx.ProxyError as e:
                if self._proxy is None or not str(e).startswith("407"):
                    raise Retryable(f"connection failed ({reason(e)})") from None
                # An https:// endpoint's tunnel refused by the proxy for its credentials: as a 401,
                # every call gets the same (it was retried, and said "check that the server is running").
                self._give_back(tickets)
                booked = True
                raise LLMRequestError(proxy_refused(self._proxy, one_line(e)), 407,
                                      every_call=True) from None
            except httpx.TransportError as e:
                raise Retryable(f"connection failed ({reason(e)})") from None
            # Only the deadline's own cancellation ends up here; a cancellation from outside
            # goes on through the scope.
            assert deadline.cancelled_caught
            if self.hopeless:
                raise _Hopeless
            raise Retryable(timed_out_said(arrival), timed_out=True)
        finally:
            if not booked and tickets and streamed is not None and self._tpm is not None:
                self._book_streamed(tickets, streamed())
            self._release(tickets)
            if probe:
                probe.set()
                if self._probe is probe:
                    self._probe = None

    def _never_answered(self, state: RetryCallState) -> bool:
        """Stop early when connections are refused and the endpoint never answered this client,
        or has refused every connection for ``DOWN_AFTER_S`` since it last answered."""
        exc = state.outcome.exception() if state.outcome else None
        if not (isinstance(exc, Retryable) and exc.refused):
            return False
        if not self._reach.reached:
            return state.attempt_number >= REFUSED_ATTEMPTS
        return self._reach.down_s() >= DOWN_AFTER_S

    @property
    def reached(self) -> bool:
        """Whether the endpoint has given any HTTP answer to this client (errors included)."""
        return self._reach.reached

    @property
    def proxy(self) -> Proxy | None:
        """The environment's proxy its requests go through (``proxies.proxy_for``), if any."""
        return self._proxy

    @property
    def refusing(self) -> bool:
        """Whether every connection has been refused since some try (none answered since)."""
        return self._reach.refusing

    def _silent_error(self, url: str) -> LLMUnavailableError:
        """The error of a call ended because the server stopped answering (``_retrying``), the
        proxy its tries went through named: one that holds every request is as silent."""
        return self._reach.silent_error(url, self.settings.request_timeout_s, self._then, self._proxy_too())

    async def _admit(self, tokens: int, risk: int = 0) -> list[tuple[MinuteBudget, list[float]]]:
        """Wait out a server-requested pause and until the request fits both minute budgets,
        then take its share of each; returns the tickets that give it back. A request that fits
        the token budget only if the answers under way use no more than booked (``risk``: what
        they, and its own, may use beyond it) waits for them to be settled, not for the window:
        with 256 answer tokens guessed before any answer, the first minute of five synth_small
        documents at llm.tokens_per_minute 6,000 went over it (the simulator refused a request)."""
        wanted = [(budget, amount) for budget, amount in ((self._rpm, 1), (self._tpm, tokens))
                  if budget is not None]
        async with self._admission:  # first come, first served: a big request is not starved
            while True:
                delay = self._paused_until - time.monotonic()
                limiting = None   # the budget the wait is for, unless the server's pause is longer
                waits = [(budget, budget.wait_s(amount)) for budget, amount in wanted]
                for budget, wait in waits:
                    if wait > delay:
                        delay, limiting = wait, budget
                if self.hopeless:   # (``_attempt_in_slot`` ends the try)
                    break
                if delay <= 0 and self._tpm is not None and self._tpm.holds(tokens, risk):
                    await self._until_released()
                    continue
                if delay <= 0:
                    break
                for budget, wait in waits:
                    if wait > 0:
                        budget.waited_s += delay
                if delay >= WAIT_NOTICE_S:
                    self._notice("wait", f"waiting {delay:.0f} s: " + (
                        f"{limiting.setting} ({limiting.limit:,}) is used up for this minute; raise it to "
                        "your provider's limit, or set it to 0 for a server of your own"
                        if limiting is not None else "the server asked for a pause"))
                await self._backoff(delay)
            tickets = [(budget, budget.take(amount)) for budget, amount in wanted]
            if self._tpm is not None:
                self._tpm.risk(tickets[-1][1], risk)
            return tickets

    async def _until_released(self) -> None:
        """Waits for a request under way to end (``_release``), cut short once ``hopeless``."""
        with anyio.CancelScope() as scope:
            self._cut_short.add(scope)
            try:
                await self._released.wait()
            finally:
                self._cut_short.discard(scope)

    def _release(self, tickets: list[tuple[MinuteBudget, list[float]]]) -> None:
        """A try has ended: what its answer might have used beyond its booking is known (settled)
        or no more; requests held for it (``_admit``) look again."""
        for budget, ticket in tickets:
            budget.release(ticket)
        if tickets:
            self._released.set()
            self._released = anyio.Event()

    def _settle(self, tickets: list[tuple[MinuteBudget, list[float]]], result: Any, guess: int = 0) -> None:
        """A chat answer's tokens as the server counted them (those it did not say, as counted
        here: ``_chat_http``), when more than its request booked,
        are taken from the token budget (``MinuteBudget.settle``): with llm.tokens_per_minute
        6,000, the first calls of synth_small booked the answers' mean guessed and used 6,953
        tokens in their minute, and the next minute was booked full again. When fewer, what
        ``guess`` (the answer tokens booked without max_tokens) booked beyond the answer is
        given back: five synth_small documents (48,588 tokens, 57,536 booked) waited a minute at
        llm.tokens_per_minute 57,300 for tokens booked and never used (64 s; now 5 s, 57,042 booked:
        most of the rest is max_tokens of summaries and reports, which OpenAI counts as sent)."""
        answer = result[0] if isinstance(result, tuple) and result and isinstance(result[0], Answer) else None
        if answer is None or answer.prompt_tokens < 0 or answer.completion_tokens < 0:
            return   # (not a chat answer: ``_chat_http``'s tries count what the server did not say)
        completion = answer.completion_tokens
        for budget, ticket in tickets:
            if budget is self._tpm:
                budget.settle(ticket, answer.prompt_tokens + completion, refund=max(0, guess - completion))

    def _book_streamed(self, tickets: list[tuple[MinuteBudget, list[float]]], used: int) -> None:
        """A try that ended without an answer (a stream cut short, a timeout, its call cancelled)
        used ``used`` tokens (``_chat_http``'s count of what it streamed): what is beyond its
        booking is taken from the token budget, as ``_settle`` takes an answer's. The provider
        bills them (what it wrote, sent or not), and they went uncounted: a stream of 3,000
        tokens cut short booked the answers' mean (256 before any answer), and its retry went out
        at once. Nothing of the booking is given back: the provider may have written more than
        came."""
        for budget, ticket in tickets:
            if budget is self._tpm and used > 0:
                budget.settle(ticket, used)

    @staticmethod
    def _give_back(tickets: list[tuple[MinuteBudget, list[float]]]) -> None:
        for budget, ticket in tickets:
            budget.give_back(ticket)

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        retry_after = getattr(exc, "retry_after", None)
        if retry_after is not None:
            return retry_after + random.uniform(0, min(1.0, retry_after * 0.25))
        tries = getattr(exc, "tries", 0) or state.attempt_number
        cap = REFUSED_WAIT_MAX_S if getattr(exc, "free", False) else MAX_BACKOFF_S
        return random.uniform(0, min(cap, self._retry_base_s * 2.0 ** min(tries - 1, 64)))

    def _log_retry(self, url: str) -> Callable[[RetryCallState], None]:
        def before_sleep(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            wait = state.next_action.sleep if state.next_action else 0
            # (a server's sentence keeps one stop: "Sorry about that.; retry" read as two)
            detail = str(getattr(exc, "detail", exc))
            detail = detail[:-1] if detail.endswith(".") and not detail.endswith("..") else detail
            # Nothing listening yet: the error after the last try says so in one line; a warning
            # per concurrent call and try before it (dozens of lines) would only bury it.
            if getattr(exc, "free", False) and exc.loading:
                line = (f"{url}: {detail}; the server is loading its model: waited "
                        f"{exc.refused_for:.0f} s, retry in {wait:.1f} s (for up to "
                        f"{LOADING_MAX_S:g} s)")
            elif getattr(exc, "free", False):
                line = (f"{url}: {detail}; it answered before: this call refused "
                        f"for {exc.refused_for:.0f} s, retry in {wait:.1f} s (until it answers, or "
                        f"has refused every connection for {DOWN_AFTER_S:g} s)")
            else:
                line = (f"{url}: {detail}; retry "
                        f"{getattr(exc, 'tries', 0) or state.attempt_number}/"
                        f"{self.settings.max_retries} in {wait:.1f} s")
            if getattr(exc, "refused", False) and not self._reach.reached:
                log.debug(line)
            else:
                self._notice("retry", line)
        return before_sleep

    def _notice(self, kind: str, line: str) -> None:
        self._notices.say(self.settings.api_base, kind, line)

    def _check_status(self, resp: httpx.Response, url: str, model: str, stage: str = "") -> None:
        """The endpoint answered (``EndpointReach.answered``); an error status raises what it is
        (``Replies.check_status``), a wait it asks for pausing every request of this client."""
        self._reach.answered()
        try:
            self._replies.check_status(resp, url, model, stage)
        except Retryable as e:
            if e.retry_after is not None:
                self._paused_until = max(self._paused_until, time.monotonic() + e.retry_after)
            raise


# Said in a streamed answer when a retry's answer differs from what was already shown.
RESTARTED = "\n\n(the connection was lost and the answer was asked again; it starts over:)\n\n"


__all__ = ["ChatResult", "LLMClient"]
