"""Characters a reader does not see, taken out of documents and names.

Text pasted from the web carries characters with no look of their own inside words: the
zero-width space (U+200B), the word joiner (U+2060), the byte-order mark mid-text (U+FEFF, once
the zero-width no-break space) and the soft hyphen (U+00AD) say no more than where a line may
break; the zero-width non-joiner and joiner (U+200C, U+200D) between letters of scripts that do
not join (Latin, Greek, Cyrillic, CJK) change nothing shown. Each cut a word for the offline
extractor ("Bo Lu\\u200bnd" gave an entity "Bo Lu"), made a name the model copied with one a
second entity beside the name without, and cost the model tokens. ``visible`` takes them out:
the loader reads every document's text through it, and names are keyed through it
(``ids.normalize_name``), so the two agree. Line breaks stay where they are. Between letters
of Arabic, Persian, the Indic scripts, and in emoji sequences, the non-joiner and joiner shape
what is shown, and stay; so do the direction marks.

Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# Where a line may break, or may not: nothing else, wherever they stand.
BREAK_HINTS = "\u00ad\u200b\u2060\ufeff"
# Letters and digits of scripts whose letters a (non-)joiner does not join or part: Latin,
# Greek, Cyrillic, kana, CJK ideographs and Hangul syllables.
_UNJOINED = ("0-9A-Za-z\u00c0-\u024f\u0370-\u03ff\u0400-\u052f\u1e00-\u1fff\u3040-\u30ff"
             "\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7a3")
_UNSEEN = re.compile(f"[{BREAK_HINTS}]+|(?<=[{_UNJOINED}])[\u200c\u200d]+(?=[{_UNJOINED}])")
_ANY = re.compile(f"[{BREAK_HINTS}\u200c\u200d]")


def visible(text: str, check: Callable[[], None] | None = None) -> str:
    """``text`` without the characters a reader does not see (see the module's docstring).
    ``check``, if given, is called before each ``_WINDOW`` characters are searched for one, and
    before each ``_STRETCH`` or so they are taken out of (what it raises stops the search: a big
    file's read, ``loader.read_documents``)."""
    if text.isascii() or not _holds_any(text, check):   # (most texts: one scan, in C; ASCII's quickest)
        return text
    if check is None or len(text) <= _STRETCH:
        return _UNSEEN.sub("", text)
    # (taken out of the whole in one call, a 60 MB text with a soft hyphen in a few words held up
    # a stop 5-11 s under load)
    out, at, n = [], 0, len(text)
    while at < n:
        check()
        seam = _SEAM.search(text, at + _STRETCH) if n - at > _STRETCH else None
        cut = seam.start() if seam is not None else n
        out.append(_UNSEEN.sub("", text[at:cut]))
        at = cut
    return "".join(out)


# Characters searched at once when a check is called between: an 80 MB text in Cyrillic was
# searched in one call of a second or two, which held up a stop.
_WINDOW = 1 << 22
# ... and taken out of (``_UNSEEN.sub``, slower: a second a window of that text, under load).
_STRETCH = 1 << 20
# A place between two characters neither of which ``_UNSEEN`` takes: none of its matches spans
# it, nor looks across it (the (non-)joiners' lookarounds look at the letter beside their run).
_SEAM = re.compile(f"(?<![{BREAK_HINTS}\u200c\u200d])(?![{BREAK_HINTS}\u200c\u200d])")


def _holds_any(text: str, check: Callable[[], None] | None) -> bool:
    if check is None:
        return _ANY.search(text) is not None
    for at in range(0, len(text), _WINDOW):   # (one character each: no match spans two windows)
        check()
        if _ANY.search(text, at, at + _WINDOW) is not None:
            return True
    return False
