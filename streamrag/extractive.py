"""Answers without a language model: the index's own sentences, chosen and cited.

The passages come from the same selection a query mode makes with a model (community reports
chosen by descending the tree, a local context's entities, relationships, reports and chunks,
or retrieved chunks); this module only picks sentences. A sentence scores the summed rarity
(inverse document frequency over the candidate sentences) of the question's words it contains
(compared by stem: "operate" finds "operations"), times the share of those words it contains,
plus a small bonus for the rank of its passage, so a sentence from a better-matching passage
wins ties; an offline report's overview of its members ("7 entities and 12 relationships around
...") comes after every sentence of the documents, but for a question about a community itself
("What is the group around Bob Cratchit?"). Near-duplicates are dropped. A question with
no content words of its own (a broad one) gets the leading sentences of the best passages
instead.

The answer always starts with ``EXTRACTIVE_LABEL``, so it can never pass for a model's answer.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Collection, Iterable, Mapping, Sequence

from streamrag.local_search import STOPWORDS, name_words, query_terms, runs
from streamrag.reports import OVERVIEW_OPENING
from streamrag.sentences import (ABBREVIATIONS, CJK_CLOSERS, CJK_TERMINATORS, HEADING_LINE, HONORIFICS,
                                 NOT_AFTER_ABBREVIATION, QUOTE_MARKS, SETEXT_UNDERLINE, ended,
                                 ends_with_abbreviation, is_heading, table_row_text, table_rows)
from streamrag.terms import unspaced_chars, words

EXTRACTIVE_LABEL = "Extractive answer (no LLM used)"
MAX_SENTENCES = 8
MAX_SENTENCE_WORDS = 60

_CJK_CLOSERS = CJK_CLOSERS + "\u201d\u2019"
# Where a sentence may end: after . ! ? … (and Arabic ؟, Devanagari । ॥, Urdu ۔) and the
# closing quotes and brackets after them, when white space and a letter or digit follow (the
# letter must not be lower-case: ``_sentence_ends``); or after Chinese and Japanese 。！？ (and
# half-width ｡), which need no space, with their closing quotes and brackets.
_SENTENCE_END = re.compile(r"(?<=[.!?\u2026\u061f\u0964\u0965\u06d4])" + NOT_AFTER_ABBREVIATION
                           + r"[\"'\u201d\u2019)\]]*(?=\s+[\"'\u201c\u2018(\[]*([^\W_]))"
                           + rf"|[{CJK_TERMINATORS}]+[{_CJK_CLOSERS}]*")
# A line of its own inside a paragraph: a list item, a table row, a log line (dated, or
# bracketed), when the paragraph starts with one, or the line before it is one or ends with a
# colon - not prose wrapped across lines ("on page\n12. After that").
_ITEM_START = re.compile(r"[ \t]*(?:[-*+\u2022][ \t]|\d{1,3}[.)][ \t]|\||\d{4}-\d\d-\d\d|\[)")
_ITEM_MARK = re.compile(r"^(?:[-*+\u2022]|\d{1,3}[.)])\s+")
_HEADING = re.compile(r"^\s*#+\s*")
_BLOCK_GAP = re.compile(r"\n\s*\n|\n(?=\s*#)")
_TAG = re.compile(r"\[(?:E|L|R|T):[^\]]*\]")


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text`` of at least three words: split at blank lines, Markdown headings,
    list items, table rows and log lines, . ! ? before a capital in any script (not after a
    title or abbreviation such as Mr. or e.g., nor after an initial), and 。！？; headings left
    out (``_titles``)."""
    return [s for s, _quoted, _opening, _before in quoted_sentences(text)]


def quoted_sentences(text: str) -> list[tuple[str, str, str, str]]:
    """``split_sentences(text)`` as (sentence, what an answer quotes for it, the sentence opening
    its quotation, the sentence before it in its paragraph): for a sentence inside a quotation an
    earlier one opened (``_quotations``), the quotation from that one through it, when that is at
    most ``MAX_SENTENCE_WORDS`` words, and that one; else the sentence itself, twice. The
    sentence before is "" for a paragraph's first, and may be one too short to quote ("No Bob.")."""
    out: list[tuple[str, str, str, str]] = []
    units = [unit for block in _blocks(text)
             for unit in (_table_rows(block) if "|" in block else ((u, False) for u in _items(block)))]
    for (line, row), title in zip(units, _titles(units)):
        if title:
            continue
        line = _ITEM_MARK.sub("", " ".join(_HEADING.sub("", line).split()))
        sentences = _sentence_ends(line)
        befores = _befores(sentences)
        for i, (s, first) in enumerate(zip(sentences, _quotations(sentences))):
            # Parenthesised asides ("(Also called Bob.)") are notes, not sentences to quote.
            # A table's row is a record however short ("Cache; Sofia."), no fragment.
            if (row or word_count(s) >= 3) and not s.startswith("("):
                quoted = " ".join(sentences[first:i + 1])
                before = befores[i]
                if word_count(quoted) <= MAX_SENTENCE_WORDS:
                    out.append((s, quoted, sentences[first], before))
                else:
                    out.append((s, s, s, before))
    return out


def _quotable(tag: str, text: str) -> list[tuple[str, str, str, str]]:
    """``quoted_sentences`` of a passage of source text (``[T:...]``); of any other (a report, an
    entity's or a relationship's description), its sentences each quoted alone: offline those are
    sentences taken from all over the text and set side by side, so a quotation one of them left
    open went on with the next, and an answer "quoted as written" what no text writes ("'My dear,'
    said Bob, 'the children! 'And your brother, Tiny Tim?" of a report; "'Old Jacob Marley, tell
    me more! (Also called Jacob.) 'Scrooge and Marley's, I believe,' said one of the gentlemen"
    of a description). (Nor has such a sentence one before it: ``_pronoun_credits``.)"""
    if tag.startswith("[T:"):
        return quoted_sentences(text)
    return [(s, s, s, "") for s in split_sentences(text)]


# A quotation mark as it opens a quotation: at a sentence's start, or after a comma, colon,
# semicolon or dash and a space ("pursued the Ghost, 'the weight"), not after a word ("upon
# 'Change", an elision), nor an elision's opening a sentence ("'Tis the season, O'Brien said."
# went on through its paragraph's sentences, each quoted after it); and as it closes one: after
# a character that is no space, before the end, a space or punctuation ("in life,' replied"; not
# "don't").
_OPENS = re.compile(r"(?:^[(_*]*|(?<=[,:;\u2014] )|(?<=\u2014))"
                    r"(?:[\"\u201c]|['\u2018](?!(?:t(?:is|was|were|will|would)|em)(?![^\W\d_])))(?=\S)",
                    re.IGNORECASE)
_CLOSES = re.compile(r"(?<=\S)[\"'\u201d\u2019](?=$|[\s,.;:!?)\u2014_*])")


def _quotations(sentences: list[str]) -> list[int]:
    """For each of a paragraph's ``sentences``, the index of the one opening the quotation it is
    part of (its own where it is in none): one that a quotation left open goes on with it ("It
    is a ponderous chain!'"), and so does one all quoted after a sentence whose quotation closed
    before its speaker was named ("'I wear the chain I forged in life,' replied the Ghost." and
    "'I made it link by link ...'"): quoted alone, an answer lost the first half of what was
    said, and who said it. A quotation naming its own speaker (news: '"..." said Ada Osk.' after
    '"..." Bo Lund said.') stands alone."""
    out: list[int] = []
    # (``open_``: a quotation is open at the end of the sentence before; ``said``: that sentence
    # quoted someone, then named them: "'I wear ...,' replied the Ghost.")
    open_, said = False, False
    for i, s in enumerate(sentences):
        was_open = open_
        opens = _OPENS.match(s) is not None
        unquoted, open_ = _outside(s, open_)
        outside = any(ch.isalnum() for ch in unquoted)   # (words outside quotes)
        goes_on = was_open or (opens and not outside and said)
        out.append(out[-1] if goes_on and out else i)
        said = (opens or goes_on) and outside and not open_
    return out


def _outside(sentence: str, open_: bool) -> tuple[str, bool]:
    """What ``sentence`` writes outside quotations, given whether one is ``open_`` at its start,
    and whether one is open at its end."""
    kept, at = [], 0
    for pos, opening in sorted([(m.start(), True) for m in _OPENS.finditer(sentence)]
                               + [(m.start(), False) for m in _CLOSES.finditer(sentence)]):
        if not open_ and opening:
            kept.append(sentence[at:pos])
            open_ = True
        elif open_ and not opening:
            open_, at = False, pos + 1
    if not open_:
        kept.append(sentence[at:])
    return " ".join(" ".join(kept).split()), open_


def _befores(sentences: list[str]) -> list[str]:
    """For each of a paragraph's ``sentences``, the one before it as a pronoun opening it may
    stand for a name of (``_pronoun_credits``): "" for the first; the words it writes outside
    quotations, for one opening outside any ("'Ada is late,' said the porter. He shrugged.":
    "said the porter.", for it is the porter who shrugged, not Ada, said only in what he
    said); the whole of it for one inside the quotation it is in ("'Ada is late. She missed
    the train,' said the porter.")."""
    out, open_ = [""], False
    for s in sentences[:-1]:
        unquoted, open_ = _outside(s, open_)
        # (a quotation open after it goes on in the next sentence, which speaks in it)
        out.append(s if open_ else unquoted)
    return out


def _titles(units: list[tuple[str, bool]]) -> list[bool]:
    """Which of a text's units (``_items`` and table rows, in order) are headings, not sentences
    to quote: a line of its own, no list item's, row's or log's, that ``sentences.is_heading``
    reads as one, with the text going on after it (a Markdown heading, a title over its body:
    "Aftermath of Lake Kelholmford Marathon 2034" over an article, a report's "# Ada Osk, Marta
    Lind and Bram Tull" and its findings' "### Ada Osk and Marta Lind"). It names what the text
    under it is about, and stays in the passage the sentences are chosen from; quoted alone it
    was an answer's finding that said nothing. A line in title case with nothing after it ("Call
    Ada Osk on Friday", a note of its own) or ending a paragraph is its text's sentence."""
    out: list[bool] = []
    body_follows = False
    for unit, row in reversed(units):
        line = unit.strip()
        text, _newline, under = line.partition("\n")
        title = not row and _ITEM_START.match(line) is None and (
            is_heading(" ".join(line.split()), body_follows=body_follows) if "\n" not in line
            else _setext_heading(text, under))
        out.append(title)
        body_follows = body_follows or (not title and line != "")
    return out[::-1]


def _setext_heading(text: str, under: str) -> bool:
    """Whether a unit of two lines, ``text`` over ``under``, is a Markdown setext heading: an
    unended line over a line of "=" or "-" ("Harbour Board Minutes" over "====="), a heading
    anywhere as one opening with "#" is (quoted, it read "Harbour Board Minutes ====="). A
    sentence over "---" is a sentence before a rule."""
    return ("\n" not in under and SETEXT_UNDERLINE.match(under) is not None and text.strip() != ""
            and not ended(text.strip()))


def _blocks(text: str) -> list[str]:
    """``text`` parted at blank lines and before each line opening with "#", and after a
    Markdown heading's line: "# Ada Lovelace" over "Ada was a mathematician." read "Ada
    Lovelace Ada was a mathematician." (``sentences.line_parts``'s rule for headings)."""
    out: list[str] = []
    for block in _BLOCK_GAP.split(text):
        first, newline, rest = block.partition("\n")
        if newline and HEADING_LINE.match(first) is not None:
            out += [first, rest]
        else:
            out.append(block)
    return out


def _table_rows(block: str) -> list[tuple[str, bool]]:
    """``_items(block)``, each with whether it is a Markdown table's row, the rows as their cells
    read: "| Ada Osk | Boston |" is "Ada Osk; Boston." (``table_row_text``), a quote without the
    pipes; its delimiter row goes. Which lines are rows is ``sentences.table_rows``'s rule, the
    offline extractor's too; the lines between them are parted as ``_items`` parts any."""
    lines = block.split("\n")
    out: list[tuple[str, bool]] = []
    prose: list[str] = []
    for line, row in zip(lines, table_rows(lines)):
        if not row:
            prose.append(line)
            continue
        if prose:
            out.extend((u, False) for u in _items("\n".join(prose)))
            prose = []
        out.append((table_row_text(line[QUOTE_MARKS.match(line).end():].strip()), True))
    if prose:
        out.extend((u, False) for u in _items("\n".join(prose)))
    return [(u, row) for u, row in out if u.strip()]


def _items(block: str) -> list[str]:
    """``block`` cut before each line of its own (``_ITEM_START``)."""
    units: list[str] = []
    listed, before = False, ""
    for line in block.split("\n"):
        own = _ITEM_START.match(line) is not None and (not units or listed or before.rstrip().endswith(":"))
        if own or not units:
            units.append(line)
            listed = listed or own
        else:
            units[-1] += "\n" + line
        before = line
    return units


def _sentence_ends(line: str) -> list[str]:
    out, start = [], 0
    for m in _SENTENCE_END.finditer(line):
        if m.group(1) and m.group(1).islower():   # "etc. and so on"
            continue
        out.append(line[start:m.end()].strip())
        start = m.end()
    out.append(line[start:].strip())
    return [s for s in out if s]


_SPACED_WORD_END = re.compile(r"[^\W_]+$", re.ASCII)


def _token_words(token: str) -> int:
    """Words in a space-free ``token``: one, or in a script written without spaces, one per two
    characters (about a word's worth), plus one for any other characters beside them."""
    unspaced = unspaced_chars(token)
    return 1 if not unspaced else (unspaced + 1) // 2 + (unspaced < len(token))


def word_count(sentence: str) -> int:
    return sum(_token_words(t) for t in sentence.split())


def _shorten(sentence: str) -> str:
    """``sentence`` cut after ``MAX_SENTENCE_WORDS`` words (``_token_words``), at a space, or
    inside a run of a script written without spaces."""
    out: list[str] = []
    n = 0
    for token in sentence.split():
        count = _token_words(token)
        if n + count > MAX_SENTENCE_WORDS:
            if unspaced_chars(token):   # cut by characters, not inside a spaced script's word
                out.append(_SPACED_WORD_END.sub("", token[:2 * (MAX_SENTENCE_WORDS - n)]))
            return " ".join(t for t in out if t) + " ..."
        out.append(token)
        n += count
    return sentence


# Stop words of questions that are content words in a text ("show", "list", "describe"): stemmed
# like any word, so "shows" meets "show". The other stop words are function words: a stem that is
# one of them ("evening" -> "even") is marked, so it does not meet every "even".
_CONTENT_STOPS = frozenset("tell know give show explain describe list thing things say said says happen "
                           "happened happens".split())
_FUNCTION_WORDS = STOPWORDS - _CONTENT_STOPS
# Words whose ending is not one: "news" is not the plural of "new" (a question about the news
# would otherwise match every sentence saying "new").
_WHOLE = frozenset({"news"})
# Irregular verbs (and a few plurals), base first: "wrote" and "written" meet "write", as no
# ending rule can make them. Left out are forms that are as often another word: "bit" (a
# little), "rose" (the flower), "ground", "wound", "bound", "lay", "bore". (Last, "buses" and
# "gases", whose "e" the rules keep as in "cases", and the pasts of verbs in "-ee", which the
# "ed" rule leaves whole as it does "need" and "proceed".)
_IRREGULAR_TABLE = """
arise arose arisen; awake awoke awoken; bear borne; become became; begin began begun;
bend bent; bite bitten; bleed bled; blow blew blown; break broke broken; breed bred;
bring brought; build built; burn burnt; buy bought; catch caught; choose chose chosen;
cling clung; come came; creep crept; deal dealt; die dying; dig dug; draw drew drawn;
dream dreamt; drink drank drunk; drive drove driven; dwell dwelt; eat ate eaten;
fall fell fallen; feed fed; feel felt; fight fought; find found; flee fled; fling flung;
fly flew flown; forbid forbade forbidden; forget forgot forgotten; forgive forgave forgiven;
freeze froze frozen; get got gotten; give gave given; go goes going went gone; grow grew grown;
hang hung; hear heard; hide hid hidden; hold held; keep kept; kneel knelt; know knew known;
lead led; lean leant; leap leapt; learn learnt; leave left; lend lent; lie lain lying;
light lit; lose lost; make made; mean meant; meet met; pay paid; ride rode ridden;
ring rang rung; rise risen; run ran; see saw seen; seek sought; sell sold; send sent;
shake shook shaken; shine shone; shoot shot; show shown; shrink shrank shrunk; sing sang sung;
sink sank sunk; sit sat; slay slew slain; sleep slept; slide slid; sling slung; smell smelt;
speak spoke spoken; speed sped; spend spent; spin spun; spit spat; spring sprang sprung;
stand stood; steal stole stolen; stick stuck; sting stung; stink stank; stride strode;
strike struck stricken; string strung; strive strove striven; swear swore sworn; sweep swept;
swim swam swum; swing swung; take took taken; teach taught; tear tore torn; think thought;
throw threw thrown; tie tying; tread trod trodden; understand understood; wake woke woken;
wear wore worn; weave wove woven; weep wept; win won; wring wrung; write wrote written;
child children; foot feet; goose geese; knife knives; man men; mouse mice; thief thieves;
tooth teeth; wife wives; woman women; bus buses busses; gas gases;
agree agreed; disagree disagreed; free freed; guarantee guaranteed; decree decreed; referee refereed
"""
_IRREGULAR = {form: entry.split()[0] for entry in _IRREGULAR_TABLE.split(";") for form in entry.split()[1:]}
# A stem of one syllable ending in one vowel and one consonant ("liv", "hop", "us", "quot"): what
# "lived" and "live" leave alike, while "hop" doubles its consonant ("hopped").
_SHORT = re.compile(r"[^aeiou]*(?:qu)?[aeiou][^aeiouwxy]")


@functools.lru_cache(maxsize=65536)   # a global question stems every word of every report read
def stem(word: str) -> str:
    """``word`` without an English inflection, so that the forms of one word meet and different
    words do not: "live", "lives", "lived" and "living" are "live"; "use" and "used" "use"; "hop"
    and "hopped" "hop", "hope" and "hoped" "hope"; "city" and "cities" "city"; "wrote" and
    "written" "write" (``_IRREGULAR``); "operate", "operates" and "operations" "operat". "-er"
    is no ending: "letter" is not "let", "officer" not "office" (nor "colder" "cold": a noun so
    ending is likelier in a question than a comparative); "-ly" only an adverb's of a longer word
    ("clearly" is "clear", ``_without_ly``; "early" is not "ear"); a British double "l" is one
    ("travelled" is "travel", ``_single_l``). A stem
    that is a stop word ("evening" -> "even") is marked, so that it matches its own family and
    not every sentence holding the stop word."""
    if word in _WHOLE or word in _FUNCTION_WORDS:
        return word
    stemmed = _single_l(_strip_ending(_IRREGULAR.get(word, _without_ly(word))))
    return stemmed + "~" if stemmed in _FUNCTION_WORDS else stemmed


# An adverb's "-ly" after an adjective of five letters or more ending in a consonant ("clearly",
# "quickly", "silently", "publicly"): not after a vowel, "l", "y", "b" or "f" ("family",
# "anomaly", "rally", "assembly", "butterfly", whose plurals keep their "ly": "families"), nor
# after "-ing" ("exceedingly" is not "exceed"), nor of a shorter word ("early", "only", "reply",
# "hardly", "nearly", "portly", "kindly"). Checked over the 6,080 words of christmas_carol,
# synth_small, tests/data and the README: 49 new meetings, of words of one family all
# ("clear"/"clearly", "friend"/"friendly", "light"/"lightly"), none lost.
_ADVERB = re.compile(r"[a-z]{4,}[cdghjkmnpqrstvwxz]ly")


def _without_ly(word: str) -> str:
    # (nor of a verb or noun ending so: "multiply", "reapply", "grizzly", whose other forms keep
    # the "ly", "multiplied", "grizzlies")
    if _ADVERB.fullmatch(word) is None or word[:-2].endswith("ing") or word.endswith(("iply", "pply", "zzly")):
        return word
    return word[:-2]


# A final "ll" after a syllable's vowel, past a first syllable ("travell" of "travelled",
# "cancell", "controll", "install", "recall"), is one "l": the British doubling of "travelled",
# "cancelled", "controlling" met neither "travel" nor "travels". Not of a word of one syllable
# ("spell", "call", "still"). Checked over the same 6,080 words: 7 new meetings, each of one
# word's forms (travel/travelling, cancelled/cancels, panel/panelling ...), none lost.
_DOUBLE_L = re.compile(r".*[aeiouy][^aeiouy]+[aeiou]ll")


def _single_l(stemmed: str) -> str:
    return stemmed[:-1] if _DOUBLE_L.fullmatch(stemmed) else stemmed


def _strip_ending(word: str) -> str:
    """The rules of ``stem``, in order: a plural's or third person's "s", then "ed" or "ing",
    then a final "e" (kept where the stem is short: ``_e_ending``)."""
    if word.endswith(("ies", "ied")) and len(word) > 4:
        return word[:-3] + "y"        # cities, married, tried
    if word.endswith(("ies", "ied")):
        word = word[:-3] + "ie"       # dies, tied: their "ie" is the word's
    elif len(word) > 3 and word[-1] == "s" and word[-2] not in "siu":
        word = word[:-1]              # not "class", "famous", "basis"
    for ending in ("ational", "ation"):
        if word.endswith(ending) and len(word) - len(ending) >= 3:
            word = word[:-len(ending)] + "ate"   # operations -> operate
    for ending in ("ing", "ed"):
        rest = word[:-len(ending)]
        if word.endswith(ending) and not (ending == "ed" and rest.endswith("e")) and _has_vowel(rest):
            if len(rest) > 3 and rest[-1] == rest[-2] and rest[-1] not in "aeioulsfz":
                # hopped -> hop, running -> run (not "called", "passed"); stemmed as the word
                # itself is: "embedded" is "embed" as "embed" and "embeds" are ("emb")
                return _strip_ending(rest[:-1])
            word = rest if rest.endswith("e") else rest + "e"   # seeing -> see; lived -> live
            break
    return _e_ending(word[:-1]) if word.endswith("e") else word


def _has_vowel(rest: str) -> bool:
    # ("shed", "bring" and "need" are no "sh", "br" and "ne" with an ending; "dyed" is "dye")
    return len(rest) >= 2 and any(c in "aeiouy" for c in rest[1:] + rest[0].replace("y", ""))


def _e_ending(rest: str) -> str:
    """The stem of ``rest`` with a final "e" or an ending cut off: with the "e", where ``rest`` is
    short (``_SHORT``: "live" of "lived" and of "live", not "liv") or of two letters ("use",
    "eye", "see"); without it otherwise ("operat", "offic"), as the ending's forms lack it."""
    return rest + "e" if len(rest) <= 2 or _SHORT.fullmatch(rest) else rest


def same_stem(word: str, stem_: str) -> bool:
    """Whether ``word`` is of ``stem_`` (a ``stem``)."""
    return stem(word) == stem_


def stem_start(stem_: str) -> str:
    """What the regular words of ``stem_`` (``same_stem``) begin with: "liv" ("living"), "marr"
    ("married", "marries": their "y" was an "i"). A stem of three letters is its own start ("use",
    "day", "try"): "using" and "tried" are left out, as a start of two letters ("us", "da") makes
    fts5vocab walk the doclists of every word so beginning ("wa", with "was", took 2.6 ms an
    ask at 13,200 chunks, "way" 0.3). The irregular ones are ``irregular_forms``."""
    if len(stem_) <= 3:
        return stem_
    return stem_[:-1] if stem_.endswith(("e", "y")) else stem_


def irregular_forms(stem_: str) -> tuple[str, ...]:
    """The words of ``_IRREGULAR`` that are of ``stem_`` ("wrote", "written" of "write")."""
    return _FORMS_OF.get(stem_, ())


def _forms_of() -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for form in _IRREGULAR:
        out[stem(form)] = (*out.get(stem(form), ()), form)
    return out


_FORMS_OF = _forms_of()


def asked_names(question: str, anchors: Sequence[str] = ()) -> frozenset[str]:
    """The words of the names ``question`` asks about: those it writes capitalised where no
    sentence opens (not first, nor after . ! ? : ; but a title's "Mr."), and those of the entity
    names it holds (``anchors``). A question written in Title Case (a stop word capitalised
    inside a sentence) names nothing by its capitals."""
    caps, end = [], None
    for m in re.finditer(r"[^\W\d_]+", question):
        gap = "" if end is None else question[end:m.start()]
        title = gap.strip() == "." and ends_with_abbreviation(question[max(0, end - 11):end + 1])
        opens = end is None or (re.search(r"[.!?:;\u061f\u3002\uff01\uff1f]", gap) is not None and not title)
        end = m.end()
        if not opens and m.group()[:1].isupper() and m.group() != "I":
            caps.append(m.group())
    if any(w.lower() in STOPWORDS for w in caps):
        caps = []
    return frozenset(w for text in [*caps, *anchors] for w in words(text) if w not in STOPWORDS)


class NameKeys:
    """How ``pick_sentences`` compares words: by stem, but the words of the ``names`` asked
    about (``asked_names``) by their own form (or their plural or singular, or a possessive's:
    "the Cratchits'"), or by stem where a text writes them as a name (capitalised, not in capitals),
    so "Belle" meets "Belle's" and not "the bells" ("belle" and "bells" both stem to "bell"),
    "Port Velvellfield" not "portly", and "Scroog" still meets "Scrooge"."""

    def __init__(self, names: frozenset[str]) -> None:
        self.names = names
        self.stems = {stem(n) for n in names}
        self._keys: dict[tuple[str, bool], str] = {}
        self._sets: dict[str, frozenset[str]] = {}
        self._plains: dict[str, str | None] = {}
        self._asked: dict[tuple, tuple[dict[str, set[str]], set[str]]] = {}

    def word(self, w: str, capitalised: bool) -> str:
        """The key of ``w`` (lower case, as ``words`` gives it), written ``capitalised`` or not."""
        if w in self.names or w + "s" in self.names:
            return "=" + stem(w)
        if w[-1:] == "s" and len(w) > 3 and w[:-1] in self.names:   # ("Mrs" is not Mr's)
            return "=" + stem(w[:-1])
        s = stem(w)
        return "=" + s if capitalised and s in self.stems else s

    def of(self, text: str) -> list[str]:
        """The keys of the words of ``text``, in order."""
        ws = _uncontracted(words(text))
        if not self.names:
            return [stem(w) for w in ws]
        caps = None
        out = []
        for w in ws:
            k = self._plain(w)
            if k is None:   # (its capitals say which key: the text's are read once, if ever)
                caps = _capitalised(text) if caps is None else caps
                k = self._key(w, w in caps)
            out.append(k)
        return out

    def set_of(self, text: str) -> frozenset[str]:
        """``set(self.of(text))``, each distinct word keyed once, and remembered for the same
        text: an offline global search rates every report it reads by its whole text (twice for
        a question of relation words), most of such an ask's work on a large index."""
        found = self._sets.get(text)
        if found is None:
            ws = set(_uncontracted(words(text)))
            if not self.names:
                found = frozenset(map(stem, ws))
            else:
                out, pending = set(), []
                for w in ws:
                    k = self._plain(w)
                    if k is None:
                        pending.append(w)
                    else:
                        out.add(k)
                if pending:   # (most texts have no word whose capitals say which key)
                    caps = _capitalised(text)
                    out.update(self._key(w, w in caps) for w in pending)
                found = frozenset(out)
            self._sets[text] = found
        return found

    def _plain(self, w: str) -> str | None:
        """The key of ``w`` however it is written, or None where its capitals say which (its
        stem is a name's: ``word``). Worked out once a word."""
        try:
            return self._plains[w]
        except KeyError:
            k = self._key(w, False)
            k = self._plains[w] = k if self._key(w, True) == k else None
            return k

    def _key(self, w: str, capitalised: bool) -> str:
        """``word(w, capitalised)``, worked out once."""
        try:
            return self._keys[w, capitalised]
        except KeyError:
            k = self._keys[w, capitalised] = self.word(w, capitalised)
            return k

    def asked(self, terms: Collection[str], names: Sequence[str]) -> tuple[dict[str, set[str]], set[str]]:
        """What ``overlap_rating`` looks for in every report it rates for one question: the keys
        of each of the entity ``names`` it has (those with any), and of its other ``terms``;
        worked out once."""
        memo = (frozenset(terms), tuple(names))
        found = self._asked.get(memo)
        if found is None:
            parts = {name: part for name in names if (part := _name_stems(name, self))}
            rest = {self.word(t, t in self.names) for t in terms} - set().union(*parts.values())
            found = self._asked[memo] = (parts, rest)
        return found


def _asked_keys(question: str, extra_stop: frozenset[str], key: NameKeys) -> set[str]:
    """The keys of ``question``'s words (``query_terms`` without ``extra_stop``), as ``key``
    gives them: "won" of "won't" as a text's (``_uncontracted``)."""
    wont = "wont" in _uncontracted(words(question))
    return {"wont" if wont and t == "won" else key.word(t, t in key.names)
            for t in query_terms(question, extra_stop=extra_stop)}


def _uncontracted(ws: list[str]) -> list[str]:
    """The words ``ws`` (``terms.words``, which parts "won't" into "won" and "t") with the "won"
    of "won't" written "wont": "will not", not the past of "win" (``_IRREGULAR``), which had
    "Who won?" of A Christmas Carol quote "he won't come and dine with us" and "you won't find a
    hole in it"."""
    if "won" not in ws:
        return ws
    return ["wont" if w == "won" and after == "t" else w for w, after in zip(ws, [*ws[1:], ""], strict=True)]


def _capitalised(text: str) -> set[str]:
    """The words of ``text`` written capitalised (not a heading's "PORTLY", for "Port"). (Their
    ``words`` taken at once: a space parts words as their own edges do.)"""
    return set(words(" ".join(tok for tok in set(_LETTERS.findall(text))
                              if tok[:1].isupper() and not tok[1:].isupper())))


_LETTERS = re.compile(r"[^\W\d_]+")


def pick_sentences(question: str, passages: Sequence[tuple[str, str]], *,
                   limit: int = MAX_SENTENCES, extra_stop: frozenset[str] = frozenset(),
                   anchors: Sequence[str] = (), types: Mapping[str, str] | None = None,
                   namesakes: Sequence[str] = (), named: Sequence[str] = ()) -> list[tuple[str, str, float]]:
    """(sentence, tag, score) of the best sentences of ``passages`` (tag, text), best first.

    ``anchors`` are the names of the entities the question names. A sentence that names more of
    them comes first, whatever its other words: the passages of a local context are about the
    anchor, so its name is common among them and weighs little by rarity, and a sentence about
    someone else that shares one rare word with the question ("organization", "born") would
    otherwise come before the anchor's own facts. A sentence naming an anchor by part of its
    name ("Ms. Sarga") counts that part (the whole, for a word of it no other name has, written
    as a name of its own: "Sarga said"; ``_names_by_own``), but not where the part belongs to
    another name of ``types`` that shares words with the anchor's ("Ghost of Christmas Yet" for
    the anchor "Ghost of Christmas Past"), or to another anchor holding it ("Kharos Financial
    Conduct Board" for "Kharos", when the question names both): that sentence is about the
    other one. ``namesakes`` are names of the index outside ``types`` that share a word with an
    anchor (``query._namesakes``): a word one of them has is no anchor's own ("Brandt" of Anna
    Brandt, where the index knows Otto Brandt).

    ``types`` (entity name -> type) lets a question ask for a kind of thing: a sentence naming an
    entity of a type the question names ("Which organization ...") or asks for by its question
    word ("Where": a place, "Who": a person; ``_ASKED_TYPES``) has that type among its words.
    ``named`` are the entities the search found named in the question, for ``asks_about_group``
    alone (given by every mode; they give no anchor credit)."""
    key = NameKeys(asked_names(question, anchors))
    terms = _asked_keys(question, extra_stop, key)
    about_group = asks_about_group(question, asked_names(question, [*anchors, *named]))
    # The question's own words: a kind only its question word asks for ("Who": a person) ranks
    # the sentences that match them, and matches nothing alone: "Who is Belle?", in a context
    # without Belle, quoted the first sentences naming anyone.
    question_words = set(terms)
    typed = _typed_names(question, terms, types or {})
    kinds = set(typed[1].values()) - {""} if typed is not None else set()
    credited = [name for name in anchors if _name_stems(name)]
    anchor_stems = [_name_stems(name, key) for name in credited]
    rivals = [_rivals(name, types or {}, anchors, key) for name in credited]
    owns = [own_words(name, types or {}, [*anchors, *namesakes]) for name in credited]
    split = [(tag, _quotable(tag, _TAG.sub("", text))) for tag, text in passages]
    if typed is not None:
        typed = _names_within(typed[0], (s for _tag, sentences in split for s, _q, _o, _b in sentences)), typed[1]
    people = [(types or {}).get(name, "").lower() in _ASKED_TYPES["who"] for name in credited]
    others = (_other_people(credited, people, types or {}, (b for _tag, sentences in split for *_s, b in sentences))
              if any(people) else _NOTHING)   # (its names looked for only where a person is asked about)
    candidates: list[tuple[int, int, str, str, set[str], set[str], float, bool, tuple[str, str]]] = []
    for p_rank, (tag, sentences) in enumerate(split):
        for s_rank, (sentence, *quoted, before) in enumerate(sentences):
            # A context line's label ("Ada Osk -- Galwen Energy:", "Ada Osk (person):") names
            # what the line is filed under, not what its sentence says: its words count for the
            # anchors and the kinds asked for at half weight (``said`` holds the sentence's own).
            label = _LABEL.match(sentence) if s_rank == 0 else None
            body = sentence[label.end():] if label else sentence
            said = set(key.of(body))
            if typed is not None:
                said |= {typed[1][name] for name in typed[0].findall(body)} - {""}
            ws = said | set(key.of(sentence))
            if typed is not None and label:
                ws |= {typed[1][name] for name in typed[0].findall(label.group())} - {""}
            label_text = label.group() if label else ""
            credits = [_anchor_credit(stems, rival, own, ws, said, label_text, body, key)
                       for stems, rival, own in zip(anchor_stems, rivals, owns, strict=True)]
            if (before and any(people) and not any(credits) and not others.search(before)
                    and not _opens_with_pronoun(before)):
                held = set(key.of(before))
                credits = _pronoun_credits(body, [_anchor_credit(stems, rival, own, held, held, "", before, key)
                                                  for stems, rival, own in zip(anchor_stems, rivals, owns, strict=True)],
                                           people) or credits
                if typed is not None and any(credits):   # (the pronoun names a person, as "Who" asks)
                    kind = {typed[1].get(credited[credits.index(2.0)], "")} - {""}
                    said, ws = said | kind, ws | kind
            credit = sum(credits)
            # A sentence naming an anchor whole by a word of its own ("Halick said at a briefing")
            # has the words of its name for the question's too: with "halick" alone, it came after
            # every sentence writing "Priya Halick" wherever "briefing" was in more sentences.
            ws = ws.union(*(stems for stems, c in zip(anchor_stems, credits, strict=True) if c >= 2))
            overview = (not about_group and " relationship" in sentence
                        and _OVERVIEW.match(sentence) is not None)
            candidates.append((p_rank, s_rank, sentence, tag, ws, said, credit, overview, tuple(quoted)))
    if not candidates:
        return []
    n = len(candidates)
    df = {t: sum(1 for c in candidates if t in c[4]) for t in terms}
    idf = {t: math.log(1 + n / df[t]) for t in terms if df[t]}
    scored = []
    for p_rank, s_rank, sentence, tag, ws, said, credit, overview, quoted in candidates:
        if terms:
            hit = terms & ws
            match = sum(idf.get(t, 0.0) for t in hit)
            if match <= 0 or question_words and not question_words & hit:
                continue
            # scaled by the share of the question's (findable) words it has: a sentence naming
            # both people asked about beats one that shares a single rare word with the question
            score = match * len(hit) / len(idf) + 0.5 / (1 + p_rank) + 0.1 / (1 + s_rank)
            # The anchors named outrank a thing of the kind asked for, which outranks any mix of
            # other words (those add at most sum(idf) + 0.6). Without an anchor the kind is one
            # of the question's words: "Who is Mr. Osttane?" (no entity is named so) quoted
            # "... according to Mr. Quinent." first, as it names a person, and "Mr. Osttane grew
            # up in Quinrellmouth." after.
            tier = sum(idf.values()) + 1.0
            score += tier * credit
            if credited:
                score += tier * (bool(kinds & ws) + bool(kinds & said)) / 2
        else:  # a broad question: lead sentences of the best passages
            score = 1.0 / (1 + p_rank) + 1.0 / (1 + s_rank)
            overview = False   # (what the collection is mostly about: the reports' overviews say it)
        # An offline report's overview ("7 entities and 12 relationships around Bob Cratchit
        # (person), Tiny Tim (person) ...; strongest ties: ...") names all its members, so it
        # matched every question naming one, and came first in 40 of 180 answers (synth_small,
        # A Christmas Carol): a count of the index, not a word of the documents, quoted after them;
        # but as any sentence for a question about a community itself (``asks_about_group``).
        scored.append((overview, -score, p_rank, s_rank, sentence, tag, quoted))
    scored.sort()
    out: list[tuple[str, str, float]] = []
    seen: list[set[str]] = []
    opened: set[tuple[int, str]] = set()   # (passage, quotation's first sentence) quoted
    for _overview, neg, p_rank, _s, sentence, tag, (quoted, opening) in scored:
        # A sentence is quoted with the quotation it goes on (``quoted_sentences``), once: a
        # sentence of a quotation already quoted is a duplicate, what it goes on to say is not,
        # quoted alone under it.
        ws = set(words(sentence))
        if any(len(ws & other) >= 0.8 * max(1, min(len(ws), len(other))) for other in seen):
            continue
        if (p_rank, opening) in opened:
            quoted = sentence
        opened.add((p_rank, opening))
        seen.append(set(words(quoted)))
        out.append((_shorten(quoted), tag, -neg))
        if len(out) >= limit:
            break
    return out


# Words for a community as a whole ("the group around Scrooge"), and what ties one to a name the
# question asks about (``asks_about_group``).
_GROUP_WORDS = frozenset("community communities group groups cluster clusters circle circles".split())
_GROUP_TIES = frozenset("around round of including surrounding containing with near".split())
_BELONG_ASKS = frozenset("does do did is was are were".split())
_TOKEN = re.compile(r"[^\W_]+")


def asks_about_group(question: str, names: Collection[str]) -> bool:
    """Whether ``question`` asks about a community itself: a word for one, in lower case (no word
    of a written name: "Group Nine", "Circle K"), tied to a name it asks about (``names``, the
    words of ``asked_names``, written capitalised but in a question all in lower case): "the
    group around|of|including Bob Cratchit", "Mrs. Cratchit's circle", "Which community does
    Yorros Media Group belong to?", "Which group is Scrooge in?". A group word alone asks about
    something else: "Which group led the strike?", "How did the community react to the flood?",
    "Who owns Galoux Media group?", "the group of carol singers"."""
    tokens = [(m.group(), m.start(), m.end()) for m in _TOKEN.finditer(question)]
    low = [t.casefold() for t, _s, _e in tokens]
    lower_case = question == question.casefold()   # (no capitals to tell a name by)

    def name_at(i: int) -> bool:   # a name asked about opens at word i ("the", titles skipped)
        while i < len(tokens) and (low[i] == "the" or low[i] in _TITLE_WORDS and tokens[i][0][:1].isupper()):
            i += 1
        return i < len(tokens) and low[i] in names and (lower_case or tokens[i][0][:1].isupper())

    for i, (token, start, _end) in enumerate(tokens):
        if low[i] not in _GROUP_WORDS or not (token == low[i] or i == 0):
            continue
        if i + 1 < len(tokens) and low[i + 1] in _GROUP_TIES and name_at(i + 2):
            return True   # the group around X
        for j in (i - 1, i - 2):   # X's circle, X's inner circle
            if (j >= 1 and low[j] == "s" and question[tokens[j - 1][2]:tokens[j][1]] in ("'", "\u2019")
                    and low[j - 1] in names and (j == i - 1 or tokens[i - 1][0] == low[i - 1])):
                return True
        if (i >= 1 and low[i - 1] in ("which", "what") and i + 1 < len(tokens) and low[i + 1] in _BELONG_ASKS
                and name_at(i + 2) and ("belong" in low or low[-1] in ("in", "of", "among"))):
            return True   # which community does X belong to
    return False


def _name_stems(name: str, key: NameKeys | None = None) -> set[str]:
    if key is None:
        return {stem(w) for w in words(name) if w not in STOPWORDS}
    return {k for w, k in zip(words(name), key.of(name), strict=True) if w not in STOPWORDS}


def _rivals(anchor: str, types: Mapping[str, str], anchors: Sequence[str], key: NameKeys
            ) -> tuple[list[tuple[str, ...]], tuple[str, ...]]:
    """The names of ``types`` that share words with ``anchor``'s name, lack one of its words and
    have one it lacks ("Ghost of Christmas Yet" for "Ghost of Christmas Past"; not "Scrooge",
    nor "Scrooge's nephew", for "Scrooge"), and the other ``anchors`` holding its words (the
    question names "Kharos" apart from "Kharos Financial Conduct Board"), as words, longest
    first; and the anchor's words."""
    a = _name_stems(anchor, key)
    out = []
    for name in [*types, *anchors]:
        n = _name_stems(name, key)
        if n & a and n - a and (not a <= n or name in anchors):
            out.append(tuple(words(name)))
    return sorted(set(out), key=lambda w: (-len(w), w)), tuple(words(anchor))


# Titles and abbreviations: a word of a name that names no one alone ("Mrs." of "Mrs. Hallam",
# "Sir" of "Sir Walter Pennick": "At the market, Mrs. Jones said", "Yes, Sir,").
_TITLE_WORDS = frozenset(w for a in ABBREVIATIONS for w in words(a)) | HONORIFICS


def own_words(anchor: str, types: Mapping[str, str], others: Sequence[str]) -> frozenset[str]:
    """The words of ``anchor``'s name (``local_search.name_words``), of two letters or more and
    no title (``sentences.ABBREVIATIONS``, ``HONORIFICS``), that no other name of ``types`` or
    ``others`` (the other anchors, the index's namesakes) has: "torquay" of "Kenji Torquay"
    beside "Kenji Fenvell"; "hallam" of "Mrs. Hallam"."""
    mine = set(name_words(anchor))
    if len(mine) < 2 or len(mine) < len(words(anchor)):
        # A name of one word is named whole or not at all; one with a stop word or a word
        # twice is a phrase whose words name other things ("Bank of England", "the Present").
        return frozenset()
    taken = {w for name in [*types, *others] if name != anchor for w in words(name)}
    # (A letter is an initial, or the "O" of "O'Brien" that "O'Neill said" writes too.)
    return frozenset(w for w in mine - taken - _TITLE_WORDS if len(w) > 1)


def _anchor_credit(a: set[str], rivals: tuple[list[tuple[str, ...]], tuple[str, ...]], own: frozenset[str],
                   ws: set[str], said: set[str], label: str, body: str, key: NameKeys) -> float:
    """How fully a sentence (its ``label`` and ``body``; ``ws`` and ``said`` their stems, as
    ``pick_sentences`` has them) names the anchor of stems ``a``: the share of the anchor's
    words it has, counted in its label and in its body, each without the rival names it
    writes outside the anchor's own name; all of them where it names the anchor by a word of
    its ``own`` alone (``_names_by_own``): "Torquay said at a briefing" names Kenji Torquay as
    fully as "Kenji Torquay addressed the audience" does, and for "What did Kenji Torquay say
    at the briefing?" came 15th, after every sentence writing his whole name."""
    names, whole = rivals
    if names and a & ws:
        said = said - _held_by(body, names, whole, key)
        ws = said | (ws - _held_by(label + " " + body, names, whole, key))
    in_said, in_ws = len(a & said), len(a & ws)
    if own and in_ws < len(a) and in_ws:
        if in_said < len(a) and in_said and _names_by_own(body, own, whole):
            in_said = len(a)
        if in_said == len(a) or _names_by_own(label, own, whole):
            in_ws = len(a)
    return (in_ws + in_said) / len(a)


_WORD_TOKEN = re.compile(r"[^\W\d_][^\W_]*")


# A sentence opening with a pronoun that stands for a person named just before: "Scrooge took
# his melancholy dinner ... He lived in chambers".
_PRONOUN_OPENING = re.compile(r"(?:He|She|His|Her)\b")


def _opens_with_pronoun(text: str) -> bool:
    """Whether ``text`` opens with a pronoun (``_PRONOUN_OPENING``) not followed by a capitalised
    word: "He Lifeng said" names a person ("He" is a Chinese family name), and "His Majesty" and
    "Her Excellency" someone other than the person named before."""
    m = _PRONOUN_OPENING.match(text)
    return m is not None and not text[m.end():].lstrip()[:1].isupper()


def _pronoun_credits(body: str, before: list[float], people: list[bool]) -> list[float] | None:
    """The anchor credits of a sentence (``body``) naming no anchor but by the pronoun it opens
    with ("He lived in chambers which had once belonged to his deceased partner."), from those of
    the sentence before it in its paragraph (``before``): the whole credit of the one person asked
    about that sentence names in full, where it names no other person asked about (``people``:
    which anchors are persons) nor, ``_other_people``, one the question does not ask about; else
    None. Without it, "Where did Scrooge live?" put the sentence saying where 83rd, after every
    sentence writing "Scrooge". (A pronoun inside a sentence is as often someone else's: "The
    office was closed, and the clerk, with the long ends of his white comforter ...", after a
    sentence naming Scrooge alone; and ``pick_sentences`` gives none after a sentence opening
    with a pronoun itself, which goes on about someone named before it: "He did it all ...; and
    to Tiny Tim, who did NOT die, he was a second father. He became as good a friend ...".)"""
    if not _opens_with_pronoun(body):
        return None
    named = [i for i, (c, person) in enumerate(zip(before, people, strict=True)) if c and person]
    if len(named) != 1 or before[named[0]] < 2:
        return None
    return [2.0 if i == named[0] else 0.0 for i in range(len(before))]


def _other_people(anchors: Sequence[str], people: list[bool], types: Mapping[str, str],
                  texts: Iterable[str]) -> re.Pattern:
    """A pattern finding the persons of ``types`` in ``texts`` other than the ``anchors`` that are
    people, and sharing no word with one ("Ebenezer Scrooge" is Scrooge; "Scrooge's nephew" a
    rival ``_anchor_credit`` tells apart): after a sentence naming one of them too, a pronoun may
    stand for either ("Scrooge paid Bob. He thanked him.")."""
    mine = {w for name, person in zip(anchors, people, strict=True) if person for w in name_words(name)}
    names = [name for name, kind in types.items() if kind.lower() in _ASKED_TYPES["who"]
             and name not in anchors and mine.isdisjoint(name_words(name))]
    return _names_within(sorted(names, key=len, reverse=True), texts)


def _names_by_own(text: str, own: frozenset[str], name: tuple[str, ...]) -> bool:
    """Whether ``text`` writes one of the anchor's ``own`` words capitalised, in a run of
    capitalised words (each after a single space) all of the anchor's ``name`` but for stop
    words: "Torquay said", "Scrooge's", "The Torquay family", "Mr. Torquay said"; not "the
    torquay", nor "Dmitri Iskton" (whose "Dmitri" no other name of the context has: it does not
    hold him). A title the offline extractor drops from a name (``sentences.HONORIFICS``: "Mr.",
    "Ms.", "Dr." ...) names the bare name's person, so "Ms. Belwen said" is Zora Belwen as
    "Belwen said" is; one it keeps ("Mrs.", "Miss", "Lady", "Captain" ...: ``nlp.KEEP_TITLES``)
    or another abbreviation or an initial names someone else ("Mrs. Cratchit" is not Bob
    Cratchit, who has no "Mrs" to be named apart by; "T. Ewing" not John R. Ewing). A run
    opening ``text``, where every word is capitalised, names the anchor only with the last word
    of its name: "Torquay said the plan ..." does, "Rose petals covered the steps" (for Rose
    Tyler) and "Mark the date" (Mark Fenton) do not; nor does a month alone where a date has it
    (``_dated``): "The lock opened at last in May." (May Holloway)."""
    held = set(name)
    run: list[str] = []
    start = end = -1

    def names(run: list[str]) -> bool:
        before = text[:start]
        if len(run) > 1 and run[0].casefold() in HONORIFICS:   # "Mr Torquay", British style
            run, before = run[1:], before + run[0] + " "
        ws = set(words(" ".join(run))) - STOPWORDS
        if not (ws & own and ws <= held) or _titled_apart(before.rstrip()):
            return False
        if len(run) == 1 and _dated(run[0], before, text[end:]):
            return False
        return name[-1] in ws or _LETTERS.search(before) is not None

    for m in _WORD_TOKEN.finditer(text):
        token = m.group()
        if not (token[:1].isupper() and not token[1:].isupper()):
            if run and names(run):
                return True
            run = []
        elif run and text[end:m.start()] == " ":
            run.append(token)
        else:
            if run and names(run):
                return True
            run, start = [token], m.start()
        end = m.end()
    return bool(run) and names(run)


def _titled_apart(before: str) -> bool:
    """Whether ``before``, the text before a name, ends with an abbreviation or an initial that
    names someone other than the bare name's person: any but a title the offline extractor
    drops from names (``sentences.HONORIFICS``)."""
    if not ends_with_abbreviation(before):
        return False
    title = _LETTERS.findall(before[-12:])
    return not title or title[-1].casefold() not in HONORIFICS


_MONTHS = frozenset("january february march april may june july august september october november "
                    "december".split())
# Words before a month that make it a date: prepositions of time or place ("in May", "until
# June") and last/next/this .... Not "to", "that", "with", "about", "beside" ..., which lead to a
# person as often ("listened to May", "said that May wants", "argued with May").
_BEFORE_DATES = frozenset("in on of from by until till since during after before through throughout "
                          "within into around between beyond last next this early late every each".split())


def _dated(word: str, before: str, after: str) -> bool:
    """Whether ``word``, a run of capitalised words of its own between ``before`` and ``after``
    in a sentence, is a month written as a date: after a preposition ("in May", "until June",
    "last May") or beside a number ("May 5", "5 May"); a month as a given name is then no name of
    the anchor's, May Holloway's, alone. Ending a sentence is no date ('"Keep the gates shut,"
    said May.'), nor is a month after "to", "that" or "with" ("The crews listened to May")."""
    if word.casefold() not in _MONTHS:
        return False
    last = before.split()[-1:]
    return (bool(last) and (last[0].casefold() in _BEFORE_DATES or last[0][-1:].isdigit())
            or re.match(r"\s*\d", after) is not None)


def _held_by(text: str, names: list[tuple[str, ...]], own: tuple[str, ...], key: NameKeys) -> set[str]:
    """The stems of ``text`` found only inside the ``names`` it writes, but for a name that
    overlaps the anchor's ``own`` without holding it ("Ghost of Christmas" in "Ghost of
    Christmas Past", for the anchor "Christmas Past")."""
    tokens = words(text)
    mine = runs(tokens, own)
    inside = [False] * len(tokens)
    present = set(tokens)
    for name in names:
        if not name or name[0] not in present:   # (most names, where many share a word: no run)
            continue
        for i, j in runs(tokens, name):
            if not any(i < y and x < j and not i <= x < y <= j for x, y in mine):
                inside[i:j] = [True] * (j - i)
    if not any(inside):
        return set()
    keys = key.of(text)
    kept = {k for k, held in zip(keys, inside, strict=True) if not held}
    return {k for k, held in zip(keys, inside, strict=True) if held} - kept


# An offline report's overview sentence (``reports.OVERVIEW_OPENING``), wherever a passage has
# it: opening a report's summary and text and a sub-community's finding, or after its title (a
# local context's line "Title: ...").
_OVERVIEW = re.compile(r"(?:[^\n]{1,300}?: )?" + OVERVIEW_OPENING.pattern)

# The label a local context line starts with: "A -- B: " (a relationship), "Name (type): " (an entity).
_LABEL = re.compile(r"[^:\n]{1,200}? (?:-- [^:\n]{1,200}?|\([^()\n]{1,40}\)): ")

# What a question word asks for, as entity types an index may have.
_ASKED_TYPES = {"where": frozenset("geo location place city country region".split()),
                "who": frozenset("person people".split())}


def _typed_names(question: str, terms: set[str], types: Mapping[str, str]
                 ) -> tuple[list[str], dict[str, str]] | None:
    """The names of ``types`` to look for, longest first (``_names_within``), when the question
    asks for the type of some, and the word (a stem, added to ``terms``) each such name stands
    for; None when it asks for no type."""
    asked = {t for w in set(words(question)) for t in _ASKED_TYPES.get(w, ())}
    kind_of: dict[str, str] = {}   # every name, so that a longer one holding a wanted one wins
    for name, kind in types.items():
        k = stem(kind.lower())
        if len(name) > 1:
            kind_of[name] = k if (k in terms or kind.lower() in asked) else ""
    if not any(kind_of.values()):
        return None
    terms.update(k for k in kind_of.values() if k)
    return sorted(kind_of, key=len, reverse=True), kind_of


_WORD_RUN = re.compile(r"\w+")
_NOTHING = re.compile(r"(?!)")


def _names_within(names: list[str], texts: Iterable[str]) -> re.Pattern:
    """A pattern finding ``names`` (longest first) whole in any of ``texts``, made of those that
    may be found there: a name found whole is written in one text, and each of its words stands
    whole there (its ends are no word's middle), so a name one of whose words no text holds, or
    that no text writes, is left out. The matches are those of all the names; compiling all of
    them cost a tenth of a second of every local ask (5,158 names of an index of 10,000
    documents, of which 234 were written in its sentences)."""
    text = "\n".join(texts)
    held = set(_WORD_RUN.findall(text))
    kept = [name for name in names if held.issuperset(_WORD_RUN.findall(name)) and name in text]
    if not kept:
        return _NOTHING
    return re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, kept)) + r")(?!\w)")


def extractive_answer(question: str, passages: Sequence[tuple[str, str]], *, what: str,
                      extra_stop: frozenset[str] = frozenset(), anchors: Sequence[str] = (),
                      types: Mapping[str, str] | None = None, namesakes: Sequence[str] = (),
                      named: Sequence[str] = ()) -> tuple[str, bool]:
    """The labelled answer: the best sentences of ``passages`` as cited bullets, and whether
    any sentence matched (False: the text says nothing was found).

    ``what`` names where the sentences come from ("community reports", "source text" ...).
    """
    picked = pick_sentences(question, passages, extra_stop=extra_stop, anchors=anchors, types=types,
                            namesakes=namesakes, named=named)
    if not picked:
        return (f"{EXTRACTIVE_LABEL}: nothing in the {what} searched matches the words of this "
                "question. Configure an LLM (llm.api_base) for answers written by a model."), False
    lines = [f"{EXTRACTIVE_LABEL}: the sentences of the {what} most relevant to the question, "
             "quoted as written.", ""]
    lines += [f"- {sentence} {tag}" for sentence, tag, _ in picked]   # read back by ``quotes``
    return "\n".join(lines), True


def words_met(question: str, sentences: Iterable[str], extra_stop: frozenset[str] = frozenset()) -> tuple[int, int]:
    """How many of ``question``'s words (``query_terms`` without ``extra_stop``, compared as
    ``pick_sentences`` compares them) the one of ``sentences`` having most of them has, and how
    many it has in all: what tells a strong answer from one sharing a single word with it."""
    key = NameKeys(asked_names(question))
    terms = _asked_keys(question, extra_stop, key)
    return max((len(terms & key.set_of(s)) for s in sentences), default=0), len(terms)


def overlap_rating(question_terms: set[str], text: str, names: Sequence[str] = (),
                   held: Collection[str] = (), key: NameKeys | None = None) -> float:
    """A 0-5 relevance rating from the share of the question's words found in ``text``, the
    rating model's stand-in when there is no model. Words are compared as ``pick_sentences``
    compares them, by ``key`` (the question's ``NameKeys``; by stem alone without one), so the
    reports rated are those whose sentences can be quoted: "Who is Tim?" no longer rates a
    report for its "times".

    ``names`` are the names of the entities the question names. Each is one of its words,
    found only whole (every word of it in ``text``) or when it is among ``held`` (the names of
    the entities the community rated holds): "Dmitri" alone (Dmitri Iskton's report) is not half
    of "Who is Dmitri Quinquay?", which rated it 3 of 5 and read it instead of his own."""
    key = key or NameKeys(frozenset())
    parts, rest = key.asked(question_terms, names)
    if not rest and not parts:
        return 1.0
    have = key.set_of(text)
    found = len(rest & have) + sum(1 for name, part in parts.items() if name in held or part <= have)
    share = found / (len(rest) + len(parts))
    return 0.0 if share == 0 else float(max(1, min(5, math.ceil(5 * share))))


_QUOTE = re.compile(r"^- (.+?)(?: \.\.\.)? (\[(?:E|L|R|T):[^\]]*\])$", re.MULTILINE)


def quotes(answer: str) -> list[tuple[str, str]]:
    """The sentences an extractive answer quotes, in order (shortened ones without their " ..."),
    each with the tag of the passage it comes from."""
    return _QUOTE.findall(answer)
