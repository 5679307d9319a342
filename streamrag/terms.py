"""The words text is searched by, in every language.

Full-text search (SQLite FTS5) and extractive answers match a question's words against the
index's, and both take them from ``words``:

* A word is a run of letters and digits, lower-cased (``lower``, not ``casefold``: ``ß`` stays).
* Accents do not count: "Etat" finds "État", "Istanbul" finds "İstanbul", whether the accent was
  typed as one character or as a letter and a combining mark. Latin and Greek letters lose
  their diacritics, Arabic its short vowels and Hebrew its points; other scripts' letters stay
  as they are (Cyrillic й is not и).
* The vowel signs of Indic scripts (Devanagari, Tamil ...) are inside a word: दिल्ली is one word,
  not three letters.
* In scripts written without spaces between words (Chinese, Japanese, Thai, Khmer, Lao,
  Myanmar; Korean too, whose particles cling to the word before them), a run is a whole
  clause: "张伟在北京大学工作" would be one word that no question matches. There a run counts as
  its overlapping pairs of characters (张伟 伟在 在北 北京 ...), the usual way to search such
  text without a dictionary; a lone character stays one word.

FTS5's own tokenizer knows none of this, so the index holds ``fts_text(text)``, the text's words
joined by spaces, and a question's words are matched as quoted strings: whatever FTS5 then does
to a word (it splits Devanagari at its vowel signs) it does alike to both. Both functions are
pure, and ``fts_text`` is idempotent (the store's migration relies on it).
"""

from __future__ import annotations

import re
import unicodedata

# Thai, Lao, Myanmar, Hangul Jamo, Khmer, the ideographic iteration and zero marks (々〆〇),
# Hiragana and Katakana (not the middle dot), Hangul compatibility Jamo, Katakana extension, CJK
# extension A, CJK unified, Hangul syllables, CJK compatibility, half-width Katakana, and the
# supplementary ideograph planes.
_UNSPACED = ("\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u3005-\u3007\u3040-\u30fa\u30fc-\u30ff"
             "\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
             "\uff66-\uff9f\U00020000-\U0003134f")
_HAS_UNSPACED = re.compile(f"[{_UNSPACED}]")
_PIECE = re.compile(f"[{_UNSPACED}]+|[^{_UNSPACED}]+")
_WORD = re.compile(r"[^\W_]+")
# Letters and digits, and the marks that are part of a word: those of the Indic scripts,
# Tibetan and the unspaced scripts (their vowel signs and tone marks are no letters, and
# ภาษาไทย or दिल्ली would fall apart at each one).
# A word is ``(?:[^\W_]|[marks])+``; found faster as runs of one character class (not an
# alternation tried at every character), then cut at underscores, which ``\w`` holds and a
# word does not.
_WORD_RUN = re.compile(f"[\\w\u0900-\u0dff\u0f00-\u0fff{_UNSPACED}]+")
# Characters beyond ASCII: only they can be in ``_ACCENTS``, so only runs of them are translated
# (``str.translate`` with a dict looks up every character of a long, mostly-ASCII text).
_NON_ASCII = re.compile(r"[^\x00-\x7f]+")


# Characters with no look of their own that text pasted from the web carries inside words:
# zero-width spaces and joiners, direction marks and embeddings, invisible operators, the word
# joiner, the Mongolian vowel separator, variation selectors, the soft hyphen and the BOM.
INVISIBLE = ((0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x2064), (0x2066, 0x2069), (0x180E, 0x180E),
             (0xFE00, 0xFE0F), (0x00AD, 0x00AD), (0xFEFF, 0xFEFF))
INVISIBLE_TABLE = {c: None for lo, hi in INVISIBLE for c in range(lo, hi + 1)}


def _accent_table() -> dict[int, str | None]:
    """Latin and Greek letters without their diacritics; combining diacritics, Arabic short
    vowels and tatweel, Hebrew points, and ``INVISIBLE`` characters removed."""
    table: dict[int, str | None] = {}
    for lo, hi in ((0x00C0, 0x024F), (0x0370, 0x03FF), (0x1E00, 0x1FFF)):
        for code in range(lo, hi + 1):
            base = "".join(c for c in unicodedata.normalize("NFD", chr(code)) if not unicodedata.combining(c))
            if base and base != chr(code):
                table[code] = base
    for lo, hi in ((0x0300, 0x036F), (0x1AB0, 0x1AFF), (0x1DC0, 0x1DFF), (0x20D0, 0x20FF),
                   (0xFE20, 0xFE2F), (0x064B, 0x065F), (0x0640, 0x0640), (0x0670, 0x0670),
                   (0x0591, 0x05BD), (0x05BF, 0x05BF), (0x05C1, 0x05C2), (0x05C4, 0x05C5),
                   (0x05C7, 0x05C7), *INVISIBLE):
        table.update(dict.fromkeys(range(lo, hi + 1)))
    return table


_ACCENTS = _accent_table()


def unspaced_chars(text: str) -> int:
    """How many characters of ``text`` are of a script written without spaces between words."""
    return len(_HAS_UNSPACED.findall(text))


def has_unspaced(text: str) -> bool:
    """Whether ``text`` has a character of a script written without spaces between words."""
    return _HAS_UNSPACED.search(text) is not None


def _fold_accents(m: re.Match) -> str:
    return m.group().translate(_ACCENTS)


def words(text: str) -> list[str]:
    """The words of ``text``, in order (see the module's docstring)."""
    if text.isascii():
        return _WORD.findall(text.lower())
    text = _NON_ASCII.sub(_fold_accents, unicodedata.normalize("NFKC", text).lower())
    runs = _WORD_RUN.findall(text)
    if "_" in text:
        runs = [w for run in runs for w in run.split("_") if w]
    if not has_unspaced(text):
        return runs
    out: list[str] = []
    for w in runs:
        if not has_unspaced(w):
            out.append(w)
            continue
        for piece in _PIECE.findall(w):    # "iphone手机" is "iphone" and "手机"
            if len(piece) > 1 and has_unspaced(piece[0]):
                out.extend(piece[i:i + 2] for i in range(len(piece) - 1))
            else:
                out.append(piece)
    return out


def fts_text(text: str) -> str:
    """``text`` as the full-text index holds it: its ``words``, joined by spaces."""
    return " ".join(words(text))
