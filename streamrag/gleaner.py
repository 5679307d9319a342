"""Gleaning: further rounds asking the model for what the first extraction missed.

Each round first asks whether anything was missed (one token, YES or NO: forced with
``logit_bias`` when the provider honours it, asked for in words otherwise, or skipped with
``glean_check = "off"``), and if so asks for the missing records. Unlike a replay of the whole
conversation, a round sends the text once plus the list of names already found, which costs
far fewer tokens and lets the model see exactly what it has.
"""

from __future__ import annotations

from streamrag import ids
from streamrag.config import Settings
from streamrag.errors import LLMOutputError
from streamrag.extractor import ExtractionPrompts, entity_types_text, usable_records
from streamrag.parsing import parse_records, parse_yes_no
from streamrag.records import Chunk, Extraction
from streamrag.tokens import get_encoding


def found_list(extraction: Extraction, *, relations: bool = True) -> str:
    """The compact reminder of what was found: one entity name per line, then relation pairs."""
    lines = sorted({f"{e.name} ({e.type})" for e in extraction.entities})
    if relations:
        lines += sorted({f"{r.source} -- {r.target}" for r in extraction.relationships})
    return "\n".join(lines) or "(nothing yet)"


def merge_round(extraction: Extraction, extra: Extraction) -> int:
    """Adds the records of ``extra`` that are new; returns how many were added."""
    seen_e = {ids.normalize_name(e.name) for e in extraction.entities}
    seen_r = {frozenset((ids.normalize_name(r.source), ids.normalize_name(r.target)))
              for r in extraction.relationships}
    added = 0
    for e in extra.entities:
        if (key := ids.normalize_name(e.name)) and key not in seen_e:
            seen_e.add(key)
            extraction.entities.append(e)
            added += 1
    for r in extra.relationships:
        pair = frozenset((ids.normalize_name(r.source), ids.normalize_name(r.target)))
        if len(pair) == 2 and pair not in seen_r:
            seen_r.add(pair)
            extraction.relationships.append(r)
            added += 1
    extraction.dropped += extra.dropped
    return added


def yes_no_bias(settings: Settings) -> dict[str, int]:
    enc = get_encoding(settings.index.encoding)
    return {str(enc.encode(word)[0]): 100 for word in ("YES", "NO")}


class YesNoCheck:
    """How one run asks whether something was missed: one token forced with ``logit_bias``
    while the model obeys the bias, in words from the first answer that shows it does not (a
    model whose tokenizer is not ``index.encoding`` reads the biased ids as other tokens), so a
    wrong ``llm.logit_bias`` costs a call per chunk already being checked and a warning, not
    every chunk's gleaning. The process remembers such a model: `watch` pays that once."""

    def __init__(self, settings: Settings) -> None:
        self.model = (settings.llm.api_base, settings.llm.extraction_model, settings.index.encoding)
        self.use_bias = (settings.index.glean_check == "logit_bias" and settings.llm.logit_bias
                         and self.model not in _IGNORING)
        self.warning = ""

    def bias_ignored(self, settings: Settings, answer: str) -> None:
        if self.use_bias:
            self.use_bias = False
            _IGNORING.add(self.model)
            self.warning = (f"llm.logit_bias: {settings.llm.extraction_model} answered the one-token "
                            f"YES/NO check with {answer.strip()[:20]!r}: the provider ignores logit_bias or the "
                            f"model's tokenizer is not index.encoding ({settings.index.encoding}), so "
                            "the check is asked in words. Set llm.logit_bias = false (or "
                            "index.encoding to the model's tokenizer) to save the biased calls")


# (api_base, model, encoding) of models seen to ignore the bias in this process.
_IGNORING: set[tuple[str, str, str]] = set()


def _thinks(llm, settings: Settings) -> bool:
    """Whether the extraction model thinks aloud before answering (``LLMClient.thinking``): a
    check answer of a few tokens ends inside its thinking, so the round is not checked."""
    return settings.llm.extraction_model in getattr(llm, "thinking", ())


def check_messages(prompts: ExtractionPrompts, chunk: Chunk, extraction: Extraction):
    """A gleaning round's check: whether ``extraction`` missed anything in ``chunk``. Names alone
    are enough to judge that, and cost fewer tokens. (The estimate asks the cache with these.)"""
    return prompts.glean_check.render(text=chunk.text, found=found_list(extraction, relations=False))


def glean_messages(prompts: ExtractionPrompts, chunk: Chunk, extraction: Extraction, settings: Settings):
    """A gleaning round's request for what ``extraction`` missed in ``chunk``."""
    return prompts.glean.render(text=chunk.text, found=found_list(extraction),
                                entity_types=entity_types_text(settings))


async def _should_continue(llm, prompts: ExtractionPrompts, chunk: Chunk, extraction: Extraction,
                           settings: Settings, check: YesNoCheck) -> bool:
    if settings.index.glean_check == "off" or _thinks(llm, settings):
        return True
    extraction.checks += 1   # (asked, however many calls its answer takes)
    messages = check_messages(prompts, chunk, extraction)
    ask = dict(model=settings.llm.extraction_model, stage="glean_check", prompt=prompts.glean_check,
               on_length="accept")
    if check.use_bias and llm.refuses(settings.llm.extraction_model, "logit_bias"):
        check.use_bias = False   # the model refuses the parameter (said then): no bias to be ignored
    if check.use_bias:
        # One token is all the answer may hold, so a "length" finish is no cut. One that is
        # neither YES nor NO is not asked for again: the model would ignore the bias again.
        said: list[str] = []
        try:
            result = await llm.chat(messages, max_tokens=1, logit_bias=yes_no_bias(settings), tries=1,
                                    validate=lambda t: said.append(t) or parse_yes_no(t) is not None, **ask)
            return parse_yes_no(result.text) is not False
        except LLMOutputError:
            if _thinks(llm, settings):   # its one token opened its thinking: the bias is not at fault
                return True
            answer = said[-1] if said else ""
            # One token that is neither word: the bias named other tokens. A longer answer is a
            # glitch (max_tokens was 1): this check alone is asked again, in words.
            if len(answer.split()) <= 1 and len(answer) <= 24:
                check.bias_ignored(settings, answer)
    # An answer in words that is neither YES nor NO is asked for again, never cached.
    try:
        result = await llm.chat(messages, max_tokens=3, validate=lambda t: parse_yes_no(t) is not None, **ask)
    except LLMOutputError:
        if _thinks(llm, settings):
            return True
        raise
    return parse_yes_no(result.text) is not False


async def glean(llm, prompts: ExtractionPrompts, chunk: Chunk, extraction: Extraction,
                settings: Settings, check: YesNoCheck) -> Extraction:
    """Up to ``max_gleanings`` rounds of asking for missed entities and relationships."""
    if settings.offline:
        return extraction
    for _ in range(settings.index.max_gleanings):
        if not await _should_continue(llm, prompts, chunk, extraction, settings, check):
            break
        messages = glean_messages(prompts, chunk, extraction, settings)
        result = await llm.chat(messages, model=settings.llm.extraction_model, stage="glean",
                                prompt=prompts.glean, validate=usable_records)
        extra = parse_records(result.text, entity_types=settings.index.entity_types)
        extraction.rounds += 1
        if merge_round(extraction, extra) == 0:
            break
    return extraction
