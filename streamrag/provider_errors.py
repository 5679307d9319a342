"""What a provider's error is, and the one line that tells the user what to do about it.

A failed request is either worth another try (``Retryable``: a rate limit, a server error, a
timeout, an answer that could not be read; its ``fix``, what to do should every try fail so),
a parameter the model does not take (``Refused``: the client asks again without it), or final:
then the message names the setting to change and how (``advice``, ``overflow_advice``,
``crowded_advice``, ``batch_advice``, ``shorter_answer``, ``key_advice``, ``forbidden_reason``,
``web_page``). An error answer's body is decoded once (``read_error``: its words whole, its error
object, its code; ``provider_message``: the words alone); the provider's own words come in one line
of at most ~200 characters (``one_line``), secrets hidden first (``hidden``), an HTML page by its
title (``html_page``). Nothing here sends or waits: it reads a response, an exception or the
settings (and the environment, for where a key or an address came from) and returns words or the
exception to raise; the client decides what to do.
"""

from __future__ import annotations

import html
import os
import re
from base64 import b64encode
from collections.abc import Iterable
from typing import NamedTuple

import httpx
import msgspec

from streamrag.config import LLMSettings, without_secrets
from streamrag.errors import WebPageAnswer
from streamrag.terminal import flat


# The settings naming a chat model, for messages about a model the server does not know.
_MODEL_KEYS = ("extraction_model", "summary_model", "report_model", "rating_model", "answer_model",
               "embedding_model")
# A request longer than the model's context, as OpenAI, vLLM, llama.cpp and others say it.
CONTEXT_OVERFLOW = re.compile(r"context[ _]length|maximum context|context (?:size|window)|\bn_ctx\b|"
                              r"exceeds? the (?:available )?context", re.IGNORECASE)
# llama.cpp's server when its KV cache fills as it decodes (tools/server/server-context.cpp,
# server_context::decode(): llama_decode returns 1 at a batch of one token, so err = "Context size
# has been exceeded.", and send_error(slot, err) to every slot processing, whose prompts it clears;
# send_error's type is ERROR_TYPE_SERVER, which server-common.cpp's format_error_response makes
# HTTP 500 and {"code": 500, "message": err, "type": "server_error"}, a stream's error event alike).
# Its slots share the cache (-c split among -np, or all of it with --kv-unified), so with several
# requests at once the next try usually fits: retried (``Retryable.fix`` says what to change should
# every try fail so). Known by its sentence whole, case as sent, in the message of any 5xx
# (``kv_cache_full``): its own 500, or relayed in another shape by what stands in front of it, whose
# status and error object are its own (LiteLLM's proxy: a 500 {"message": "litellm.InternalServerError:
# InternalServerError: OpenAIException - " + llama.cpp's message or whole body, "type": null,
# "param": null, "code": "500"}; a gateway's 502 or 503 passing its JSON on). Its words in part,
# or another server's wording of an overflow ("context size exceeded"), are what their words are.
# A prompt longer than a slot's context is a 400 ("request (N tokens) exceeds the available context
# size (M tokens), try increasing it", exceed_context_size_error: CONTEXT_OVERFLOW).
KV_CACHE_FULL = "Context size has been exceeded."
# ... as its server worded it before, from 2024 into 2025 (examples/server/server.cpp, update_slots():
# n_batch == 1 || ret < 0, sent to every slot, the same 500 of server_error, and the same error
# object in a stream's ``error:`` event), and as ik_llama.cpp's still does. (Known so, a crowded
# server of those builds was a server failing everything, "hard": HOPELESS_TRIES ended in GaveUp.)
KV_CACHE_FULL_BEFORE = "Input prompt is too big compared to KV size. Please try increasing KV size."
# llama.cpp's server when an input it cannot split across batches (an embedding's, a rerank's) is
# longer than its physical batch, however large its context (server-context.cpp, a slot that cannot
# split: "input (N tokens) is too large to process. increase the physical batch size (current batch
# size: M)", "input is too large to process. increase the physical batch size" before; a 500 of
# server_error, as KV_CACHE_FULL's). Asking again gets the same (``batch_too_small``).
BATCH_OVERFLOW = re.compile(r"input (?:\(\d+ tokens\) )?is too large to process\. increase the physical batch size")
# Azure OpenAI's hosts (and Azure AI Foundry's), in Azure's public, Government (.us) and China
# (.cn) clouds.
AZURE_HOST = re.compile(r"\.(?:openai|cognitiveservices|services\.ai)\.azure\.(?:com|us|cn)$")
# The stages whose request holds a chunk: index.chunk_size sets how long it is. The gleaning
# check is one: it sends the chunk again, beside the names found in it (``gleaner.check_messages``),
# so a chunk too long for the model's context overflows it as it does the extraction. Its answer
# is one word, though, which no shorter chunk shortens (``shorter_answer``).
CHUNK_STAGES = ("extract", "glean", "glean_check", "claims")
# What sets the length of a stage's requests: its input, and the room it asks for its answer.
_STAGE_BUDGETS = {
    **dict.fromkeys(CHUNK_STAGES, "index.chunk_size"),
    "embed": "index.chunk_size (a chunk is embedded whole)",
    "summarize": "index.summary_max_descriptions (0 takes every description) or index.summary_max_tokens",
    "report": "index.report_max_input_tokens or index.report_max_output_tokens",
    "rate": "query.map_max_tokens (the reports' lines one rating request holds)",
    "map": "query.map_max_tokens", "reduce": "query.reduce_max_tokens or query.answer_max_tokens",
    "answer": "query.local_max_tokens (a local or basic search's context) or query.answer_max_tokens",
}
# What shortens a stage's requests when no setting bounds them. A query embeds its question whole
# (``query``'s stage "embed_question"): under the index's "embed", an overflow said to lower
# index.chunk_size, which no question follows.
_STAGE_FIXES = {"embed_question": "shorten the question (it is embedded whole)"}
# What shortens a stage's answer, when no setting of the call's own sets its room (the advice
# after an answer cut off: ``llm``'s). A chunk's extraction follows the chunk; the gleaning
# check's answer is YES or NO, and a rating's room is a line a report: nothing of the request's
# shortens them. (A search's answer, reduce's and answer's, is kept when cut: no advice.)
_ANSWER_BOUNDS = {
    "glean_check": "", "rate": "",
    "summarize": "lower index.summary_max_tokens (the summary's word limit follows it)",
    "report": "lower index.report_max_input_tokens (a smaller community context has less to report)",
    "map": "lower query.map_max_tokens (fewer reports a request, fewer points to list)",
}


# Request parameters a model may refuse (OpenAI's reasoning models: o1, o3, o4-mini, gpt-5 ...;
# an Azure api-version older than 2024-09-01 refuses stream_options): such a model is asked
# again without them, and the client leaves them out of its later requests (``model_quirks.leave_out``).
_ADAPTABLE = ("max_tokens", "temperature", "logit_bias", "stop", "seed", "stream_options")


def _names_refused(message: str, param: str) -> bool:
    """Whether ``message`` refuses ``param`` itself ("Unsupported parameter: 'max_tokens'",
    "'logit_bias' is not supported", "Unrecognized request argument supplied: stream_options",
    pydantic's "'type': 'extra_forbidden', 'loc': ('body', 'stream_options')" of vLLM and other
    FastAPI servers), not a value of it ("max_tokens values above 4096 are not supported").
    One refused value counts: vLLM's "token_id(s) [...] in logit_bias contain out-of-vocab token
    ids" (the bias names OpenAI token ids; no other value would be sent)."""
    q = "['\"`]"   # a quote of any kind
    quoted = rf"{q}?{param}{q}?"
    ways = [rf"(?:unsupported (?:parameter|value)|unrecognized (?:request )?argument(?: supplied)?|"
            rf"unknown (?:parameter|field|argument)|extra (?:inputs|fields)[^:]*)\W+{quoted}(?!\w)",
            rf"(?<!\w){quoted} (?:is|are) (?:not supported|unsupported|not permitted)",
            rf"extra_forbidden{q}?,\s*{q}?loc{q}?:\s*[(\[][^()\[\]]*{q}{param}{q}\s*,?\s*[)\]]"]
    if param == "logit_bias":
        ways.append(rf"(?<!\w)in {quoted} contains? out[- ]of[- ]vocab")
    return re.search("|".join(ways), message, re.IGNORECASE) is not None


class Refused(Exception):
    """A chat request was refused for a parameter the model does not take (``_ADAPTABLE``)."""

    def __init__(self, param: str, status: int, message: str) -> None:
        super().__init__(message)
        self.param, self.status, self.message = param, status, message


def refused_param(resp: httpx.Response, message: str, error: dict | None) -> str | None:
    """The parameter of ``_ADAPTABLE`` a 400 says the model does not take, if it says so and
    the request held it (``error``: the answer's error object, ``ErrorAnswer.error``)."""
    refused = [p for p in _ADAPTABLE if _names_refused(message, p)]
    if not refused:
        return None
    named = error.get("param") if error is not None else None
    # The error's own 'param', when it gives one, must be the parameter the message refuses.
    param = next((p for p in refused if named in (None, p)), None)
    if param is None:
        return None
    try:
        sent = msgspec.json.decode(resp.request.content)
    except (msgspec.DecodeError, RuntimeError):
        return None
    return param if isinstance(sent, dict) and param in sent else None


def overflow_advice(stage: str) -> str:
    """What shortens a stage's requests: the settings to lower, or (``_STAGE_FIXES``) the input."""
    if stage in _STAGE_FIXES:
        return _STAGE_FIXES[stage]
    budget = _STAGE_BUDGETS.get(stage)
    return f"lower {budget}" if budget else "lower index.chunk_size or query.*_max_tokens"


def _llama_server_error(status: int, error: object) -> str | None:
    """The message of an error llama.cpp's server sends as ERROR_TYPE_SERVER (``status`` 500,
    ``error`` {"code": 500, "message": ..., "type": "server_error"}, the error object of an
    answer or of a stream's event), or None for any other."""
    if status != 500 or not isinstance(error, dict) or error.get("code") != 500 or error.get("type") != "server_error":
        return None
    message = error.get("message")
    return message if isinstance(message, str) else None


def kv_cache_full(status: int, said: str) -> bool:
    """Whether an error is llama.cpp's KV cache filled by the requests in progress: a 5xx whose
    message (``said``, all of it, not cut to one line) holds one of its sentences whole
    (``KV_CACHE_FULL``, ``KV_CACHE_FULL_BEFORE``), as its server sends it or a proxy relays it."""
    return 500 <= status < 600 and any(sentence in said for sentence in (KV_CACHE_FULL, KV_CACHE_FULL_BEFORE))


def batch_too_small(status: int, error: object) -> bool:
    """Whether an error is llama.cpp's input longer than its physical batch (``BATCH_OVERFLOW``),
    as its server sends it."""
    message = _llama_server_error(status, error)
    return message is not None and BATCH_OVERFLOW.match(message) is not None


def crowded_advice(stage: str, concurrency: int) -> str:
    """What to do when llama.cpp's KV cache kept filling with the requests in progress
    (``KV_CACHE_FULL``): more context for each request, fewer requests at once, or shorter ones."""
    return ("the server's context filled with the requests it was answering at once (llama.cpp: -c is split "
            "among its -np slots, or shared by them all with --kv-unified): raise -c or lower -np, lower "
            f"llm.concurrency ({concurrency}) so fewer requests share it, or {overflow_advice(stage)}")


def batch_advice(stage: str) -> str:
    """What to do when llama.cpp's physical batch is shorter than an input it must hold whole
    (``BATCH_OVERFLOW``): shorter inputs, or a larger batch."""
    return (f"{overflow_advice(stage)}, or raise the server's physical batch size, which must hold an "
            "embedding's input whole (llama.cpp: -ub, and -b no smaller)")


def shorter_answer(stage: str) -> str:
    """The setting to lower for shorter answers of ``stage`` ("" for a stage none shortens)."""
    if stage in _ANSWER_BOUNDS:
        return _ANSWER_BOUNDS[stage]
    return "lower index.chunk_size (a shorter chunk's extraction is shorter)" if stage in CHUNK_STAGES else ""


# A 503 of a server loading its model (llama.cpp's "Loading model").
_LOADING = re.compile(r"\bloading\b", re.IGNORECASE)
# A 503 (or Anthropic's 529) of a server that is up but asks to wait: busy, overloaded, at capacity
# (Ollama with its queue full: "server busy, please try again"; OpenAI's "engine is currently
# overloaded"), loading, or saying how long (Retry-After). A bare 503 is not one: a proxy or load
# balancer with nothing behind it answers so.
_BUSY = re.compile(r"\b(busy|overloaded|capacity|loading|try again|slow down)\b", re.IGNORECASE)


class Retryable(Exception):
    """An attempt failed in a way another attempt may not."""

    def __init__(self, detail: str, status: int | None = None, retry_after: float | None = None,
                 refused: bool = False, timed_out: bool = False, unconnected: bool = False, fix: str = "",
                 crowded: bool = False):
        super().__init__(detail)
        self.detail = detail
        self.status = status
        self.retry_after = retry_after
        self.refused = refused  # nothing accepted the connection
        self.timed_out = timed_out   # no answer (or no progress) within the try's timeout
        self.unconnected = unconnected   # no connection made in time (connecting timed out)
        self.loading = status == 503 and _LOADING.search(detail) is not None   # a model loading
        # ... or (``crowded``) llama.cpp's KV cache filled by the requests in progress: the server
        # is up and answering, only crowded (``kv_cache_full``; not a sign of a server that fails
        # everything, ``endpoint_health.failure``).
        self.busy = crowded or status in (503, 529) and (retry_after is not None or _BUSY.search(detail) is not None)
        self.fix = fix          # what to do should every try fail so (``advice``'s words, in their place)
        self.free = False       # a refusal by an endpoint that answered before: uses no retry
        self.refused_for = 0.0  # how long this call's refusals in a row have lasted
        self.tries = 0          # the call's tries so far that used up llm.max_retries (or, when
                                # free, its refused tries in a row): the backoff's exponent


# Whether more retries would see a call through whose every try got a server error: one wording
# for every such call, true whatever the run's other calls got. A call cannot know it: a server
# failing now and then answers the next try, one failing every try (or this input) never does.
# (It was decided by the client's tries so far: with one server answering b.txt and failing a.txt
# and c.txt with HTTP 500, one run said "raising llm.max_retries only waits longer" of a.txt, before
# b.txt was answered, and "or raise llm.max_retries" of c.txt after: the call order decided it.)
MORE_RETRIES = "raising llm.max_retries helps only a server that fails now and then, not one that fails every try"


def advice(e: Retryable, setting: str = "llm.api_base", limited: bool = True) -> str:
    """What to do about a call that kept failing the same way (``setting``: what set the endpoint;
    ``limited``: llm.requests_per_minute is set)."""
    if e.fix:
        return e.fix if e.tries > 1 else f"not retried as llm.max_retries = 0 (a retry may fit): {e.fix}"
    if e.status == 429:
        if not limited:
            return ("the provider kept refusing for its rate limit: set llm.requests_per_minute and "
                    "llm.tokens_per_minute to your provider's limits (0 means no limit)")
        return "the provider kept refusing for its rate limit: lower llm.requests_per_minute / llm.concurrency"
    if e.status is not None and e.status >= 500:
        if e.tries <= 1:   # llm.max_retries = 0
            return "the server answered with an error, not retried as llm.max_retries = 0: check its logs, or raise llm.max_retries"
        return f"the server kept answering with errors: check its logs; {MORE_RETRIES}"
    if e.status == 200:
        return f"the server's answers could not be read: check that {setting} is an OpenAI-compatible endpoint"
    if "timeout" in e.detail:
        return ("check that the server still answers (one that hangs needs a restart); for a slow "
                "one, raise llm.request_timeout_s or lower llm.concurrency")
    return f"check that the server is running and reachable at {setting}"


def duration(seconds: float) -> str:
    """``seconds`` as a person says it: "0.3 s", "45 s", "12 min", "7 h 12 min". Below 10 s to
    a tenth: a give-up after llm.give_up_after_s = 0.3 said "the last 0 s"."""
    if seconds < 0.05:
        return "<0.1 s"
    if seconds < 10:
        return f"{seconds:.1f}".removesuffix(".0") + " s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 120 else f"{minutes // 60} h {minutes % 60} min"


_HTML_TITLE = re.compile(r"<(title|h1)[^>]*>(.*?)</\1\s*>", re.IGNORECASE | re.DOTALL)


def html_page(text: str) -> str | None:
    """What an HTML page (a proxy's 502, a login page) says of itself: its title or first
    heading, tags left out; None when ``text`` is not one."""
    head = text.lstrip()[:200].lower()
    if not head.startswith("<") or not any(t in head for t in ("<html", "<!doctype", "<head", "<title", "<body")):
        return None
    said = ""
    for found in _HTML_TITLE.finditer(text):   # the title, or the first heading when it has none
        said = " ".join(html.unescape(re.sub(r"<[^>]*>", " ", found.group(2))).split())
        if said:
            break
    return one_line(f"an HTML page: {said}" if said else "an HTML page")


class ErrorAnswer(NamedTuple):
    """A provider's error answer, its body decoded once (``read_error``): what ``Replies.check_status``
    reads of it (it was decoded three times, once for each)."""

    said: str            # its message whole, on one line (not cut: ``one_line`` after ``hidden``)
    error: dict | None   # its error object (its JSON's "error", when an object), else None
    code: str            # its error's code, else its type (``_code_of``), or ""
    page: str = ""       # what an HTML page says of itself (``html_page``), when the body is one


def read_error(resp: httpx.Response) -> ErrorAnswer:
    """What a provider's error answer says (``ErrorAnswer``); a body that is not JSON, or JSON
    nested deeper than Python's recursion limit (msgspec raised RecursionError out of
    ``Replies.check_status``, and the run crashed instead of recording the failure): its text
    (an HTML page's title), no error object."""
    try:
        body = msgspec.json.decode(resp.content)
    except (msgspec.DecodeError, RecursionError):
        page = html_page(resp.text) or ""
        return ErrorAnswer(" ".join((page or resp.text).split()), None, "", page)
    err = _error_of(body)
    if isinstance(err, dict):
        text = err.get("message") or err.get("detail") or msgspec.json.encode(err).decode()
    else:
        text = str(err)
    error = body.get("error") if isinstance(body, dict) else None
    error = error if isinstance(error, dict) else None
    return ErrorAnswer(" ".join(str(text).split()), error, _code_of(err))


def _error_of(body: object) -> object:
    """Where a JSON error body says its error: its "error" (OpenAI's object, or a server's words
    or code: {"error": "model_not_found"}), a FastAPI server's "detail" when an object
    ({"detail": {"code": ..., "message": ...}}), or the body itself ({"code": ..., "message": ...})."""
    if not isinstance(body, dict):
        return body
    if "error" in body:
        return body["error"]
    detail = body.get("detail")
    return detail if isinstance(detail, dict) else body


# An error's code as servers send one: a word of letters, digits, "_", "-" or "." (OpenAI's
# "model_not_found", Anthropic's "not_found_error"), not a number (llama.cpp's 500, Mistral's
# "1500": an HTTP status, or a number that says nothing here), nor words (Ollama's {"error":
# "model 'x' not found"}: a message, which must name the model, ``unknown_model``).
_CODE = re.compile(r"[A-Za-z][\w.-]*")


def _code_of(err: object) -> str:
    """The code an error (``_error_of``'s) gives: its "code", else its "type", else a "detail" of
    one word ({"detail": "model_not_found"}); or the error itself when it is one word (``_CODE``);
    "" for none. The check of a model by name and a call read it alike: a code the check alone
    found ({"detail": {"code": "model_not_found"}}) stopped the run at the check, and a call
    refused so failed as any 400."""
    said = (err.get("code"), err.get("type"), err.get("detail")) if isinstance(err, dict) else (err,)
    return next((c for c in said if isinstance(c, str) and _CODE.fullmatch(c)), "")


def provider_message(resp: httpx.Response) -> str:
    """The error message in a provider's answer, whole, on one line (``read_error``'s): to read a
    wait or a parameter from (OpenAI's say them after 200 characters), hidden and cut by the
    caller (``hidden``, then ``one_line``: cut first, a key at the cut would show in part)."""
    return read_error(resp).said


# What a transport error that gives no words of its own was (httpx's ReadError: "").
_TRANSPORT_REASONS = {"ReadError": "the connection broke while reading the answer",
                      "WriteError": "the connection broke while sending the request",
                      "RemoteProtocolError": "the server closed the connection without a complete answer",
                      "ConnectError": "the connection could not be made"}


def reason(e: Exception) -> str:
    """``Name: message`` of a transport error, with words when it has none."""
    said = flat(e) or _TRANSPORT_REASONS.get(type(e).__name__, "no reason given")   # (a proxy's words too)
    return f"{type(e).__name__}: {said}"


def not_answering(url: str, detail: str, setting: str) -> str:
    """Why no connection to ``url`` was ever made (``detail``, the last try's), and the fix
    (``setting``: the one naming the endpoint). A server that is up but speaks plain HTTP to
    an https:// address, or whose certificate is not trusted, was told to "start the server"."""
    return (tls_refused(url, detail, setting) or name_unknown(url, detail, setting)
            or f"nothing answers at {url} ({detail}); start the server, or fix {setting}")


# How a failed look-up of a host name reads (glibc: -2 a name unknown, -3 no DNS answer; -5
# no address; musl, as Alpine's images have it: "Name does not resolve", "Try again"; macOS;
# Windows), and its number, which every C library's -2 and -3 are (musl's words were "nothing
# answers at ...; start the server").
_NAME_UNKNOWN = ("Name or service not known", "Temporary failure in name resolution",
                 "No address associated with hostname", "nodename nor servname provided",
                 "getaddrinfo failed", "Name does not resolve")
_NAME_ERRNO = re.compile(r"\[Errno (-2|-3|-5|11001|11002|11004)\]")


def lookup_failed(detail: str) -> bool:
    """Whether a failed connection's ``detail`` says its host name could not be looked up."""
    return any(said in detail for said in _NAME_UNKNOWN) or _NAME_ERRNO.search(detail) is not None


def name_unknown(url: str, detail: str, setting: str) -> str | None:
    """Why no connection to ``url`` was made when its host name could not be looked up; None for
    any other reason. A mistyped host (`api.opnai.com`), or no network, was told to "start the
    server", which no one can do for a provider's host."""
    if not lookup_failed(detail):
        return None
    host = httpx.URL(url).host
    return (f"{url}: the host name {host} could not be looked up ({detail}); check its spelling "
            f"in {setting}, and that this machine is online (its network and DNS)")


def tls_refused(url: str, detail: str, setting: str) -> str | None:
    """Why no connection to ``url`` was made when a server there is up but its TLS failed
    (``detail``, the last try's): plain HTTP on an https:// address, or a certificate not
    trusted; None for any other reason (``httpx.ConnectError`` is raised for both alike)."""
    if url.startswith("https://") and "WRONG_VERSION_NUMBER" in detail:
        return (f"{url}: the server there speaks plain HTTP, not HTTPS ({detail}); use "
                f"http:// in {setting}")
    if "CERTIFICATE_VERIFY_FAILED" in detail:
        return (f"{url}: the server's certificate is not trusted ({detail}); give the file of the "
                "authority that signed it with SSL_CERT_FILE=/path/to/ca.pem, or fix "
                f"{setting} if it names the wrong host")
    return None


def stopped_answering(url: str, detail: str, setting: str, answered_at: float, then: str = "") -> str:
    """Why no connection to ``url`` was made, when the caller knows it answered at ``answered_at``
    (wall clock: a daemon's earlier sync, or a run of the index through it): the server stopped,
    and the address is right. A daemon's sync, whose model client is new, said to "fix
    llm.api_base" (``not_answering``), and `status --failures` kept it. ``then``: what to do once
    it is back ("": nothing, the caller retries it by itself). Not for a TLS failure
    (``tls_refused``), which ``not_answering`` says: a certificate expired since it answered was
    said "every connection is refused ...; retried until it answers"."""
    # (As the watch's lines say a time. Imported here, not above, though there is no cycle:
    # watch_lines loads status and index_rows, 33 ms of CPU uncompiled, 2.6 ms cached, that
    # a client of the model alone, streamrag.llm, would load for this one line.)
    from streamrag.watch_lines import clock

    if name_unknown(url, detail, setting):
        # (the address that answered is right: this machine went offline, or its DNS; "start the
        # server again" was said of a provider's host)
        return (f"{url}: the host name {httpx.URL(url).host} could not be looked up ({detail}), though it "
                f"answered at {clock(answered_at)}; check that this machine is online (its network and DNS)"
                + (f", {then}" if then else "; retried until it answers"))
    return (f"{url} stopped answering (it last answered at {clock(answered_at)}): every connection is "
            f"refused ({detail}); " + (f"start the server again, {then}" if then else "retried until it answers"))


def one_line(text: object) -> str:
    """``text`` on one line, at most 200 characters: a provider's words in a message of ours,
    safe to print (``terminal.flat``: a proxy's ``\\x1b[2J`` in an error body cleared the
    terminal), cut after its controls are escaped, so that the cut line is what is shown."""
    text = flat(text)
    return text if len(text) <= 200 else text[:197] + "..."


def http_said(status: int, message: str) -> str:
    """An HTTP error and the provider's ``message``: ``HTTP 500: boom``, or ``HTTP 502 (empty
    answer)`` when it gave none (a proxy's bare 502 read "last: HTTP 502: ; ...")."""
    return f"HTTP {status}: {message}" if message else f"HTTP {status} (empty answer)"


def aside(message: str) -> str:
    """The provider's ``message`` in brackets after words of ours, ``" (boom)"``, or nothing when
    it gave none (an empty 404 read "no such route (); ...")."""
    return f" ({message})" if message else ""


def sent_secrets(api_key: str, api_base: str, proxies: Iterable[str] = ()) -> tuple[str, ...]:
    """What the requests to ``api_base`` carry that no message may say (``hidden``): the API key,
    the URL's password, and that password as the Basic header carries it (the base64 of
    ``user:password``, which a server echoing its headers quotes, and decodes to the password);
    the same of the ``proxies`` (the environment's, ``getproxies``: httpx sends a proxy's
    ``user:password@`` as Proxy-Authorization, which a proxy's 407 or 502 echoing the request
    quoted in the error, the call log and `status --failures`). A key or password of a few
    characters (Ollama takes any key, "ollama") is no secret, and hiding it would garble words."""
    secrets = [api_key] if len(api_key) >= 8 else []
    for address in (api_base, *proxies):
        secrets.extend(_url_secrets(address))
    return tuple(secrets)


def _url_secrets(address: str) -> list[str]:
    """The password of the URL ``address`` and its Basic header's base64, when it has one of 8
    characters or more."""
    try:
        url = httpx.URL(address)
    except httpx.InvalidURL:   # (a proxy variable httpx refuses too)
        return []
    if len(url.password) < 8:
        return []
    return [url.password, b64encode(f"{url.username}:{url.password}".encode()).decode()]


def hidden(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` with each of ``secrets`` (the API key sent, a URL's password) as ``***``: a server
    that quotes the request back (a 401 naming the key it refused, a 500 echoing its headers)
    put the key in the error, on stderr, in the call log and in `status --failures`."""
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


# A model the server does not serve, as a 400 (or 422) says it: OpenAI-compatible proxies
# (LiteLLM, OpenRouter, vLLM) answer so where OpenAI answers 404 ("The model `x` does not exist",
# code model_not_found; OpenRouter's 400 "x is not a valid model ID", its code the number 400).
_UNKNOWN_MODEL = re.compile(r"model[_ ]not[_ ]found|\bmodel\b[^.;]{0,120}?\b(?:does not exist|not found|"
                            r"is not (?:available|served))|\b(?:unknown|invalid|no such) model\b"
                            r"|\bnot a valid model (?:id|name)\b",
                            re.IGNORECASE)


def model_not_found(code: str) -> bool:
    """Whether an error's ``code`` (or type) says the model asked for is not served (OpenAI's
    "model_not_found"): it decides whatever the message says, or leaves unsaid."""
    return bool(re.search(r"model[_ ]not[_ ]found", code, re.IGNORECASE))


def unknown_model(code: str, message: str, model: str) -> bool:
    """Whether an error's ``code`` or ``message`` says ``model``, the one asked for, is not
    served: a message must name it ("An unknown model parameter was set", "Invalid model output:
    tool call not found" say nothing of which model a server serves)."""
    if model_not_found(code):
        return True
    return bool(model) and model.casefold() in message.casefold() and bool(_UNKNOWN_MODEL.search(message))


def of_model(words: str, model: str, code: str = "") -> bool:
    """Whether a 404 refuses a model: its ``code`` says so (``model_not_found``), or its
    ``words`` speak of a model (the word, or ``model`` by name), as a server refusing the model
    does ("The model `x` does not exist", Ollama's "model 'x' not found"); "Not Found", "404
    page not found" are of a path the server does not serve."""
    said = words.casefold()
    return model_not_found(code) or "model" in said or bool(model) and model.casefold() in said


def model_settings(settings: LLMSettings, model: str) -> list[str]:
    """The settings that name ``model`` (``llm.extraction_model`` ...)."""
    return [f"llm.{name}" for name in _MODEL_KEYS if getattr(settings, name) == model]


def base_setting(settings: LLMSettings, base_from: str = "") -> str:
    """Where the endpoint came from, as a user would change it (``base_from``: what set it,
    ``Settings.api_base_from``, when known)."""
    if base_from:
        return base_from
    from_env = os.environ.get("STREAMRAG_API_BASE", "").strip().rstrip("/")
    return "STREAMRAG_API_BASE" if from_env and from_env == settings.api_base else "llm.api_base"


def key_names(settings: LLMSettings) -> list[str]:
    """The variables a key is read from, first set wins."""
    return list(dict.fromkeys(v for v in (settings.api_key_env, "STREAMRAG_API_KEY",
                                          "OPENAI_API_KEY") if v))


def key_source(settings: LLMSettings, key: str) -> str:
    """The variable ``key`` was read from, if one holds it."""
    return next((v for v in key_names(settings) if (os.environ.get(v) or "").strip() == key), "")


def key_advice(settings: LLMSettings, api_key: str, setting: str = "llm.api_base") -> str:
    """What to do about a 401/403: which variables are read, and which one the key came from;
    or, when ``api_base`` holds ``user:password@`` (``setting``: what set it) and those were
    the credentials sent, that its password was refused (it was said "no API key was sent").
    (httpx's Basic auth takes the Authorization header: a key beside it went only as Azure's
    api-key header.)"""
    names = key_names(settings)
    if httpx.URL(settings.api_base).userinfo and not (api_key and settings.api_version):
        # (A key set beside them is sent once they are removed: "export" it again said nothing.)
        source = key_source(settings, api_key) if api_key else ""
        then = f": the key in {source} is then sent" if source else f" and `export {names[0]}=...`"
        return (f"the password in {setting} ({without_secrets(settings.api_base)}) was refused; fix the "
                f"user and password there, or, for a server that takes an API key, remove them{then}")
    if not api_key:
        return (f"no API key was sent (none of {', '.join(names)} is set); export the key in "
                f"one of them, e.g. `export {names[0]}=...`")
    source = key_source(settings, api_key)
    wanted = settings.api_key_env
    if (source and wanted not in ("", "STREAMRAG_API_KEY", "OPENAI_API_KEY")
            and not os.environ.get(wanted)):
        # llm.api_key_env names an unset variable: a key meant for another service was sent.
        return (f"the API key was rejected; it was read from {source} because {wanted} (named "
                f"by llm.api_key_env) is unset: export {wanted} with this server's key")
    return (f"the API key was rejected; set {source or names[0]} to a valid key"
            + (f" (it was read from {source}; streamrag reads {', '.join(names)}, first set wins)"
               if source else ""))


def key_not_sent(settings: LLMSettings, api_key: str, setting: str = "llm.api_base") -> str | None:
    """What to say when an API key is set beside a ``user:password@`` in api_base (``setting``:
    what set it): both go in the Authorization header, and httpx's Basic auth takes it, so the
    key was silently not sent; None when they are not both sent so (with llm.api_version, the key
    goes as Azure's api-key header beside them)."""
    if not api_key or settings.api_version or not httpx.URL(settings.api_base).userinfo:
        return None
    source = key_source(settings, api_key)
    said = (f"the API key{f' in {source}' if source else ''} is not sent: {setting} "
            f"({without_secrets(settings.api_base)}) holds a user and password, sent as Basic auth in the "
            f"Authorization header the key would go in; for a server that takes the key, remove the "
            f"user:password from {setting}")
    return said + (f"; for one that takes the password, unset {source}" if source else "")


# A 401/403 of ``GET /models`` that may refuse the listing alone, not the key: OpenAI's restricted
# keys without the models scope ("You have insufficient permissions for this operation. Missing
# scopes: api.model.read"), a 403 naming the models. Such a key may still chat.
_LISTING_ONLY = re.compile(r"scope|insufficient permission|\bmodels?\b", re.IGNORECASE)


def listing_refused(message: str) -> bool:
    """Whether a 401/403 to ``GET /models`` (``message``: its words) may refuse the listing of
    models only, a key that chats being good (``LLMClient.check_key`` then says nothing)."""
    return _LISTING_ONLY.search(message) is not None


# A 403 about the key or the caller's rights (the words of OpenAI, Azure, Anthropic, Gemini ...).
_ABOUT_THE_KEY = re.compile(r"key|auth|credential|permission|unauthori[sz]ed|scope|token", re.IGNORECASE)
# A 403 for another reason: what it is, and what to do (``{setting}``: what set the endpoint).
_NOT_THE_KEY = (
    (re.compile(r"countr|region|territor|location|geograph", re.IGNORECASE),
     "the provider does not serve requests from this country or region",
     "use an endpoint that serves it: set {setting} to another provider's (or a local server's)"),
    (re.compile(r"quota|billing|credit|balance|payment|funds|subscription", re.IGNORECASE),
     "the account behind the API key cannot pay for requests",
     "add credit or check the account's plan with the provider, or use another key"),
    (re.compile(r"(?:account|organi[sz]ation|project|user)\b[^.]*\b(?:deactivated|disabled|suspended|"
                r"banned)", re.IGNORECASE),
     "the provider has disabled the account", "ask the provider why, or use another account's key"),
    (re.compile(r"\bip\b|firewall|allow ?list|white ?list|\bvpn\b", re.IGNORECASE),
     "the provider does not take requests from this machine's network address",
     "allow it in the provider's (or the proxy's) settings, or call from an allowed network"),
)


# An error type that is only a 403's own name (vLLM's and the openai library's
# "PermissionDeniedError", Anthropic's "permission_error", a proxy's "forbidden"): it says no
# reason, so the message decides (``forbidden_reason``). Read as a code, its "permission" said the
# key: a 403 {"type": "PermissionDeniedError", "code": 403, "message": "Country not supported"}
# was told to set the API key, once a code that is a number gave way to the type.
_ONLY_FORBIDDEN = re.compile(r"(?:permission[_ ]?(?:denied)?|(?:request[_ ]?)?forbidden|access[_ ]?denied)"
                             r"(?:[_ ]?error)?", re.IGNORECASE)


def forbidden_reason(code: str, message: str, setting: str) -> str | None:
    """What a 403 that is not about the key says, and what to do, or None when it may be about
    the key (the provider's words name it, or name nothing else). A 403 "Country, region, or
    territory not supported" said "the API key was rejected; set OPENAI_API_KEY", its reason in
    parentheses. The error's ``code`` (or type) decides first, unless it is only a 403's name
    (``_ONLY_FORBIDDEN``), then its message."""
    for said in ("" if _ONLY_FORBIDDEN.fullmatch(code) else code, message):
        for words, what, fix in _NOT_THE_KEY:
            if words.search(said):
                return f"{what} ({message or code}); {fix.format(setting=setting)}"
        if _ABOUT_THE_KEY.search(said):
            return None
    return None


def web_page(page: str, wanted: str, url: str, setting: str, base: str = "") -> WebPageAnswer:
    """A web page where the API should answer (a proxy's sign-in, a wrong address): asking
    again gets the same page (a login page was asked for 7 times, half a minute an ask).
    ``setting``: what set the address (``base_setting``); ``base``: its value, secrets hidden,
    said with /v1 when its path has no version (``without_version``)."""
    return WebPageAnswer(f"{url}: the answer was {page}, not {wanted}: the address leads to a "
                         f"web page (a proxy's sign-in, a wrong path), not the API; check "
                         f"{setting}{without_version(base, setting)}", 200)


def wrong_address(page: str, url: str, setting: str, base: str = "", *, embeddings: bool = False) -> WebPageAnswer:
    """A web page answering 404 where the API should answer (``page``: what it says of itself): the
    address is wrong, not the model, which an OpenAI-compatible server refuses in JSON that names
    it. (It was said "unknown model or wrong api_base", and a model found served by name was
    taken for refused: checked again by every run, "refused by name" with the page's title.)
    ``setting``, ``base``: as ``web_page``'s; ``embeddings``: ``url`` is the embeddings route,
    which a server (or a proxy) answering the chat route may not serve."""
    fix = without_version(base, setting) or (f": set it to the address the OpenAI API answers under"
                                             f"{f' (it is {base!r})' if base else ''}")
    if embeddings:
        fix += "; or, where chat calls are answered, serve embeddings there or set llm.embedding_model = \"\" (none)"
    return WebPageAnswer(f"{url}: HTTP 404, {page}: the address leads to a web page (a path the server does not "
                         f"serve, a proxy's page), not the API (a model it does not serve is said in JSON); fix {setting}{fix}",
                         404)


def without_version(base: str, setting: str) -> str:
    """What to try for an api_base whose path has no version (no /v1, /v1beta/openai): a web UI
    served at the server's root answers every other path with its page, where the API waits
    under /v1. Said as a possibility: the server decides. '' for one with a version, or none."""
    if not base or versioned(base):
        return ""
    return (f": it has no /v1; most OpenAI-compatible servers (Ollama, vLLM, llama.cpp) serve under "
            f"/v1: try setting {setting} to {with_version(base)!r}")


def with_version(base: str) -> str:
    """``base`` (a path with no version: ``versioned``) with the /v1 most servers serve the OpenAI
    API under: added, or in place of a closing /api, Ollama's own API, whose OpenAI one is /v1
    beside it (http://host:11434/api/v1 is a 404 too)."""
    base = base.rstrip("/")
    return base.removesuffix("/api") + "/v1" if httpx.URL(base).path.endswith("/api") else base + "/v1"


def versioned(base: str) -> bool:
    """Whether an api_base's path names an API version (/v1, /v1beta/openai), as the OpenAI API
    is served under: one without is told to try /v1 (a 404, a web page)."""
    return re.search(r"/v\d", httpx.URL(base).path) is not None
