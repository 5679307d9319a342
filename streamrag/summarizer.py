"""One coherent description per entity or relationship.

With a single distinct description no call is made. With several, the LLM merges them within
``index.summary_max_tokens``; offline (or when the model fails), the descriptions are joined
sentence by sentence, dropping repeats, up to the same budget. A failed call raises; the
pipeline records it and falls back to the extractive summary.
"""

from __future__ import annotations

import re

from streamrag.config import Settings
from streamrag.prompts import load_prompt
from streamrag.tokens import count_tokens, truncate

_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def extractive_summary(descriptions: list[str], max_tokens: int, encoding: str = "o200k_base") -> str:
    """Distinct sentences of ``descriptions`` in order, within ``max_tokens``."""
    seen: set[str] = set()
    out: list[str] = []
    used = 0
    for description in descriptions:
        for sentence in _SENTENCE.split(description.strip()):
            key = sentence.strip().lower()
            if not key or key in seen:
                continue
            cost = count_tokens(sentence, encoding) + 1
            if used + cost > max_tokens:
                return " ".join(out) if out else truncate(sentence, max_tokens, encoding)
            seen.add(key)
            out.append(sentence.strip())
            used += cost
    return " ".join(out)


def needs_summary(descriptions: list[str]) -> bool:
    return len(descriptions) > 1


async def summarize(llm, name: str, descriptions: list[str], settings: Settings) -> str:
    """A single description of ``name`` from its distinct ``descriptions`` (sorted)."""
    budget = settings.index.summary_max_tokens
    encoding = settings.index.encoding
    if not descriptions:
        return ""
    if len(descriptions) == 1:
        return truncate(descriptions[0], budget * 2, encoding)
    if llm is None or settings.offline:
        return extractive_summary(descriptions, budget, encoding)
    prompt = load_prompt("summarize")
    joined = "\n".join(f"- {d}" for d in descriptions)
    # Very long lists (an entity named in hundreds of chunks) are cut to a prompt of sane size.
    joined = truncate(joined, max(4 * budget, 4000), encoding)
    # A merged description says what its parts say in fewer words, never more: the word limit is
    # the budget's, or four fifths of the input's when that is smaller.
    input_words = sum(len(d.split()) for d in descriptions)
    max_words = max(20, min(int(budget * 0.7), int(0.8 * input_words)))
    messages = prompt.render(name=name, descriptions=joined, max_words=max_words)
    result = await llm.chat(messages, model=settings.llm.summary_model, stage="summarize",
                            prompt=prompt, max_tokens=budget, validate=lambda t: bool(t.strip()))
    text = result.text.strip()
    return text if count_tokens(text, encoding) <= budget else truncate(text, budget, encoding)
