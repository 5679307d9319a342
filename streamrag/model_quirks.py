"""What this process has learned of the endpoints' models, for every client it makes: the
request parameters a model refuses (left out of its later requests: ``sendable``), the models
that think aloud before they answer, the servers whose streams end unmarked, and the models
whose server's own limit cuts answers of requests that send no max_tokens. Each is said
once, in a warning under the client's logger (``streamrag.llm``). No HTTP: the client
(``llm.LLMClient``) learns them from replies and asks here.
"""

from __future__ import annotations

import logging

log = logging.getLogger("streamrag.llm")   # (the client's lines, under its name)

# A model that refuses max_tokens is sent max_completion_tokens instead, with this much more room
# for the reasoning that counts against it.
REASONING_ALLOWANCE = 8192

# What leaving each parameter out means, as the warning says it.
DROPPED = {
    "max_tokens": f"max_completion_tokens is sent instead, with {REASONING_ALLOWANCE} more for its reasoning",
    "temperature": "the model's default is used, and its answers may differ between runs (cached ones do not)",
    "logit_bias": "the gleaning check is asked in words",
    "stream_options": "a streamed answer's tokens are counted here",
}

THINKERS: set[str] = set()    # models this process has warned of thinking aloud (``thinks_aloud``)
# (api_base, model) -> the request parameters it refuses, as this process has seen (``leave_out``).
REFUSED: dict[tuple[str, str], set[str]] = {}
# (api_base, model) whose streams end with neither a finish_reason nor [DONE] (``ends_unmarked``).
UNMARKED: set[tuple[str, str]] = set()
# (api_base, model) that gave two answers of one request cut off with no max_tokens sent, at
# temperature 0 (``note_server_cut``): the server's own limit, which cuts the request the same way again.
SERVER_CUTS: set[tuple[str, str]] = set()


def leave_out(api_base: str, model: str, param: str) -> None:
    """Notes that ``model`` refuses ``param`` (a request without it is refused as any other)."""
    refused = REFUSED.setdefault((api_base, model), set())
    if param not in refused:
        refused.add(param)
        log.warning("%s does not take %s, so it is left out of its requests: %s", model, param,
                    DROPPED.get(param, "the server said so"))


def refuses(api_base: str, model: str, param: str) -> bool:
    """Whether ``model`` is known to refuse the request parameter ``param`` (``leave_out``)."""
    return param in REFUSED.get((api_base, model), ())


def sendable(api_base: str, payload: dict) -> dict:
    """``payload`` without what its model refuses (``leave_out``)."""
    refused = REFUSED.get((api_base, payload["model"]))
    if not refused:
        return payload
    out = {k: v for k, v in payload.items() if k not in refused}
    if "max_tokens" in refused and payload.get("max_tokens"):
        out["max_completion_tokens"] = payload["max_tokens"] + REASONING_ALLOWANCE
    return out


def thinks_aloud(model: str, tag: str, seen: set[str]) -> None:
    """Notes that ``model`` thinks in ``<tag>`` before it answers, in ``seen`` (a client's) too;
    said once."""
    if model not in THINKERS:   # (every model in ``seen`` is in it)
        log.warning("%s thinks before it answers (<%s> ... </%s> in its text): the thinking is "
                    "paid for and left out of the answer, and an answer limited to a few tokens "
                    "(the gleaning check) ends inside it. Turn its thinking off where the server "
                    "allows (Qwen3: /no_think), or use a model without it", model, tag, tag)
    seen.add(model)
    THINKERS.add(model)


def ends_unmarked(api_base: str, model: str) -> bool:
    """Whether the server's streams of ``model`` are known to end with neither a finish_reason
    nor [DONE] (``unmarked_seen``)."""
    return (api_base, model) in UNMARKED


def unmarked_seen(api_base: str, model: str, url: str) -> None:
    """Notes that the server at ``url`` ends its streams of ``model`` unmarked (the same text ended
    so twice in one call); said once."""
    if (api_base, model) not in UNMARKED:
        UNMARKED.add((api_base, model))
        log.warning("%s at %s ends its streamed answers with neither a finish_reason nor "
                    "[DONE]: they are taken as they end, so one the connection cuts short "
                    "cannot be told from a whole one; --no-stream avoids that",
                    model, url)


def server_cuts(api_base: str, model: str) -> bool:
    """Whether the server is known to cut answers of ``model`` at its own limit (``note_server_cut``):
    a cut-off answer of a request without max_tokens is then not asked again."""
    return (api_base, model) in SERVER_CUTS


def note_server_cut(api_base: str, model: str, url: str) -> None:
    """Notes that the server at ``url`` cut two answers of one request of ``model`` off though no
    max_tokens was sent (its own output or context limit); said once."""
    if (api_base, model) not in SERVER_CUTS:
        SERVER_CUTS.add((api_base, model))
        log.warning("%s at %s cut an answer off twice though no max_tokens was sent: the server's own "
                    "output or context limit does (Ollama: num_predict, OLLAMA_CONTEXT_LENGTH; llama.cpp: "
                    "-n, -c; vLLM: --max-model-len); such answers are asked for once from now on", model, url)
