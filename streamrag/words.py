"""Counts said in words: ``1 entity``, ``2 entities``, ``12,345 chunks``.

Every line that says a count with its noun goes through ``plural`` (the word) or ``counted``
(the count and the word), so "1 communities" or "2 daies" cannot come back in one place while
fixed in another. The last word of a phrase takes the plural ("failed item", "LLM call").
"""

from __future__ import annotations

# Nouns whose plural no ending rule gives (none of streamrag's lines says one yet: a new line
# that does adds it here rather than spelling its plural out).
_IRREGULAR = {"child": "children", "person": "people", "criterion": "criteria",
              "series": "series", "species": "species"}   # (their own plural: "-es" made "serieses")


def number(n: int) -> str:
    """A count as every line says it: grouped by thousands, ``12,345`` (the LLM calls and the
    usage table were; the counts beside them, "12345 answers unusable", were not)."""
    return f"{n:,}"


def plural(n: int, word: str) -> str:
    """``word`` (a noun or a phrase ending in one) as said of ``n`` things: ``entity`` of 1,
    ``entities`` of 0 or 2; ``try``/``tries``, ``match``/``matches``, ``day``/``days``."""
    if n == 1:
        return word
    head, _, last = word.rpartition(" ")
    lower = last.lower()
    if lower in _IRREGULAR:
        many = _IRREGULAR[lower]
    elif lower.endswith("sis"):   # (analysis, basis, crisis: "-es" made "basises")
        many = last[:-2] + "es"
    elif lower.endswith("y") and lower[-2:-1] not in ("", *"aeiou"):
        many = last[:-1] + "ies"
    elif lower.endswith(("s", "x", "z", "ch", "sh")):
        many = last + "es"
    else:
        many = last + "s"
    return f"{head} {many}" if head else many


def counted(n: int, word: str, *, grouped: bool = True) -> str:
    """``1 entity``, ``2 entities``, ``3 files``, ``12,345 chunks``: a count (``number``, or as
    written, ``12345``, when not ``grouped``) with its word (``plural``)."""
    return f"{number(n) if grouped else n} {plural(n, word)}"
