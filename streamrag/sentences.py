"""Where a sentence ends: the one rule shared by the chunker, the summarizer and extractive answers.

A full stop after a title, a common abbreviation or a lone capital ("Mrs. Cratchit", "e.g. this",
"J. Smith") ends no sentence. Splitting there cut "said Mrs." off from its name: descriptions
ended mid-sentence and a chunk could end on the title.
"""

from __future__ import annotations

import re

ABBREVIATIONS = ("Mr", "Mrs", "Ms", "Mx", "Dr", "St", "Prof", "Sr", "Jr", "Rev", "Hon", "Gen", "Col",
                 "Capt", "Lt", "Sgt", "Gov", "Sen", "Rep", "Fr", "Mt", "Ft", "Messrs", "Mme", "Mlle",
                 "vs", "cf", "approx", "e.g", "i.e", "viz", "Fig", "Vol", "pp")

# Lookbehinds for a regex matching the whitespace after a sentence's last character: not after
# "<abbreviation>." nor after a lone capital's full stop.
NOT_AFTER_ABBREVIATION = ("".join(rf"(?<!\b{re.escape(a)}\.)" for a in ABBREVIATIONS)
                          + r"(?<!\b[A-Z]\.)")

_ENDS_WITH_ABBREVIATION = re.compile(
    r"(?:\b(?:" + "|".join(re.escape(a) for a in ABBREVIATIONS) + r")|(?<![\w.])[A-Z])\.$")


def ends_with_abbreviation(text: str) -> bool:
    """Whether ``text`` ends with the full stop of an abbreviation or an initial."""
    return _ENDS_WITH_ABBREVIATION.search(text[-12:]) is not None


# Whitespace after . ! ? that ends a sentence. The one-character lookbehind goes first: most
# positions fail it at once, before the thirty-odd abbreviation lookbehinds are tried.
SENTENCE_GAP = re.compile(r"(?<=[.!?])" + NOT_AFTER_ABBREVIATION + r"\s+")
