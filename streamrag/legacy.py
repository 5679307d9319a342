"""Which legacy encoding a file that is not UTF-8 is written in, when its characters say so.

Files written before UTF-8 (and by some Windows tools since) are in their language's code
page: cp1251 or KOI8-R for Russian, ISO-8859-7 for Greek, cp1255 for Hebrew, Shift-JIS or
EUC-JP for Japanese, GBK (GB2312) or Big5 for Chinese, EUC-KR for Korean. Read as cp1252 they
were garbage ("Ìîñêâà") that the extractor took names from, under a warning naming no encoding.

Nearly any bytes decode in several of these, so a file is read in one only when exactly one
reads as text of its language (``_reads_as``): decoded without an error, its words beyond
ASCII of that script's letters alone, in lower case as prose is, with the letters the language
writes most (a wrong code page gives another script, or the right one's rarer letters in the
wrong case), and for CJK its characters in the common part of the code page (a wrong one lands
in its rare extensions), at least ``_FEW`` of them. When none does, or more than one, ``read``
names the nearest (``likely``) and the caller reads the file as before. Western text, whose
accented letters are in words of ASCII ones, reads as none. A file in a 7-bit encoding
(ISO-2022-JP, ISO-2022-KR, HZ) is UTF-8 as well, ASCII: its escape sequences say it
(``escaped``), not its letters; so do ISO-2022-JP's half-width katakana (ESC ( I, read by Python's
``iso2022_jp_ext``). Pure: bytes in, text out.
"""

from __future__ import annotations

import codecs
import collections
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Encoding:
    codec: str   # Python's name for it (a superset where Windows wrote one: cp932, cp949, cp950)
    name: str    # as a user knows it, in the warning
    iconv: str   # iconv's name for it, in the fix


CP1251 = Encoding("cp1251", "cp1251 (Cyrillic)", "CP1251")
KOI8_R = Encoding("koi8_r", "KOI8-R (Cyrillic)", "KOI8-R")
KOI8_U = Encoding("koi8_u", "KOI8-U (Cyrillic)", "KOI8-U")
GREEK = Encoding("iso8859_7", "ISO-8859-7 (Greek)", "ISO-8859-7")
CP1253 = Encoding("cp1253", "cp1253 (Greek)", "CP1253")
HEBREW = Encoding("cp1255", "cp1255 (Hebrew)", "CP1255")
SHIFT_JIS = Encoding("cp932", "Shift-JIS (Japanese)", "CP932")
EUC_JP = Encoding("euc_jp", "EUC-JP (Japanese)", "EUC-JP")
GBK = Encoding("gbk", "GBK (GB2312, Chinese)", "GBK")
BIG5 = Encoding("cp950", "Big5 (Chinese)", "CP950")
EUC_KR = Encoding("cp949", "EUC-KR (Korean)", "CP949")
# 7-bit encodings (every byte ASCII's, so a file in one is UTF-8 too) said by their escape
# sequences, not by their letters (``escaped``): ISO-2022-JP (ESC $ B before Japanese, ESC ( B
# after it), or its superset ISO-2022-JP-2 when the file holds more (JIS X 0212, Korean ...),
# ISO-2022-KR (ESC $ ) C once, then SO before Korean and SI after it), HZ (~{ before Chinese,
# ~} after it). (glibc's iconv knows no HZ; GNU libiconv, macOS's, does as HZ-GB-2312.)
ISO2022_JP = Encoding("iso2022_jp", "ISO-2022-JP (Japanese)", "ISO-2022-JP")
ISO2022_JP_2 = Encoding("iso2022_jp_2", "ISO-2022-JP-2 (Japanese)", "ISO-2022-JP-2")
# ISO-2022-JP with half-width katakana (JIS X 0201's, ESC ( I), which neither of those reads:
# ``iso2022_jp_ext`` (ISO-2022-JP-2's sets but for its Korean, Chinese and 8859 ones, and the
# katakana). iconv reads it as ISO-2022-JP-3 (glibc's; GNU libiconv's among its extra encodings),
# which reads no JIS X 0212 (ESC $ ( D: glibc passes it through as ASCII, "$(D0!"), so a file
# holding that is given ISO-2022-JP-2, whose glibc reading has both (``_iconv_for``).
ISO2022_JP_EXT = Encoding("iso2022_jp_ext", "ISO-2022-JP with half-width katakana (Japanese)",
                          "ISO-2022-JP-3")
ISO2022_KR = Encoding("iso2022_kr", "ISO-2022-KR (Korean)", "ISO-2022-KR")
HZ = Encoding("hz", "HZ-GB-2312 (Chinese)", "HZ-GB-2312")
# Each with what to try when it does not decode: Windows' Greek where ISO's has no character.
# (Hebrew is among them as much so that a Hebrew file, whose letters read as Greek or Cyrillic
# in those code pages, is not taken for either.)
_CANDIDATES = ((CP1251,), (KOI8_U,), (GREEK, CP1253), (HEBREW,), (SHIFT_JIS,), (EUC_JP,), (GBK,), (BIG5,),
               (EUC_KR,))

# How much of a file's text is looked at, and how much of it is decoded at a time to be sure the
# rest decodes (``_decodes``).
_SAMPLE = 65_536
_CHUNK = 1 << 20
_FEW = 16   # letters of a script (CJK characters) below which a file says too little to be read in it
_SHORT = 0.9   # ``_reads_as`` of a text that would read as its language's but for being that short
_ASCII_LETTER = re.compile(r"[A-Za-z]")
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")
_WORD = re.compile(r"[^\W\d_]{2,}")   # (a word of one letter, French "à", says nothing)
# For each alphabet: a word of its letters, its small letters, what its text never holds, and
# the letters it writes most (its vowels: a third of a Slavic text's letters, nearly half a
# Greek one's and a third of a Hebrew one's).
_CYRILLIC_WORD = re.compile("[\u0400-\u04ff]+")
_CYRILLIC_LOWER = re.compile("[\u0430-\u045f\u0491]")
_CYRILLIC_WRONG = re.compile("[\u0430-\u045f\u0491][\u0400-\u042f\u0490]")   # a capital after a small letter
_CYRILLIC_COMMON = re.compile("[оаеиіОАЕИІ]")
_GREEK_WORD = re.compile("[\u0370-\u03ff]+")
_GREEK_LOWER = re.compile("[\u03ac-\u03ce]")
# (a capital after a small letter, a final sigma within a word, a sigma ending one)
_GREEK_WRONG = re.compile("[\u03ac-\u03ce][\u0386-\u03ab]|ς(?=[\u0370-\u03ff])|σ(?![\u0370-\u03ff])")
_GREEK_COMMON = re.compile("[αεηιοάέήίόΑΕΗΙΟ]")
_HEBREW_WORD = re.compile("[\u05d0-\u05ea]+")
_HEBREW_WRONG = re.compile("[\u05da\u05dd\u05df\u05e3\u05e5](?=[\u05d0-\u05ea])")   # a final form within a word
_HEBREW_COMMON = re.compile("[\u05d0\u05d4\u05d5\u05d9]")   # alef, he, vav, yod
# CJK text: ideographs, kana, Hangul syllables, CJK punctuation and full-width forms
# (half-width katakana are not: Shift-JIS makes them of any byte from 0xA1 to 0xDF).
_CJK = re.compile("[\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7a3\uf900-\ufaff\uff01-\uff60]")
# ... and half-width katakana with them, in text a 7-bit encoding's escape sequences say: there only
# ESC ( I makes them (``ISO2022_JP_EXT``), not any byte of a code page.
_ESCAPED_CJK = re.compile("[\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7a3\uf900-\ufaff"
                          "\uff01-\uff9f]")
_KANA = re.compile("[\u3040-\u30ff]")
_HANGUL = re.compile("[\uac00-\ud7a3]")
_IDEOGRAPH = re.compile("[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff01-\uff60]")
# A space between two CJK characters (after an ASCII comma or stop too): Korean spaces its
# words, Chinese and Japanese do not.
_SPACED = re.compile("[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7a3][,.;:!?]? (?=[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7a3])")


@dataclass(frozen=True)
class Reading:
    """What ``read`` makes of a file: the ``text`` in ``encoding`` when exactly one reads as
    its language's text (else None), and the candidates that come nearest (``likely``)."""
    text: str | None
    encoding: Encoding | None
    likely: tuple[Encoding, ...]


def _going_on() -> None:
    """A reading's ``check`` when none is given: nothing stops it."""


def read(data: bytes, check: Callable[[], None] = _going_on) -> Reading:
    """``data`` (not UTF-8) read in the one legacy encoding whose text it is, if exactly one.
    ``check``: the loader's read's (``loader.read_documents``), called as the whole is decoded,
    a chunk at a time (what it raises stops the reading)."""
    fits: list[Encoding] = []
    near: list[tuple[float, Encoding]] = []
    for tries in _CANDIDATES:
        scored = _scored(data, tries, check)
        if scored is None:
            continue
        encoding, score = scored
        if score >= 1:
            fits.append(encoding)
        elif score > 0:
            near.append((score, encoding))
    if len(fits) == 1:
        encoding = _koi8(fits[0], data)
        check()
        return Reading(data.decode(fits[0].codec), encoding, (encoding,))
    near.sort(key=lambda n: -n[0])
    likely = fits or [e for score, e in near if score >= _SHORT] or [e for _, e in near[:1]]
    return Reading(None, None, tuple(_koi8(e, data) for e in likely))


def _scored(data: bytes, tries: tuple[Encoding, ...], check: Callable[[], None]) -> tuple[Encoding, float] | None:
    """The first of ``tries`` that all of ``data`` decodes in, and how well its first ``_SAMPLE``
    characters read as its language's text (``_reads_as``); None when none decodes, or when
    whichever does reads as none (0), found without decoding the whole. Only one that reads as
    text, or near it, is decoded whole, a chunk at a time (``_decodes``): each of nine code
    pages decoded whole took 125 MB to judge a 25 MB cp1252 file, which comes near none."""
    scores = [(encoding, _scored_head(data, encoding)) for encoding in tries]
    for i, (encoding, score) in enumerate(scores):
        if score is None:
            continue
        if not any(later for _, later in scores[i:]):
            return None
        if _decodes(data, encoding, check):
            return encoding, score
    return None


def _scored_head(data: bytes, encoding: Encoding) -> float | None:
    """``_reads_as`` of the first ``_SAMPLE`` characters of ``data`` in ``encoding``, or None when
    the bytes decoded for them (up to a character after them) do not decode."""
    decoder = codecs.getincrementaldecoder(encoding.codec)()
    text, start = "", 0
    try:
        while len(text) < _SAMPLE and start < len(data):
            end = start + _SAMPLE
            text += decoder.decode(data[start:end], final=end >= len(data))
            start = end
    except UnicodeDecodeError:
        return None
    return _reads_as(encoding, text[:_SAMPLE])


def _decodes(data: bytes, encoding: Encoding, check: Callable[[], None]) -> bool:
    """Whether all of ``data`` decodes in ``encoding``, decoded ``_CHUNK`` bytes at a time,
    ``check`` called before each."""
    decoder = codecs.getincrementaldecoder(encoding.codec)()
    view = memoryview(data)
    try:
        for start in range(0, len(data), _CHUNK):
            check()
            decoder.decode(view[start:start + _CHUNK], final=start + _CHUNK >= len(data))
    except UnicodeDecodeError:
        return False
    return True


# HZ as RFC 1843 writes it: "~~" a tilde, "~" and a line end none, "~{" GB2312's characters as
# pairs of bytes (each 0x80 less) closed by "~}" within the line; no other "~" (text that
# holds "~{" is not HZ: "x = ~{1, 2}", "~/{a,b}"). Possessive: no backtracking is kept, which a
# match a byte at a time made 120 bytes of each (20 MB of ASCII with a "~{" took 11 s and 2.4 GB).
_HZ = re.compile(rb"(?:[^~]++|~~|~\n|~\{(?:[\x21-\x7d][\x21-\x7e])*+~\})*+")
_SHIFTS = re.compile("[\x0e\x0f\x1b]")   # SO, SI, ESC


def escaped(data: bytes) -> Reading | None:
    """``data`` read in the 7-bit encoding its escape sequences say (ISO-2022-JP, ISO-2022-KR,
    HZ), if it is in one: every byte ASCII, the encoding's sequences in it (HZ's well formed:
    ``_HZ``), decoded without an error and with no escape or shift left (a log in colour holds
    ESC [ ... m, which ISO-2022-JP's decoder lets through), into text whose characters beyond
    ASCII are CJK ones, nearly all (a wrong reading gives Greek, Cyrillic and box drawing). No
    ``_FEW``: the sequences say the encoding, however little text they hold. Else None.
    ISO-2022-JP with half-width katakana (ESC ( I, ``ISO2022_JP_EXT``) is tried last, when
    neither ISO-2022-JP nor its -2 reads the file: it was read as its escape codes, garbage."""
    # (The sequences first: two searches, as cheap as a caller's check, leave most files out;
    # each behind a search of its first byte alone, which runs at memory speed where a search of
    # two bytes does not: the two took 0.05 s of each read of a 25 MB log, holding neither byte.)
    if b"\x1b" in data and (b"\x1b$" in data or b"\x1b(I" in data):
        tries: tuple[Encoding, ...] = (ISO2022_KR,) if b"\x1b$)C" in data else (ISO2022_JP, ISO2022_JP_2,
                                                                                ISO2022_JP_EXT)
    elif b"~" in data and b"~{" in data:
        tries = (HZ,)
    else:
        return None
    if not data.isascii() or tries[0] is HZ and not _HZ.fullmatch(data):
        return None
    decoded = _decoded(data, tries)
    if decoded is None:
        return None
    encoding, text = decoded
    cjk = _count(_ESCAPED_CJK, text)
    if _SHIFTS.search(text) or not cjk or cjk < 0.9 * _count(_NON_ASCII, text):
        return None
    if encoding is HZ:   # (any two ASCII letters in "~{ ~}" are a character: ask for common ones,
        # GB2312's symbols and first level, bytes below 0xD8, as Chinese text's nearly all are)
        chars = _NON_ASCII.findall(text)
        if sum(_gb2312(ch)[:1] < b"\xd8" for ch in chars) < 0.9 * len(chars):
            return None
    encoding = _iconv_for(encoding, data)
    return Reading(text, encoding, (encoding,))


# JIS X 0212 designated (ESC $ ( D), which ISO-2022-JP-3's iconv does not read (``ISO2022_JP_EXT``).
_JIS_X_0212 = b"\x1b$(D"
ISO2022_JP_EXT_0212 = Encoding(ISO2022_JP_EXT.codec, ISO2022_JP_EXT.name, ISO2022_JP_2.iconv)


def _iconv_for(encoding: Encoding, data: bytes) -> Encoding:
    """``encoding``, ``data`` read in it, with the iconv name that reads all of ``data``: ISO-2022-JP
    with half-width katakana and JIS X 0212 too is glibc's ISO-2022-JP-2 (ISO-2022-JP-3 passes
    JIS X 0212 through as ASCII, garbage)."""
    return ISO2022_JP_EXT_0212 if encoding is ISO2022_JP_EXT and _JIS_X_0212 in data else encoding


# The bytes KOI8-U reads as its Ukrainian letters, and KOI8-R as box drawing (all others each
# reads alike, and both read every byte).
_KOI8_U_ONLY = b"\xa4\xa6\xa7\xad\xb4\xb6\xb7\xbd"


def _koi8(encoding: Encoding, data: bytes) -> Encoding:
    """KOI8-U, the Cyrillic ``encoding`` ``data`` is read in, is KOI8-R when no Ukrainian
    letter is in it (where KOI8-R draws boxes): told by its bytes, not by decoding it twice."""
    if encoding is KOI8_U and not any(byte in data for byte in _KOI8_U_ONLY):
        return KOI8_R
    return encoding


def _decoded(data: bytes, tries: tuple[Encoding, ...]) -> tuple[Encoding, str] | None:
    for encoding in tries:
        try:
            return encoding, data.decode(encoding.codec)
        except UnicodeDecodeError:
            continue
    return None


def _count(pattern: re.Pattern, text: str) -> int:
    return sum(1 for _ in pattern.finditer(text))


def _reads_as(encoding: Encoding, text: str) -> float:
    """How well ``text`` (a file decoded in ``encoding``) reads as its language's text: 1 when
    it does, between 0 and 1 when it comes near (its script, too little or mixed), else 0."""
    if encoding in (CP1251, KOI8_U):
        return _alphabet(text, _CYRILLIC_WORD, _CYRILLIC_LOWER, _CYRILLIC_WRONG, _CYRILLIC_COMMON, 0.25)
    if encoding in (GREEK, CP1253):
        return _alphabet(text, _GREEK_WORD, _GREEK_LOWER, _GREEK_WRONG, _GREEK_COMMON, 0.3)
    if encoding is HEBREW:
        return _alphabet(text, _HEBREW_WORD, None, _HEBREW_WRONG, _HEBREW_COMMON, 0.25)
    return _cjk(encoding, text)


def _alphabet(text: str, word: re.Pattern, lower: re.Pattern | None, wrong: re.Pattern,
              common: re.Pattern, least: float) -> float:
    """``_reads_as`` for an alphabet: its words beyond ASCII nearly all of the script's letters
    alone (a Western file's accented letters are in words of ASCII ones: "café" read in cp1251
    is "cafй"), and so nearly every character beyond ASCII (a CJK file read in it is half
    box-drawing); most letters in lower case, none in upper case after one in lower case in a
    word (Greek's accented vowels are capitals in cp1251), and at least ``least`` of them its
    ``common`` ones (the vowels; a wrong code page gives rarer letters)."""
    words = [w for w in _WORD.findall(text) if not w.isascii()]
    pure = [w for w in words if word.fullmatch(w)]
    n = sum(map(len, pure))
    if not pure or len(pure) < 0.8 * len(words) or n < 0.85 * _count(_NON_ASCII, text):
        return 0
    if _count(common, text) < least * n or _count(wrong, text) > 0.01 * n or \
            lower and _count(lower, text) < 0.6 * n:
        return len(pure) / len(words) / 2
    return 1 if n >= _FEW else _SHORT


def _cjk(encoding: Encoding, text: str) -> float:
    """``_reads_as`` for Japanese, Chinese or Korean: nearly every character beyond ASCII of
    CJK text, as many as a third of the letters, and of the language's own kind: kana in
    Japanese, Hangul syllables spaced as words in Korean, ideographs of the code page's common
    part in Chinese (``_chinese``); Chinese and Japanese put no space between words."""
    cjk = _count(_CJK, text)
    if not cjk or cjk < 0.95 * _count(_NON_ASCII, text) or cjk < 0.3 * (cjk + _count(_ASCII_LETTER, text)):
        return 0
    kana, hangul, spaced = _count(_KANA, text), _count(_HANGUL, text), _count(_SPACED, text)
    if encoding is EUC_KR:
        fits = hangul >= 0.6 * cjk and spaced >= 0.05 * hangul
    elif spaced > 0.05 * cjk:
        fits = False
    elif encoding in (SHIFT_JIS, EUC_JP):
        fits = kana >= 0.15 * cjk
    else:
        fits = _count(_IDEOGRAPH, text) >= 0.9 * cjk and \
            _chinese(encoding, collections.Counter(_NON_ASCII.findall(text)))
    return (1 if cjk >= _FEW else _SHORT) if fits else 0.5


def _chinese(encoding: Encoding, chars: collections.Counter) -> bool:
    """Whether the characters beyond ASCII of a text read in ``encoding`` (GBK or Big5) are
    Chinese text's: in GBK, nine in ten of GB2312 (text in another code page read in GBK falls
    in its extensions), and some with a first byte of 0xC9 or more (是 我 这 中 在 有 ...: a
    third of Chinese text's; Korean in EUC-KR, read in GBK as GB2312's ideographs, has none);
    in Big5, nine in ten of its symbols and first, common, level (first bytes up to 0xC6), and
    some with a second byte below 0x80 (as two in five of Big5's characters have; EUC-JP's and
    EUC-KR's, which read in Big5 too, never do)."""
    total = sum(chars.values())
    if encoding is GBK:
        pairs = [(_gb2312(ch), n) for ch, n in chars.items()]
        return sum(n for b, n in pairs if b) >= 0.9 * total and \
            sum(n for b, n in pairs if b and b[0] >= 0xC9) >= 0.1 * total
    pairs = [(ch.encode(encoding.codec), n) for ch, n in chars.items()]
    return sum(n for b, n in pairs if b[0] <= 0xC6) >= 0.9 * total and \
        sum(n for b, n in pairs if len(b) == 2 and b[1] < 0x80) >= 0.1 * total


# Ideographs (the unified ones, extension A, compatibility ones) and Hangul syllables: what
# ``common`` judges (and the loader asks UTF-16 CJK text with no punctuation to be nearly all of).
IDEOGRAPH_OR_SYLLABLE = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7a3]")
# The first (common) level of each CJK code page, by its first bytes: GB2312's 3,755 ideographs,
# Big5's 5,401 (up to C6 7E), JIS X 0208's 2,965 (in EUC-JP), KS X 1001's 2,350 Hangul syllables.
_FIRST_LEVELS = (("gb2312", b"\xb0\xa1", b"\xd7\xfe"), ("cp950", b"\xa4\x40", b"\xc6\x7e"),
                 ("euc_jp", b"\xb0\xa1", b"\xcf\xfe"), ("euc_kr", b"\xb0\xa1", b"\xc8\xfe"))


def common(letters: list[str]) -> float:
    """The share of the ideographs and Hangul syllables among ``letters`` that are common ones,
    in a CJK code page's first level (1 when there are none): nearly all of a text's, and of
    characters drawn at random a third of ideographs (7,174 of 20,992) and a fifth of Hangul
    syllables (2,350 of 11,172)."""
    judged = [ch for ch in letters if IDEOGRAPH_OR_SYLLABLE.match(ch)]
    return sum(map(_common, judged)) / len(judged) if judged else 1.0


@functools.lru_cache(maxsize=16_384)
def _common(ch: str) -> bool:
    for codec, first, last in _FIRST_LEVELS:
        try:
            if first <= ch.encode(codec) <= last:
                return True
        except UnicodeEncodeError:
            continue
    return False


def _gb2312(ch: str) -> bytes:
    """``ch`` in GB2312, or b"" if it has no place there."""
    try:
        return ch.encode("gb2312")
    except UnicodeEncodeError:
        return b""


def cjk_codec(data: bytes) -> Encoding | None:
    """The CJK encoding ``data`` (a file's first bytes, maybe cut in a character at their end)
    reads as text in, if any: mostly CJK, and no control character (UTF-16 CJK text read in
    GBK is ideographs among ASCII controls and NULs). Bytes that read as CJK text in UTF-16 too
    are UTF-16 only when none does."""
    for encoding in (SHIFT_JIS, EUC_JP, GBK, BIG5, EUC_KR):
        try:
            text = codecs.getincrementaldecoder(encoding.codec)().decode(data)
        except UnicodeDecodeError:
            continue
        if not _CONTROL.search(text) and _cjk(encoding, text) > 0:
            return encoding
    return None
