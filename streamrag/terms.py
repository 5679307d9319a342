"""The words text is searched by, in every language.

Full-text search (SQLite FTS5) and extractive answers match a question's words against the
index's. A word is a run of letters and digits, lower-cased - except in scripts written without
spaces between words (Chinese, Japanese, Thai, Khmer, Lao, Myanmar; Korean too, whose particles
cling to the word before them), where a run is a whole clause: "张伟在北京大学工作" would be one
word that no question matches. There each run counts as its overlapping pairs of characters
(张伟 伟在 在北 北京 ...), the usual way to search such text without a dictionary; a lone
character stays one word.

FTS5's tokenizer knows nothing of this, so the index holds ``fts_text(text)``, which spells a
text with such scripts as its words, space-separated; other text is stored as written, which
the tokenizer already splits as ``words`` does. Both functions are pure and ``fts_text`` is
idempotent (the store's migration relies on it).
"""

from __future__ import annotations

import re
import unicodedata

# Thai, Lao, Myanmar, Hangul Jamo, Khmer, Hiragana and Katakana (not the middle dot), Hangul
# compatibility Jamo, Katakana extension, CJK extension A, CJK unified, Hangul syllables, CJK
# compatibility, half-width Katakana, and the supplementary ideograph planes.
_UNSPACED = ("\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u3040-\u30fa\u30fc-\u30ff"
             "\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
             "\uff66-\uff9f\U00020000-\U0003134f")
_HAS_UNSPACED = re.compile(f"[{_UNSPACED}]")
_PIECE = re.compile(f"[{_UNSPACED}]+|[^{_UNSPACED}]+")
_WORD = re.compile(r"[^\W_]+")
# ... and the vowel signs and tone marks of those scripts, which are no letters (Thai ภาษาไทย
# would fall apart at each one).
_WORD_OR_UNSPACED = re.compile(f"(?:[^\\W_]|[{_UNSPACED}])+")


def has_unspaced(text: str) -> bool:
    """Whether ``text`` has a character of a script written without spaces between words."""
    return _HAS_UNSPACED.search(text) is not None


def words(text: str) -> list[str]:
    """Lower-cased words of ``text`` (letters and digits), in order; a run of a script written
    without spaces is its overlapping character pairs.

    ``lower`` rather than ``casefold``: SQLite's FTS tokenizer lowercases but does not fold
    (``ß`` stays ``ß``), and these words become FTS queries.
    """
    text = unicodedata.normalize("NFKC", text).lower()
    if not has_unspaced(text):
        return _WORD.findall(text)
    out: list[str] = []
    for w in _WORD_OR_UNSPACED.findall(text):
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
    """``text`` as the full-text index holds it: unchanged unless it has a script written
    without spaces, else its ``words`` joined by spaces (so FTS5 finds the same words)."""
    return " ".join(words(text)) if has_unspaced(unicodedata.normalize("NFKC", text)) else text
