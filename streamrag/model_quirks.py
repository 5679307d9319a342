"""What this process has learned of the endpoints' models, for every client it makes: the
request parameters a model refuses (left out of its later requests: ``sendable``), the models
that think aloud before they answer, the servers whose streams end unmarked, and the models
whose server's own limit cuts answers of requests that send no max_tokens. Each is said
once, in a warning under the client's logger (``streamrag.llm``). No HTTP: the client
(``llm.LLMClient``) learns them from replies and asks here.

A server's own limit is the one piece of this knowledge that is a guess, and it lapses. Two
answers of one request cut off in a row (no max_tokens sent, temperature 0) are what a limit
does (Ollama's num_predict, llama.cpp's -n, a full context), and also what two faults do (a
provider's answers broken off; the simulator's truncated answers): at fault_rate 0.3, five of
ten christmas_carol runs through the simulator saw it of a server with no limit, and a mark
that never lapsed left a long ``watch`` asking every cut answer once, with a warning naming a
limit there was none of.
So the mark (``note_server_cut``) is dropped when it is disproved, and forgotten when old:

- **disproved**: a later whole answer (``finish_reason`` stop, paid, of a request without
  max_tokens) of the model is longer than the cut ones were, in completion tokens and in prompt
  plus completion tokens (``note_whole_answer``). A limit on the answer cuts every answer at the
  same length; one on the context, every prompt plus answer at the same size: neither lets a
  whole answer past a size it cut. This drops the mark a fault made as soon as the model writes
  a longer answer, with a warning that takes the first one back. Sizes counted here, of a server
  that says no usage (llama.cpp, some vLLM versions), are another tokenizer's than its limit's,
  and two texts its limit counts alike are counted apart by some percent: a whole answer just
  under the limit was counted longer than the cut ones (of 2,000 christmas_carol passages within
  10% under a limit of 512 cl100k tokens, 84 counted longer in o200k than passages cut at it),
  and took back a limit the server has. Such a one disproves it only ``ESTIMATE_MARGIN`` longer;
- **old**: ``SERVER_CUT_LAPSE_S`` after the two cuts that made it (``clock``), since a fault that
  broke off the longest answers leaves a mark no later answer disproves. A real limit is then
  found again by its next cut answer, asked twice (one paid call more in ten minutes at most), and
  marked again without a second warning.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

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


@dataclass
class ServerCut:
    """Two answers of one request of a model cut off in a row though no max_tokens was sent: the
    server's own limit, it seems (``note_server_cut``). Kept when it lapses, for what was said
    of it."""
    completion: int = 0             # the longer cut answer's completion tokens
    total: int = 0                  # the larger of their prompt + completion tokens
    estimated: bool = False         # some of those were counted here (the server said no usage)
    since: float | None = None      # when (``clock``); None: disproved, or lapsed
    said: set[str] = field(default_factory=set)   # the warnings given: "cut", "whole"


# (api_base, model) -> what the server's own limit is known by (``note_server_cut``).
SERVER_CUTS: dict[tuple[str, str], ServerCut] = {}
SERVER_CUT_LAPSE_S = 600.0   # how long a mark of a server's own limit holds, undisproved
# How much longer than the cut answers a whole one must be to disprove the limit when some of
# their sizes were counted here, not by the server (``note_whole_answer``). What it must cover is
# how far the count here (o200k) and the server's part over texts of different kinds, the cut ones
# and the whole one being any two of a model's answers: over christmas_carol and synth_small
# (400-word passages and the simulator's extractions, gleanings, summaries and reports, and the
# extractions as indented JSON with numbers), o200k/cl100k runs 0.91-1.04, a spread of 1.14;
# against cl100k with each digit a token (Llama 2's and Mistral's tokenizers do so) 0.83-1.02, 1.24;
# with runs of whitespace a token each too (no merged indentation) 0.79-1.02, 1.30. One side
# counted by the server and the other here needs 1.27 of those at most. The margin covers the
# widest with room for texts unlike these: a mark it keeps wrongly lapses (``SERVER_CUT_LAPSE_S``).
ESTIMATE_MARGIN = 1.4
clock = time.monotonic       # (the tests set it)


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
    """Whether the server is known to cut answers of ``model`` at its own limit
    (``note_server_cut``; lapsed after ``SERVER_CUT_LAPSE_S``): a cut-off answer of a request
    without max_tokens is then not asked again."""
    cut = SERVER_CUTS.get((api_base, model))
    if cut is None or cut.since is None:
        return False
    if clock() - cut.since >= SERVER_CUT_LAPSE_S:
        cut.since = None
        log.debug("%s: the mark of its server's own limit lapsed; its cut answers are asked twice again", model)
        return False
    return True


def note_server_cut(api_base: str, model: str, url: str, completion: int, total: int,
                    estimated: bool = False) -> None:
    """Notes that the server at ``url`` cut two answers of one request of ``model`` off though no
    max_tokens was sent (its own output or context limit, it seems), the longer ``completion``
    tokens long, the larger ``total`` tokens with its prompt (``estimated``: some counted here,
    the server said no usage); said once."""
    cut = SERVER_CUTS.setdefault((api_base, model), ServerCut())
    cut.completion, cut.total, cut.since, cut.estimated = completion, total, clock(), estimated
    if "cut" not in cut.said:
        cut.said.add("cut")
        log.warning("%s at %s cut an answer off twice though no max_tokens was sent (%d tokens long): the "
                    "server's own output or context limit, it seems (Ollama: num_predict, OLLAMA_CONTEXT_LENGTH; "
                    "llama.cpp: -n, -c; vLLM: --max-model-len); such answers are asked for once, until the model "
                    "writes a longer whole answer or for %d minutes", model, url, completion,
                    round(SERVER_CUT_LAPSE_S / 60))


def note_whole_answer(api_base: str, model: str, url: str, prompt_tokens: int, completion_tokens: int,
                      estimated: bool = False) -> None:
    """Notes a whole answer (``finish_reason`` stop, paid, of a request that sent no max_tokens) of
    ``model``: longer than its server's limit cut (``note_server_cut``), in completion tokens and in
    prompt plus completion, it disproves the limit, and the mark is dropped (said once); by
    ``ESTIMATE_MARGIN`` when its sizes or the cut ones' were counted here (``estimated``)."""
    cut = SERVER_CUTS.get((api_base, model))
    if cut is None or cut.since is None:
        return
    margin = ESTIMATE_MARGIN if estimated or cut.estimated else 1.0
    if completion_tokens <= cut.completion * margin or prompt_tokens + completion_tokens <= cut.total * margin:
        return
    cut.since = None
    if "whole" not in cut.said:
        cut.said.add("whole")
        log.warning("%s at %s wrote a whole answer of %d tokens, longer than the two it cut off (%d): no limit "
                    "of the server cut those, they broke off; such answers are asked for twice again",
                    model, url, completion_tokens, cut.completion)
    else:
        log.debug("%s: a whole answer of %d tokens disproved its server's limit again", model, completion_tokens)
