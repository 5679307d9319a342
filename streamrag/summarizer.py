"""One coherent description per entity or relationship.

With a single distinct description no call is made, and neither with a few short ones: when their
distinct sentences fit in ``index.summary_join_tokens`` together, they are joined as they are (two
one-line descriptions say no more once rewritten). Otherwise the LLM merges them within
``index.summary_max_tokens``; offline (or when the model fails), the descriptions are joined
sentence by sentence, dropping repeats (and sentences another one contains), up to the same
budget. A failed call raises (and so does an answer that stays unusable: cut off at max_tokens,
or not a description at all, such as code, JSON or chat around an answer); the pipeline records
it and falls back to the extractive summary.
"""

from __future__ import annotations

import functools
import hashlib
import heapq
import re
from collections.abc import Callable, Iterator

from streamrag.config import Settings
from streamrag.parsing import usable_description
from streamrag.prompts import load_prompt
from streamrag.sentences import ended, joined, sentences_of, split_at_gaps
from streamrag.tokens import count_tokens, count_uncached, truncate

VERSION = "3"  # how a description set becomes a summary; a new one re-summarizes every element
# How an offline index's summaries are joined: a new one re-summarizes its every element, free
# (2: sentences keep their boundary, ``sentences.joined``). Not ``VERSION``: a model-built index's
# summaries (joined short ones, fallbacks) would be asked of the model again, paid, for the few
# with a list item in them; they are joined so as their descriptions change. 3: a colon or semicolon
# ending a sentence is kept only before the sentence its description writes after it
# (``sentences.joined``: "Agenda:" of one description and "Ada Osk left" of another read "Agenda:
# Ada Osk left").
EXTRACTIVE_VERSION = "3"


def summarizer_key(settings: Settings) -> str:
    """Everything that decides a summary besides its descriptions: when it changes, every stored
    summary is stale."""
    from streamrag import ids

    ix = settings.index
    how = ("extractive", EXTRACTIVE_VERSION) if settings.offline else (settings.llm.summary_model, load_prompt("summarize").version)
    return ids.digest(VERSION, ix.summary_max_tokens, ix.summary_join_tokens, ix.summary_max_descriptions,
                      ix.encoding, *how, length=12)
SUMMARY_HEADROOM = 2   # max_tokens of a summary request, in multiples of summary_max_tokens


def _distinct_sentences(descriptions: list[str]) -> Iterator[tuple[str, tuple[int, int]]]:
    """The sentences of ``descriptions`` in order, each once (ignoring case), with where it is
    (its description's place, its own in it), as they are read: a summary stops at its budget,
    a few descriptions into a hub's many (each one was split and lower-cased first: 28% of an
    offline index's extractive summaries, profiled)."""
    seen: set[str] = set()
    for d, description in enumerate(descriptions):
        for i, sentence in enumerate(sentences_of(description)):
            if (low := sentence.lower()) not in seen:
                seen.add(low)
                yield sentence, (d, i)


def _key(sentence: str) -> str:
    """Words of the sentence between spaces, so containment is of whole words ("ill" is not in
    "illustrating")."""
    return " " + " ".join(re.findall(r"[\w'-]+", sentence.lower())) + " "


class SentenceCounts:
    """Token counts of sentences, remembered for one summarizing stage (``extractive_summary``).

    Offline, a chunk's sentence is a description of each entity it names and of each pair it
    relates, so the stage counts most sentences two or three times, far apart (every entity
    first, then every relationship): an offline index of 10,000 documents counted 377,000
    sentences, 188,000 distinct, and ``tokens.count_tokens``'s 32,768 remembered texts caught
    12% of them. Here each is counted once while the stage lasts, up to ``MAX_SENTENCES``
    ASCII sentences of ``MAX_CHARS`` characters in all (about 20 MB at 10,000 documents; then
    they are let go, and counted again); others are counted by ``count_tokens``."""

    MAX_SENTENCES = 1 << 18
    MAX_CHARS = 1 << 24

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        self.known: dict[str, int] = {}
        self.chars = 0

    def __call__(self, sentence: str) -> int:
        n = self.known.get(sentence)
        if n is None:
            if not sentence.isascii():
                return count_tokens(sentence, self.encoding)
            if len(self.known) >= self.MAX_SENTENCES or self.chars + len(sentence) > self.MAX_CHARS:
                self.known.clear()
                self.chars = 0
            # (not through ``count_tokens``: its remembered texts are left to the report stage's
            # lines)
            n = self.known[sentence] = count_uncached(sentence, self.encoding)
            self.chars += len(sentence)
        return n


# A kept sentence: its text, word key, tokens + 1 for the space, and where it is (``_distinct_sentences``).
_Item = tuple[str, str, int, tuple[int, int]]


class _Kept:
    """Sentences kept so far, with their word keys and token costs (computed once each)."""

    def __init__(self, encoding: str, counts: SentenceCounts | None = None) -> None:
        self.count = counts or (lambda sentence: count_tokens(sentence, encoding))
        self.items: list[_Item] = []

    def tokens(self, items: list[_Item] | None = None) -> int:
        """The tokens of ``items`` (those kept) joined: a full stop each that ``joined`` may give
        one without an end, but the last."""
        items = self.items if items is None else items
        return sum(item[2] for item in items) + sum(not ended(item[0]) for item in items[:-1])

    def text(self) -> str:
        """The kept sentences joined, one ending with a colon or semicolon keeping it before the
        sentence written after it in its description (its list), not before another's."""
        items = self.items
        follows = [b[3] == (a[3][0], a[3][1] + 1) for a, b in zip(items, items[1:])]
        return joined([item[0] for item in items], follows)

    def add(self, sentence: str, at: tuple[int, int]) -> list[_Item] | None:
        """The items with ``sentence`` added, unless a kept sentence already says it (contains
        it: None); kept sentences it contains give way to it, in place.

        Overlapping chunks quote the same passage cut at different points, so one description
        often holds another's sentence and more ("A storm hit" / "A storm hit the quay")."""
        key = _key(sentence)
        if any(key in item[1] for item in self.items):
            return None
        item = (sentence, key, self.count(sentence) + 1, at)
        out: list[_Item] = []
        placed = False
        for kept in self.items:
            if kept[1] in key:
                if not placed:
                    out.append(item)
                    placed = True
            else:
                out.append(kept)
        return out if placed else out + [item]


def extractive_summary(descriptions: list[str], max_tokens: int, encoding: str = "o200k_base",
                       counts: SentenceCounts | None = None) -> str:
    """Distinct sentences of ``descriptions`` in order, within ``max_tokens`` (their tokens
    counted by ``counts``, a stage's, when given)."""
    kept = _Kept(encoding, counts)
    for sentence, at in _distinct_sentences(descriptions):
        trial = kept.add(sentence, at)
        if trial is None:
            continue
        if kept.tokens(trial) > max_tokens:
            return kept.text() if kept.items else truncate(sentence, max_tokens, encoding)
        kept.items = trial
    return kept.text()


def short_join(descriptions: list[str], max_tokens: int, encoding: str = "o200k_base") -> str | None:
    """The distinct sentences of ``descriptions`` joined, if that fits in ``max_tokens``; else None."""
    kept = _Kept(encoding)
    for sentence, at in _distinct_sentences(descriptions):
        kept.items = kept.add(sentence, at) or kept.items
        if kept.tokens() > 2 * max_tokens + 50:
            return None   # far over already: a hub's hundred descriptions need not all be read
    text = kept.text()
    return text if count_tokens(text, encoding) <= max_tokens else None


def summary_input(descriptions: list[str], limit: int) -> list[str]:
    """The descriptions a summary is built from: all of them, or ``limit`` of them chosen by a hash
    of their text, in their given order.

    The choice depends on the set alone, so a fresh index picks the same ones; and a hub entity
    named in many chunks is summarised again only when a new description enters its chosen few,
    not on every mention. Near-identical descriptions of one subject say the same thing, so a
    sample of ten loses little within a 150-token summary.
    """
    return _chosen(descriptions, limit, _digest)


def _digest(description: str) -> bytes:
    return hashlib.sha1(description.encode()).digest()


def _chosen(descriptions: list[str], limit: int, key: Callable[[str], bytes]) -> list[str]:
    """``summary_input`` with the hash of a description given by ``key``. (``nsmallest`` keeps
    the first of equal keys as a stable sort does: the same ones, without sorting thousands.)"""
    if limit <= 0 or len(descriptions) <= limit:
        return list(descriptions)
    chosen = set(heapq.nsmallest(limit, descriptions, key=key))
    return [d for d in descriptions if d in chosen]


def new_summary_input(now: list[str], before: list[str], limit: int) -> list[str] | None:
    """The descriptions a summary of ``now`` is built from (``summary_input``), chosen once for
    the caller to pass on; None when it would be built from those it was built from ``before``,
    the same way: a lone description is kept whole, while a summary of several that
    ``index.summary_max_descriptions`` (``limit``) = 1 cuts to one is held to the summary's budget.

    A hub's ``now`` and ``before`` are its thousands of descriptions less and plus an edit's few:
    each is hashed once for both choices (hashing and sorting each list was most of the
    re-merge of a big log's hubs on an edit)."""
    if now == before:   # (nothing of it said anew or unsaid: none hashed)
        return None
    key = functools.lru_cache(maxsize=None)(_digest)
    chosen = _chosen(now, limit, key)
    if chosen == _chosen(before, limit, key) and (len(now) > 1) == (len(before) > 1):
        return None
    return chosen


def asks_model(chosen: list[str], settings: Settings) -> bool:
    """Whether ``summarize`` (with a model) asks it for the descriptions ``summary_input`` has
    ``chosen``: several, too long to join (what ``index --estimate`` counts)."""
    ix = settings.index
    return len(chosen) > 1 and short_join(chosen, min(ix.summary_join_tokens, ix.summary_max_tokens),
                                          ix.encoding) is None


def without_model(chosen: list[str], settings: Settings, counts: SentenceCounts | None = None) -> str | None:
    """The summary ``summarize`` writes without a model of the descriptions ``summary_input``
    has ``chosen`` (the caller chooses once: ``summarize`` builds its prompt from them, ``index
    --estimate`` its stand-in): none, one kept whole, a few short ones joined, or (offline) the
    extractive summary (``counts``: see ``extractive_summary``); None when it asks one."""
    budget = settings.index.summary_max_tokens
    encoding = settings.index.encoding
    if not chosen:
        return ""
    if len(chosen) == 1:
        return truncate(chosen[0], budget * 2, encoding)
    if settings.offline:
        return extractive_summary(chosen, budget, encoding, counts)
    return short_join(chosen, min(settings.index.summary_join_tokens, budget), encoding)


async def summarize(llm, name: str, descriptions: list[str], settings: Settings,
                    counts: SentenceCounts | None = None) -> tuple[str, str | None]:
    """A single description of ``name`` from its distinct ``descriptions`` (sorted), and the
    key in ``llm_cache`` of the model's answer it comes from (None when no model wrote it).
    ``counts``: the stage's sentence counts (``extractive_summary``)."""
    budget = settings.index.summary_max_tokens
    encoding = settings.index.encoding
    descriptions = summary_input(descriptions, settings.index.summary_max_descriptions)
    if (written := without_model(descriptions, settings, counts)) is not None:
        return written, None
    prompt = load_prompt("summarize")
    # Room beyond the budget, and what comes back is kept within the budget here (whole
    # sentences): an answer cut off at max_tokens once past the budget loses nothing by the cut
    # and is used (asked again with more room, a model that rambled failed the element on every
    # run, paying three calls each time); one cut off short of it is asked again.
    result = await llm.chat(summary_messages(name, descriptions, settings), model=settings.llm.summary_model,
                            stage="summarize", prompt=prompt, max_tokens=SUMMARY_HEADROOM * budget,
                            validate=usable_description,
                            on_length=lambda text: count_tokens(text, encoding) > budget,
                            budget_setting="index.summary_max_tokens")
    return within_budget(result.text.strip(), budget, encoding), result.key


def summary_messages(name: str, chosen: list[str], settings: Settings) -> list[dict]:
    """The request ``summarize`` sends for the descriptions ``summary_input`` has ``chosen``:
    built in one place, as ``index --estimate`` looks its answer up in the cache by it."""
    budget = settings.index.summary_max_tokens
    joined = "\n".join(f"- {d}" for d in chosen)
    # Very long lists (an entity named in hundreds of chunks) are cut to a prompt of sane size.
    joined = truncate(joined, max(4 * budget, 4000), settings.index.encoding)
    # A merged description says what its parts say in fewer words, never more: the word limit is
    # the budget's, or four fifths of the input's when that is smaller.
    input_words = sum(len(d.split()) for d in chosen)
    max_words = max(20, min(int(budget * 0.7), int(0.8 * input_words)))
    return load_prompt("summarize").render(name=name, descriptions=joined, max_words=max_words)


def within_budget(text: str, max_tokens: int, encoding: str = "o200k_base") -> str:
    """``text`` if it fits in ``max_tokens``, else its whole sentences that fit (or, when the
    first sentence alone is too long, its first ``max_tokens`` tokens)."""
    if count_tokens(text, encoding) <= max_tokens:
        return text
    out: list[str] = []
    for sentence in split_at_gaps(text):
        if count_tokens(" ".join(out + [sentence]), encoding) > max_tokens:
            break
        out.append(sentence)
    return " ".join(out) if out else truncate(text, max_tokens, encoding)
