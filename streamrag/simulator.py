"""A deterministic OpenAI-compatible model server for tests, benchmarks and demos.

It speaks the subset of the OpenAI HTTP API streamrag uses (``/v1/chat/completions`` with and
without ``stream``, ``/v1/embeddings``, ``/v1/models``) over real loopback HTTP, so the code under
test runs its real client, retries and rate limiting. Nothing is random except where asked for:

- **Answers are pure functions of the request.** The task is recognised from the shipped prompts
  (the literal start of each prompt's ``[system]`` section), falling back to structural cues
  (``<text>`` plus the record format, ``<reports>``, ``<points>`` ...). Each answer is built from
  the text inside the prompt: extraction lists the capitalised phrases of ``<text>`` and their
  co-occurrences in sentences, rating scores the overlap of content words between the question
  and each report, and so on. The first extraction deliberately returns only the first
  ``EXTRACT_BATCH`` entities so gleaning has something to find.
- **Faults are a function of (seed, request, attempt).** The *n*-th time the same request
  arrives (the same route and body, whether streamed or not) it draws from
  ``Random(sha256(seed, sha256(request), n))``, so which requests fail does not depend on the
  order concurrent requests arrive in, and a retry of a failed request draws again. With
  probability ``fault_rate`` it fails in one of four ways, chosen evenly: HTTP 500, a hang of
  ``timeout_s`` followed by closing the connection unanswered, a malformed 200 answer (prose and
  broken JSON), or a truncated 200 answer (cut in the middle, ``finish_reason: "length"``).
- **Rate limits use a sliding 60 s window** of admitted requests: a request is refused with 429
  and ``Retry-After`` when admitting it would exceed ``rpm`` requests or ``tpm`` tokens (prompt
  plus completion tokens, known in advance because answers are deterministic). A request larger
  than ``tpm`` on its own is admitted into an empty window rather than refused forever.
- **A key, when given** (``api_key``), is asked of every model route (``/v1/models`` too) as
  OpenAI asks it: ``Authorization: Bearer KEY`` (or Azure's ``api-key: KEY``), else HTTP 401
  ``invalid_api_key``, so a client's handling of a wrong key runs against it.
- **Latency** is ``latency_ms + per_token_ms * completion_tokens``, spread over the chunks when
  streaming.

Tokens are counted with ``streamrag.tokens`` (o200k_base), the same way streamrag counts them.
Start it in-process with ``with Simulator(SimulatorConfig()) as sim: base_url = sim.base_url``,
or from a shell with ``python -m streamrag.simulator --port 8765``.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import math
import random
import re
import signal
import socket
import struct
import sys
import threading
import time
import unicodedata
from collections import Counter, deque
from collections.abc import Callable
from functools import lru_cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import msgspec

from streamrag import nlp
from streamrag.sentences import TITLE_SMALL
from streamrag.tokens import count_message_tokens, count_tokens, get_encoding, truncate

TASKS = ("extract", "glean_check", "glean", "claims", "summarize", "report", "rate", "map",
         "reduce", "answer")
FAULT_KINDS = ("http_500", "timeout", "malformed", "truncated")
EXTRACT_BATCH = 15          # entities per extraction / gleaning answer
MODELS = ("gpt-4o-mini", "gpt-4o", "text-embedding-3-small", "streamrag-simulator")
MISSING_MODEL = "missing-model"


class SimulatorConfig(msgspec.Struct, kw_only=True):
    host: str = "127.0.0.1"
    port: int = 0                   # 0: pick a free port
    latency_ms: float = 0.0
    per_token_ms: float = 0.0
    rpm: int = 0                    # requests per minute, 0 = unlimited
    tpm: int = 0                    # tokens per minute, 0 = unlimited
    fault_rate: float = 0.0
    seed: int = 0
    embedding_dim: int = 64
    timeout_s: float = 30.0         # how long a "timeout" fault holds the connection
    api_key: str = ""               # the key every model route asks for ("": any, or none)


# --------------------------------------------------------------------------------------------
# Text analysis: sentences, capitalised phrases, content words. Pure functions.

_ABBREVIATIONS = {"mr", "mrs", "ms", "dr", "st", "prof", "sr", "jr", "inc", "ltd", "co", "corp",
                  "vs", "etc", "no", "gen", "col", "capt", "lt", "sgt", "rev", "hon", "messrs",
                  "e.g", "i.e", "u.s", "u.k", "mt", "ft", "jan", "feb", "aug", "sept", "oct",
                  "nov", "dec"}
_TITLES = {"mr", "mrs", "ms", "miss", "dr", "prof", "professor", "sir", "madam", "lady", "lord",
           "mister", "master", "dame", "rev", "reverend", "president", "minister", "mayor",
           "senator", "governor", "judge", "captain", "general", "colonel", "chief", "ceo"}
_LEADING_STOP = {
    "the", "a", "an", "this", "that", "these", "those", "he", "she", "it", "they", "we", "i",
    "you", "his", "her", "its", "their", "our", "my", "your", "but", "and", "or", "so", "yet",
    "if", "when", "while", "after", "before", "in", "on", "at", "for", "from", "to", "with",
    "by", "as", "of", "not", "no", "yes", "then", "there", "here", "what", "who", "why", "how",
    "where", "which", "oh", "ah", "ha", "well", "now", "old", "young", "poor", "dear", "good",
    "all", "some", "many", "most", "every", "each", "both", "one", "two", "three", "any",
    "according", "among", "during", "since", "until", "although", "though", "because", "also",
    "however", "meanwhile", "later", "earlier", "today", "yesterday", "tomorrow", "critics",
    "officials", "local", "several", "independent", "supporters", "residents", "experts",
    # Words a model knows are no part of a name though a sentence or a quotation starts with
    # them: "Up Scrooge went", "Perhaps Scrooge could not", "See Note > H here", "O Man!",
    # "'Have I the pleasure", "'Is it a bear?'".
    "o", "lo", "alas", "bah", "pooh", "hallo", "hello", "hurrah", "perhaps", "whereat",
    "whereupon", "wherefore", "up", "down", "even", "still", "just", "only", "again", "indeed",
    "thus", "hence", "therefore", "instead", "besides", "otherwise", "suddenly", "soon", "once",
    "sometimes", "often", "never", "always", "nor", "unless", "upon", "into", "through",
    "without", "within", "against", "about", "over", "under", "behind", "beyond", "whether",
    "see", "let", "look", "am", "is", "are", "was", "were", "be", "been", "have", "has", "had",
    "do", "does", "did", "can", "could", "would", "should", "shall", "must", "might", "me",
    "him", "them", "something", "nothing", "anything", "everything",
} | _TITLES
_HEADLINE_OPENERS = _LEADING_STOP - _TITLES - {"the", "old", "young", "poor", "dear", "good"}
# "I'll", "I'm", "Don't", "Couldn't", "Let's": contractions, never a word of a name.
_CONTRACTION = re.compile(r"i['’](?:ll|m|d|ve)|(?:let|you|we|they|he|she|it|that|there|what)"
                          r"['’](?:s|ll|re|ve|d)|\w+n['’]t")
_CALENDAR = {"january", "february", "march", "april", "may", "june", "july", "august",
             "september", "october", "november", "december", "monday", "tuesday", "wednesday",
             "thursday", "friday", "saturday", "sunday"}
# "The bell struck Twelve", "Twelve!": an hour or a count, however written, names nothing.
_NUMBER_WORDS = {"one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
                 "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
                 "eighteen", "nineteen", "twenty", "thirty", "forty", "fifty", "sixty", "seventy",
                 "eighty", "ninety", "hundred", "thousand", "million", "billion", "dozen"}
# "They are Man's", "God bless Us": a pronoun or a noun for people in general, capitalised for
# emphasis, names no one when it stands alone ("Isle of Man" is a name all the same).
_NO_NAME_ALONE = {"us", "ye", "thee", "thou", "thyself", "myself", "yourself", "ourselves",
                  "man", "men", "woman", "women", "mankind", "humankind", "humanity", "people",
                  "everyone", "everybody", "someone", "somebody", "anyone", "anybody", "nobody"}
_CONNECTORS = {"of", "de", "del", "da", "van", "von", "der", "la", "le", "du", "al", "bin"}
# Heads a model knows are named "... of ...": "Tessaly Ministry of Trade", "Massachusetts
# Institute of Technology", "Royal Bank of Scotland" are one name though the run before "of"
# has more than one capitalised word ("Mira Osk of Harbor Council" is two).
_OF_HEADS = {
    "ministry", "institute", "chamber", "bank", "university", "department", "bureau", "office",
    "board", "court", "museum", "academy", "college", "school", "society", "commission",
    "federation", "council", "republic", "kingdom", "church", "cathedral", "league", "union",
}

_ORG_CUES = {
    "inc", "corp", "corporation", "ltd", "llc", "plc", "company", "co", "authority", "university",
    "council", "committee", "bank", "group", "association", "institute", "agency", "ministry",
    "department", "semiconductors", "systems", "industries", "labs", "laboratories",
    "foundation", "party", "union", "board", "commission", "society", "partners", "holdings",
    "technologies", "bureau", "office", "court", "press", "times", "news", "school", "college",
    "hospital", "church", "trust", "fund", "federation", "alliance", "league", "club", "firm",
    "capital", "ventures", "energy", "motors", "airlines", "pharmaceuticals", "media", "studios",
    "solutions", "logistics", "network", "institution", "academy", "police", "army", "navy",
    "parliament", "senate", "congress", "government", "cooperative", "collective", "exchange",
    "consortium", "works", "foods", "robotics", "dynamics", "aerospace", "analytics",
    "shipping", "railways", "telecom", "insurance", "mills", "farms", "coalition", "initiative",
    "observatory", "museum", "library", "gallery", "theatre", "orchestra", "mining", "bancorp",
    "chamber",
}
_GEO_CUES = {
    "lake", "river", "mount", "mountain", "city", "street", "bay", "island", "islands",
    "valley", "port", "county", "province", "harbor", "harbour", "quay", "square", "park",
    "bridge", "road", "hill", "hills", "forest", "district", "region", "state", "republic",
    "kingdom", "coast", "beach", "falls", "springs", "heights", "village", "town", "avenue",
    "lane", "sea", "ocean", "desert", "plains", "canyon", "peninsula", "strait", "gulf",
    "london", "paris", "england", "france", "europe", "america", "africa", "asia", "cornhill",
    "camden", "north", "south", "east", "west",
}
_GEO_SUFFIXES = ("ford", "burg", "ville", "shire", "haven", "mouth", "field", "bridge")
_EVENT_CUES = {
    "summit", "festival", "strike", "marathon", "talks", "conference", "accord", "election",
    "war", "storm", "flood", "fair", "games", "championship", "crisis", "protest", "expo",
    "forum", "cup", "christmas", "eve", "day", "week", "olympics", "tournament", "race",
    "ceremony", "celebration", "meeting", "trial", "hearing", "referendum", "revolution",
    "battle", "earthquake", "hurricane", "fire", "outbreak", "launch", "gala", "concert",
    "convention", "symposium", "negotiations", "treaty", "merger", "scandal", "blackout",
    "festivity", "holiday", "feast", "show", "exhibition", "award", "awards", "prize", "year",
}
_CUES = _ORG_CUES | _GEO_CUES | _EVENT_CUES | _CONNECTORS
_GEO_PREPOSITIONS = {"in", "near", "from", "across", "outside", "inside", "to", "around"}

_STOPWORDS = {
    "the", "a", "an", "and", "or", "but", "of", "in", "on", "at", "to", "for", "from", "with",
    "by", "as", "is", "are", "was", "were", "be", "been", "being", "it", "its", "this", "that",
    "these", "those", "he", "she", "they", "them", "his", "her", "their", "we", "our", "you",
    "your", "i", "me", "my", "what", "which", "who", "whom", "whose", "why", "how", "when",
    "where", "does", "did", "do", "done", "has", "have", "had", "not", "no", "yes", "can",
    "could", "would", "should", "will", "shall", "may", "might", "must", "about", "into",
    "over", "under", "than", "then", "there", "here", "any", "all", "some", "each", "every",
    "more", "most", "other", "such", "only", "own", "same", "so", "too", "very", "also", "just",
    "main", "key", "themes", "theme", "tell", "describe", "explain", "summarize", "summarise",
    "overall", "important", "role", "roles", "play", "plays", "played", "between", "among",
    "across", "collection", "document", "documents", "dataset", "corpus", "text", "texts",
    "story", "stories", "happen", "happened", "happens", "mentioned", "give", "list",
    "according", "said", "says", "say", "one", "two", "many", "much", "way", "ways", "get",
    "got", "like", "well", "made", "make", "after", "before", "during", "while", "since",
    # What a user calls the collection itself ("the main themes in my notes"): a model reads
    # these as the whole collection, not as a topic to find in a report.
    "notes", "note", "files", "file", "folder", "folders", "archive", "papers", "articles",
}
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+(?=[\"'“‘(\[]*[A-Z0-9])")
_BLANK_LINES = re.compile(r"\n\s*\n")
_LIST_LABEL = re.compile(r"[A-Z][\w ]{0,20}:\s")   # "Related: ", "See also: " before a list
_LIST_JOIN = re.compile(r"[,;&]|\b(?:and|or)\b")
_TOKEN = re.compile(r"[^\W_](?:[\w&'’.]|-(?!-))*")
_WORDS = re.compile(r"[^\W_]+")
_SPACES = re.compile(r"\s+")
# "a great piece of Cold Roast", "a glass of Port": what follows a portion is food or drink.
_PORTION = re.compile(r"\b(?:pieces?|slices?|cups?|glass(?:es)?|bottles?|plates?|bowls?|dish(?:es)?"
                      r"|pounds?|loaf|loaves|joints?|lumps?|morsels?|pints?|jugs?|mugs?|jars?"
                      r"|spoonfuls?|mouthfuls?|sips?|bits?)\s+of\s+"
                      r"([A-Z][\w'’-]*(?:(?:[ \t]+|[ \t]*\n[ \t]*)[A-Z][\w'’-]*)*)")
_NEXT_WORD = re.compile(r"[ \t]*\n?[ \t]*([^\W_]+)")     # on this line or the next
# A lower-case word after an article or a possessive is a noun ("her grace", "the grace period").
_DETERMINERS = {"the", "a", "an", "her", "his", "its", "their", "my", "your", "our", "this",
                "that", "some", "more"}
_AFTER_DETERMINER = re.compile(r"\b(?i:the|an?|her|his|its|their|my|your|our)\s+([a-z]+)\b")
_POSSESSIVE = re.compile(r"['’]s$")       # "Scrooge's" is Scrooge


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``: split at ., ! or ? before a capital, and at blank lines.

    A full stop after a known abbreviation ("Dr.", "Mr.") or a single initial does not end a
    sentence, so "Dr. Fenanti argued" stays one sentence. A Markdown list item or heading is a
    sentence of its own too, as a model reads it: a note's list of twelve links read as one
    sentence gave 66 relationships, all described by the list, and any edit of the list (a
    renamed link) re-summarized all of them.
    """
    out: list[str] = []
    for block in (part for paragraph in _BLANK_LINES.split(text) for part in _markdown_lines(paragraph)):
        block = _SPACES.sub(" ", block).strip()
        if not block:
            continue
        pieces = _SENTENCE_END.split(block)
        current = ""
        for i, piece in enumerate(pieces):
            current = f"{current} {piece}" if current else piece
            last = current.rstrip("\"'”’)]").split(" ")[-1]
            word = last.rstrip(".").casefold()
            if last.endswith(".") and (word in _ABBREVIATIONS or len(word) == 1) and (
                    word != "no" or pieces[i + 1:i + 2] and pieces[i + 1][:1].isdigit()):
                continue    # "Dr. Fenanti", "No. 5", but "No. Never."
            out.append(current.strip())
            current = ""
        if current:
            out.append(current.strip())
    return out


def _markdown_lines(paragraph: str) -> list[str]:
    """``paragraph`` cut before each line that begins a run of its own, as offline extraction
    reads them (``nlp.line_starts``: a list item, a heading and the line after it, a table's
    row, a line after one that ends alone, "Ada Lovelace" over "Ada was ..."); other lines,
    prose a hard wrap cut ("... counted\n12. ships" too), stay with the line above. One rule
    for both: a copy here kept the old one, and read "Ada Lovelace Ada"."""
    if "\n" not in paragraph:
        return [paragraph]
    lines = paragraph.split("\n")
    cuts = sorted({0, *nlp.line_starts(paragraph)})
    return ["\n".join(lines[a:b]) for a, b in zip(cuts, [*cuts[1:], len(lines)])]


def content_terms(text: str) -> set[str]:
    """Lower-cased content words with a crude plural folding, for overlap scores."""
    terms = set()
    for w in _WORDS.findall(unicodedata.normalize("NFKC", text).casefold()):
        if len(w) < 3 or w in _STOPWORDS or w.isdigit() and len(w) < 4:
            continue
        if len(w) > 4 and w.endswith("s") and not w.endswith("ss"):
            w = w[:-1]
        terms.add(w)
    return terms


def _norm(name: str) -> str:
    return _SPACES.sub(" ", name).strip().casefold()


def trim_words(text: str, limit: int) -> str:
    words = text.split()
    if len(words) <= limit:
        return " ".join(words)
    return " ".join(words[:limit]).rstrip(",;:") + " ..."


def _clean_field(text: str, limit: int = 30) -> str:
    """A sentence made safe for a ``|``-separated record field."""
    return trim_words(text.replace("|", "/").replace("\n", " "), limit)


class Mention(msgspec.Struct, frozen=True):
    name: str
    sentence: int
    preceded_by: str        # the lower-cased word before the mention ("" at a sentence start)


def _is_cap(tok: str) -> bool:
    return tok[:1].isupper()


def _no_name_word(word: str) -> bool:
    """Whether ``word`` is one a name does not start with ("The", "Perhaps", "I'll")."""
    folded = word.casefold().rstrip(".")
    return _POSSESSIVE.sub("", folded) in _LEADING_STOP or bool(_CONTRACTION.fullmatch(folded))


def _is_shouting(tok: str) -> bool:
    letters = [c for c in tok if c.isalpha()]
    return len(letters) > 1 and all(c.isupper() for c in letters)


def _bare(tok: str) -> str:
    """``tok`` as a word to compare: folded, without a full stop, quote or possessive after it."""
    return _POSSESSIVE.sub("", tok.rstrip(".'’")).casefold()


def _doubled(sentences: list[str]) -> frozenset[str]:
    """Capitalised words the text writes twice in a row more than once: a name ("Bora Bora",
    "Baden-Baden" read as words), where once is the name said twice ("called Scrooge Scrooge")."""
    seen: dict[str, int] = {}
    for sentence in sentences:
        tokens = list(_TOKEN.finditer(sentence))
        for a, b in zip(tokens, tokens[1:]):
            if (_is_cap(a.group()) and not sentence[a.end():b.start()].strip()
                    and (word := _bare(a.group())) == _bare(b.group())):
                seen[word] = seen.get(word, 0) + 1
    return frozenset(w for w, n in seen.items() if n > 1)


def _runs(sentence: str, doubled: frozenset[str]) -> list[tuple[list[str], bool, str]]:
    """Runs of capitalised tokens in one sentence: (tokens, starts the sentence, word before).

    A word written twice in a row ends the run at the first unless ``doubled`` holds it."""
    runs: list[tuple[list[str], bool, str]] = []
    tokens = list(_TOKEN.finditer(sentence))
    i = kind_end = 0
    while i < len(tokens):
        m = tokens[i]
        tok = m.group()
        if not _is_cap(tok):
            i += 1
            continue
        gap_before = sentence[tokens[i - 1].end():m.start()] if i else sentence[:m.start()]
        initial = i == 0 or bool(re.search(r"[\"“‘(\[:;—–]|--|' |(?:^|\s)'$", gap_before))
        before = "" if i == 0 else tokens[i - 1].group().casefold()
        run = [tok]
        j = i + 1
        while j < len(tokens):
            gap = sentence[tokens[j - 1].end():tokens[j].start()]
            nxt = tokens[j].group()
            prev = tokens[j - 1].group()
            # "called Scrooge Scrooge": a word repeated is the name twice, not a longer name.
            if gap.strip() or _bare(nxt) == _bare(prev) and _bare(prev) not in doubled or (
                    prev.endswith(".") and len(prev.rstrip(".")) > 1
                               and prev.rstrip(".").casefold() not in _TITLES | {"st", "mt", "ft"}):
                break
            # "of" and kin join "Bank of England" and "Ghost of Christmas Past", but not
            # "Mira Osk of Harbor Council": only a single capitalised word takes a connector,
            # or a run ending in a head named with "of" ("Tessaly Ministry of Trade").
            if _is_cap(nxt) or (nxt.rstrip(".").isdigit() and len(nxt.rstrip(".")) <= 4) or (
                    nxt in _CONNECTORS and j + 1 < len(tokens)
                    and (sum(w.casefold().rstrip(".") not in _LEADING_STOP for w in run) == 1
                         or nxt == "of" and run[-1].casefold() in _OF_HEADS)
                    and _is_cap(tokens[j + 1].group())):
                run.append(nxt)
                j += 1
                continue
            if nxt == "the" and run[-1] == "of" and j + 1 < len(tokens) and _is_cap(tokens[j + 1].group()):
                run.append(nxt)
                j += 1
                continue
            # "the Ghost of Christmas Yet to Come": a name does not end in a word like "Yet",
            # so the run goes on over "to" (but "Paris to London" is two names).
            if (nxt == "to" and len(run) > 1 and run[-1].casefold() in _LEADING_STOP
                    and j + 1 < len(tokens) and _is_cap(tokens[j + 1].group())
                    and not sentence[tokens[j].end():tokens[j + 1].start()].strip()):
                run += [nxt, tokens[j + 1].group()]
                j += 2
                continue
            break
        if len(run) == 1 and _a_kind(sentence, tokens, i, j, kind_end):
            kind_end = j
        elif not _in_link_path(sentence, tokens, i):
            runs.append((run, initial, before))
        i = j
    return runs


def _a_kind(sentence: str, tokens: list[re.Match], i: int, j: int, kind_end: int) -> bool:
    """Whether the one capitalised word ``tokens[i]`` (``j`` the token after it) is a kind of
    thing, not a name: after "a" or "an" ("sung a Glee or Catch", "a Truth like this"), or
    joined by "or" / "and" to such a word (``kind_end``: the token after the last one). "a
    Christmas carol" and "a London merchant" use a name for a kind: a word follows it."""
    def joined(k: int) -> bool:     # tokens k - 1 and k with nothing but spaces between
        return 0 < k < len(tokens) and not sentence[tokens[k - 1].end():tokens[k].start()].strip()

    before = tokens[i - 1].group().casefold() if i else ""
    if not joined(i) or not (before in ("a", "an") or before in ("or", "and")
                             and kind_end == i - 1 and joined(i - 1)):
        return False
    after = tokens[j].group() if joined(j) else ""
    return not (after.islower() and after not in _STOPWORDS)


def _in_link_path(sentence: str, tokens: list[re.Match], i: int) -> bool:
    """Whether token ``i`` begins a heading of a link to a note's heading: the loader shows
    ``[[Note#Background#Early years]]`` as "Note > Background > Early years". The headings are
    the linked note's outline, no names of this text: a model takes "Note" at most."""
    if not i or sentence[tokens[i - 1].end():tokens[i].start()] != " > ":
        return False
    return tokens[i - 1].group()[-1] not in ".!?:;"


def _clean_run(run: list[str], initial: bool, common: frozenset[str] = frozenset(),
               alone: frozenset[str] = frozenset(), nouns: frozenset[str] = frozenset()
               ) -> tuple[str, bool]:
    """The entity name a run stands for ("" for none) and whether it still starts a sentence.

    ``common`` holds words the text writes in lower case and never capitalises mid-sentence,
    ``alone`` the names its runs give, ``nouns`` the words it writes in lower case after an
    article or a possessive. First in a run at a sentence start, a common word is no part of
    the name when the rest is a name the text writes without it ("Presently Scrooge",
    "Scrooge" elsewhere), unless the text uses it as a noun: nouns are given names and adverbs
    are not, so "Grace Holm" stays though the text speaks of "her grace" and of "Holm" alone.
    """
    words = [w if re.fullmatch(r"(?:[A-Z]\.)+", w) else w.rstrip(".-'’_").rstrip(".") for w in run]
    words = [w for w in words if w]
    if words:   # "Scrooge's" is Scrooge, but "Marley's Ghost" is not Marley Ghost
        words[-1] = _POSSESSIVE.sub("", words[-1])
    if len(words) > 1 and not any(c.islower() for w in words for c in w) and any(map(_is_shouting, words)):
        return "", False                                    # a heading, dateline or caption
    if (initial and len(words) > 1 and words[0].casefold() in common - nouns
            and not _no_name_word(words[0])       # "O", though "o'clock" writes "o": below
            and _norm(" ".join(words[1:])) in alone):
        words.pop(0)
        initial = False
    # "Up Scrooge went" names Scrooge, but "'O Man!'" names no one: a word the text writes in
    # lower case ("the man") still needs a capital mid-sentence, as if it started the sentence.
    dropped = False
    while words and _no_name_word(words[0]):
        words.pop(0)
        dropped = True
    if dropped:
        initial = initial and len(words) == 1 and words[0].casefold() in common
    while words and (words[-1] in _CONNECTORS or words[-1] == "the"):
        words.pop()
    # "At 2031 Ashbergfield Mayoral Election, ...": named as mid-sentence, where the run starts
    # at the first capital ("spoke at 2031 Ashbergfield Mayoral Election"), not dropped.
    while words and words[0].isdigit():
        words.pop(0)
    if not words:
        return "", False
    if all(w.casefold() in _CALENDAR or w.isdigit()
           or all(part in _NUMBER_WORDS for part in w.casefold().split("-")) for w in words):
        return "", False
    if len(words) == 1 and (_is_shouting(words[0]) and len(words[0]) > 5
                            or words[0].casefold() in _NO_NAME_ALONE and not _is_shouting(words[0])):
        return "", False
    return " ".join(words), initial and len(words) == 1


def _dishes(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """Capitalised food and drink of ``text`` ("a piece of Cold Roast"), folded, and their last
    words: "after the Roast and Boiled" speaks of the same dishes. No model names them, but the
    place in "a glass of Port Vell wine" it names."""
    dishes, last = set(), set()
    for m in _PORTION.finditer(text):
        after = _NEXT_WORD.match(text, m.end())
        if after and after.group(1).islower() and after.group(1) not in _STOPWORDS:
            continue
        words = _norm(m.group(1)).split()
        dishes.add(" ".join(words))
        last.add(words[-1])
    return frozenset(dishes), frozenset(last)


def _a_dish(name: str, run: list[str], before: str, after_dish: bool,
            dishes: tuple[frozenset[str], frozenset[str]]) -> bool:
    """Whether ``name`` (of ``run``, ``before`` the word before it) is a dish of ``dishes``:
    one written whole ("Earl Grey"), or its last word as a noun, after "the" or another dish
    ("after the Roast and Boiled"). Written alone otherwise it is a name: "a cup of Earl
    Grey" makes no dish of "Grey said" or "Mr Grey"."""
    whole, last = dishes
    key = _norm(name)
    if key in whole:
        return True
    return (key in last and _bare(run[0]) == key
            and (before in _DETERMINERS or after_dish and before in ("and", "or")))


def find_mentions(text: str) -> tuple[list[str], list[Mention]]:
    """The sentences of ``text`` and every capitalised-phrase mention in them.

    A lone capitalised word at the start of a sentence ("Officials", "Mind") counts only if the
    same word also appears capitalised elsewhere, where capitals mean a name. In a headline
    written in title case capitals mean nothing: only names the rest of the text uses count.
    """
    sentences = split_sentences(text)
    doubled = _doubled(sentences)
    runs = [_runs(sentence, doubled) for sentence in sentences]
    title_case = [_is_title_case(sentence) for sentence in sentences]
    named = {w.casefold() for idx, in_sentence in enumerate(runs) if not title_case[idx]
             for run, initial, *_ in in_sentence if not initial for w in run}
    common = frozenset(w for w in _WORDS.findall(text) if w.islower()) - named - _CUES
    nouns = frozenset(_AFTER_DETERMINER.findall(text))
    alone = frozenset(_norm(_clean_run(run, initial)[0]) for idx, in_sentence in enumerate(runs)
                      if not title_case[idx] for run, initial, _ in in_sentence)
    dishes = _dishes(text)
    raw: list[tuple[str, bool, Mention]] = []
    for idx, in_sentence in enumerate(runs):
        after_dish = False
        for run, initial, before in in_sentence:
            name, initial = _clean_run(run, initial, common, alone, nouns)
            after_dish = bool(name) and _a_dish(name, run, before, after_dish, dishes)
            if name and not after_dish:
                raw.append((name, initial, Mention(name, idx, before)))
    known = {_norm(n) for n, initial, m in raw if not initial and not title_case[m.sentence]}
    headline = [title_case[idx] and _is_headline(sentence, [r[0] for r in runs[idx]], known)
                for idx, sentence in enumerate(sentences)]
    mid_sentence = {_norm(n) for n, initial, m in raw if not initial and not headline[m.sentence]}
    said: dict[str, list[Mention]] = {}
    for n, _, m in raw:
        said.setdefault(_norm(n), []).append(m)
    mentions = []
    for k, (n, initial, m) in enumerate(raw):
        if headline[m.sentence]:
            mentions += [msgspec.structs.replace(m, name=part) for part in _known_parts(n, mid_sentence)]
        elif not initial or _norm(n) in mid_sentence:
            mentions.append(m)
        elif (k + 1 < len(raw) and raw[k + 1][2].sentence == m.sentence
              and _place_in(sentences[m.sentence], n, raw[k + 1][0])
              and guess_type(raw[k + 1][0], said[_norm(raw[k + 1][0])], []) == "geo"
              and (guess_type(n, [], []) == "geo" or _norm(n) not in common
                   and not n.casefold().endswith("ly"))):
            # "Paris, France is large.", "Lyon, France": a place, and the place it is in. Not
            # "Finally, France agreed" nor "Still, France ...": an adverb, or a word the text
            # writes in lower case, is no place.
            mentions.append(m)
    return sentences, mentions


def _place_in(sentence: str, place: str, region: str) -> bool:
    """Whether ``sentence`` writes ``place`` then a comma and ``region`` ("Paris, France"), the
    way a place is placed in a larger one (the caller checks both are places)."""
    return bool(re.search(rf"(?<![\w'’]){re.escape(place)}, {re.escape(region)}(?![\w'’])",
                          sentence))


def _placed(line: str, a: str, b: str, places: set[str]) -> bool:
    """Whether a line of names (``_names_only``) relates ``a`` and ``b`` all the same: places
    written one in the other ("Paris, France", a dateline or an address), where no "and", "or"
    or label makes the line a list of places ("Kessel, Port Vell and Lake Vell")."""
    if _norm(a) not in places or _norm(b) not in places or _LIST_LABEL.match(line) or re.search(
            r"[;&]|\b(?:and|or)\b", line):
        return False
    return _place_in(line, a, b) or _place_in(line, b, a)


def _place_lists(sentence: str, names: list[str], places: set[str]) -> list[set[str]]:
    """The lists of three names or more in ``sentence`` that hold a place ("visited Lyon, Paris,
    and Nice"): places listed side by side are not in one another, nor otherwise related by
    the sentence, as "Paris, France" is (a model relates each to the sentence's other names)."""
    if len(names) < 3 or not any(_norm(n) in places for n in names):
        return []
    name = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    item = rf"(?<![\w'’])(?:{name})(?:['’]s)?(?![\w'’])"
    found = []
    for m in re.finditer(rf"{item}(?:, {item})+,? (?:and|or) {item}", sentence):
        items = {n for n in names if re.search(rf"(?<![\w'’]){re.escape(n)}(?![\w'’])", m.group())}
        if any(_norm(n) in places for n in items):
            found.append(items)
    return found


def _places_too(sentences: list[str], in_order: dict[int, list[str]], lists: dict[int, list[set[str]]],
                places: set[str], by_name: dict[str, list[Mention]], kinds: dict[str, str]) -> set[str]:
    """Names with no cue to their kind that a model reads as places all the same: one written
    in a place ("Lyon, France"), or a word listed with places ("visited Lyon, Paris, and Nice")."""
    def unmarked(name: str) -> bool:     # no cue, no title ("Mr Lyon" is a person)
        key = _norm(name)
        return kinds[key] == "person" and not any(m.preceded_by.rstrip(".") in _TITLES
                                                  for m in by_name[key])
    more = set()
    for s, names in in_order.items():
        for a, b in zip(names, names[1:]):
            if _norm(b) in places and unmarked(a) and _place_in(sentences[s], a, b):
                more.add(_norm(a))
        for items in lists[s]:     # (one word: "Ada Brenn" listed with places is a person)
            more.update(_norm(n) for n in items if " " not in n and unmarked(n))
    return more


def _is_title_case(sentence: str) -> bool:
    """Whether ``sentence`` is written in title case: four words or more, every word of four
    letters or more capitalised, those of two or three in lower case small words (``TITLE_SMALL``:
    "of", "the"; not "I met Ada Lovelace", a line of a note, whose names were no names; a
    possessive's "s" is none), and no full stop, question or exclamation mark at its end."""
    words = [w for w in _WORDS.findall(sentence) if not w.isdigit()]
    return (len(words) >= 4 and not sentence.rstrip("\"'”’)]").endswith((".", "!", "?"))
            and all(_is_cap(w) if len(w) >= 4 else len(w) < 2 or not w.islower() or w in TITLE_SMALL
                    for w in words))


def _is_headline(sentence: str, runs: list[list[str]], known: set[str]) -> bool:
    """Whether a title-case ``sentence`` is a headline ("Galwen Energy Reports Results, Outlines
    Plans", "How Ostoux Crossing Became a Hub for Industry"), not a line of names ("Related:
    Harbor Council, Mira Osk", "Mira Osk, Ada Brenn and Boris Calder"): words outside the
    names joined, or a run of capitalised words holding a name the text uses and more."""
    if not _names_only(sentence):
        return True
    if _LIST_LABEL.match(sentence):
        return False
    # "2031 Ashbergfield Mayoral Election: What Happened and Why It Matters": a run that opens
    # with a word no name starts with is a headline's words, not a name in a list.
    if any(run[0].casefold().rstrip(".,:;") in _HEADLINE_OPENERS for run in runs):
        return True
    for run in runs:
        words = " ".join(w.strip(".,:;'’") for w in run)
        parts = _known_parts(words, known)
        if parts and parts != [words]:
            return True
    return False


def _known_parts(name: str, known: set[str]) -> list[str]:
    """The longest spans of ``name``'s words that are ``known`` names, left to right."""
    words, parts, i = name.split(), [], 0
    while i < len(words):
        j = next((j for j in range(len(words), i, -1) if _norm(" ".join(words[i:j])) in known), i)
        if j > i:
            parts.append(" ".join(words[i:j]))
        i = max(j, i + 1)
    return parts


def guess_type(name: str, mentions: list[Mention], allowed: list[str]) -> str:
    words = [w.casefold().rstrip(".") for w in name.split() if not w.isdigit()]
    kind = "person"
    titled = any(m.preceded_by.rstrip(".") in _TITLES for m in mentions)
    if titled and len(words) <= 3:
        kind = "person"
    # What follows "of" is what the name is of, not what it is: "Festival of Lights" is an
    # event, "Ghost of Christmas Past" none.
    elif any(w in _EVENT_CUES for w in (words[:words.index("of")] if "of" in words[1:] else words)
             ) or name.split()[-1].isdigit():
        kind = "event"
    elif words and (words[-1] in _ORG_CUES or any(w in _ORG_CUES for w in words[1:])
                    or "of" in words[1:] and words[words.index("of") - 1] in _ORG_CUES):  # "Bank of England"
        kind = "organization"
    elif len(name) <= 5 and _is_shouting(name):
        kind = "organization"               # an acronym
    elif words and (words[0] in _GEO_CUES or words[-1] in _GEO_CUES
                    or (len(words) == 1 and words[0].endswith(_GEO_SUFFIXES))):
        kind = "geo"
    elif sum(m.preceded_by in _GEO_PREPOSITIONS for m in mentions) * 2 > len(mentions):
        kind = "geo"
    return _closest_type(kind, allowed)


def _closest_type(kind: str, allowed: list[str]) -> str:
    if not allowed:
        return kind
    folded = {a.casefold(): a for a in allowed}
    synonyms = {"organization": ("organization", "organisation", "org", "company", "group"),
                "geo": ("geo", "location", "place", "gpe", "geography"),
                "event": ("event", "occurrence"),
                "person": ("person", "people", "character", "individual", "human")}
    for candidate in synonyms.get(kind, (kind,)):
        if candidate in folded:
            return folded[candidate]
    return allowed[0]


class Found(msgspec.Struct):
    name: str
    type: str
    description: str
    sentences: list[int]


class Pair(msgspec.Struct):
    source: str
    target: str
    strength: int
    description: str
    first: int


def analyse(text: str, allowed_types: list[str]) -> tuple[list[Found], list[Pair]]:
    """Entities (in order of first appearance) and co-occurrence relations of ``text``."""
    sentences, mentions = find_mentions(text)
    by_name: dict[str, list[Mention]] = {}
    display: dict[str, str] = {}
    per_sentence: dict[int, list[Mention]] = {}
    for m in mentions:
        key = _norm(m.name)
        by_name.setdefault(key, []).append(m)
        display.setdefault(key, m.name)
        per_sentence.setdefault(m.sentence, []).append(m)
    kinds = {key: guess_type(display[key], ms, []) for key, ms in by_name.items()}
    places = {key for key, kind in kinds.items() if kind == "geo"}
    order = {key: i for i, key in enumerate(by_name)}
    in_order = {s: sorted({display[_norm(m.name)] for m in ms}, key=lambda n: order[_norm(n)])
                for s, ms in per_sentence.items()}
    lists = {s: _place_lists(sentences[s], names, places) for s, names in in_order.items()}
    places |= _places_too(sentences, in_order, lists, places, by_name, kinds)
    entities = []
    for key, ms in by_name.items():
        idxs = sorted({m.sentence for m in ms})
        kind = _closest_type("geo" if key in places else kinds[key], allowed_types)
        entities.append(Found(display[key], kind, _clean_field(sentences[idxs[0]]), idxs))
    pairs: dict[tuple[str, str], list[int]] = {}
    for s, names in sorted(in_order.items()):
        # Names listed together are related too: "Henrik Salo and Ilse Brandt signed an
        # agreement" makes them parties to one, "the friendship between Kessel and Port Vell"
        # is theirs, as a model reports them; places in a list ("Lyon, Paris, and Nice") not.
        listed = _names_only(sentences[s])  # (looked at once a sentence, not once a name in it)
        for a_i, a in enumerate(names):
            for b in names[a_i + 1:]:
                if any(a in items and b in items for items in lists[s]):
                    continue
                if not listed or _placed(sentences[s], a, b, places):
                    pairs.setdefault((a, b), []).append(s)
    relations = [Pair(a, b, min(10, 2 + 2 * len(ss)), _clean_field(sentences[ss[0]]), ss[0])
                 for (a, b), ss in pairs.items()]
    relations.sort(key=lambda p: (p.first, order[_norm(p.source)], order[_norm(p.target)]))
    return entities, relations


def _names_only(sentence: str) -> bool:
    """Whether ``sentence`` is a list of names ("Related: [[A]], [[B]], [[C]]" as shown, "Alice,
    Bob and Carol"): a label and a colon, or names joined by commas, "and" or "or", and no
    lower-case word but those inside names and "and" / "or". It states no relation between
    them, so a model reports none (every pair of twelve links described by the line made 66
    relationships, all summarized again when one link was renamed)."""
    if not (_LIST_LABEL.match(sentence) or _LIST_JOIN.search(sentence)):
        return False
    return all(_is_cap(w) or w[:1].isdigit() or w in _CONNECTORS or w in ("the", "and", "or")
               for w in _TOKEN.findall(sentence))


def _records(entities: list[Found], relations: list[Pair]) -> str:
    lines = [f"entity | {e.name} | {e.type} | {e.description}" for e in entities]
    lines += [f"relation | {r.source} | {r.target} | {r.strength} | {r.description}"
              for r in relations]
    lines.append("done")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Reading the prompt: which task, and the tagged sections inside it.

def _content(message: dict) -> str:
    content = message.get("content") or ""
    if isinstance(content, list):      # multi-part content: keep the text parts
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content)


def section(messages: list[dict], tag: str) -> str | None:
    """The text between ``<tag>`` and ``</tag>`` in the latest message that has them."""
    for message in reversed(messages):
        text = _content(message)
        end = text.rfind(f"</{tag}>")
        if end < 0:
            continue
        start = text.rfind(f"<{tag}>", 0, end)
        if start >= 0:
            return text[start + len(tag) + 2:end].strip("\n")
    return None


@lru_cache(maxsize=1)
def _prompt_prefixes() -> tuple[tuple[str, str], ...]:
    """(literal start of each shipped prompt's system section, task), longest first."""
    from streamrag.prompts import load_prompt

    prefixes = []
    for task in TASKS:
        try:
            system = load_prompt(task).system
        except Exception:               # a missing prompt file only weakens detection
            continue
        literal = system.split("$", 1)[0].strip()
        if len(literal) >= 20:
            prefixes.append((literal, task))
    return tuple(sorted(prefixes, key=lambda p: -len(p[0])))


def detect_task(messages: list[dict], logit_bias: bool = False) -> str:
    """The task of a chat request: a shipped prompt's wording first, then structural cues."""
    for message in reversed(messages):
        text = _content(message).strip()
        for prefix, task in _prompt_prefixes():
            if text.startswith(prefix):
                return task
    everything = "\n".join(_content(m) for m in messages)
    has = {tag: f"</{tag}>" in everything
           for tag in ("text", "found", "question", "reports", "points", "context", "descriptions")}
    if has["found"] and has["text"]:
        if logit_bias or re.search(r"\bYES\b.*\bNO\b", everything, re.S) and "entity |" not in everything:
            return "glean_check"
        return "glean"
    if has["text"]:
        if re.search(r"^\s*claim\s*\|", everything, re.M | re.I):
            return "claims"
        return "extract"
    if has["question"] and has["reports"]:
        return "rate" if re.search(r"ID\s*:\s*SCORE", everything) else "map"
    if has["question"] and has["points"]:
        return "reduce"
    if has["question"] and has["context"]:
        return "answer"
    if has["context"]:
        return "report"
    if has["descriptions"]:
        return "summarize"
    return "unknown"


def _allowed_types(messages: list[dict]) -> list[str]:
    everything = "\n".join(_content(m) for m in messages)
    m = re.search(r"(?:Entity types|TYPE is one of)\s*:\s*([^\n]+)", everything)
    if not m:
        return ["organization", "person", "geo", "event"]
    line = re.split(r"\.\s|\.$", m.group(1))[0]
    return [t.strip() for t in line.split(",") if t.strip()] or ["person"]


def _word_budget(messages: list[dict], default: int) -> int:
    for message in messages:
        if message.get("role") == "system":
            m = re.search(r"(\d+)\s+words", _content(message))
            if m:
                return max(1, int(m.group(1)))
    return default


def _is_found(name: str, found_names: set[str], found_text: str) -> bool:
    """Whether ``<found>`` covers ``name``: as a record/line of its own, or as a whole phrase."""
    if _norm(name) in found_names:
        return True
    for m in re.finditer(rf"(?<![\w'’]){re.escape(name)}(?![\w'’])", found_text, re.I):
        before = found_text[:m.start()]
        after = found_text[m.end():]
        if re.search(r"[A-Z][\w'’]*[ ]$", before) or re.match(r"[ ][A-Z]", after):
            continue                    # part of a longer name
        return True
    return False


def _found_names(found: str) -> set[str]:
    names = set()
    for line in found.splitlines():
        line = re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", line).strip()
        if not line:
            continue
        fields = [f.strip() for f in line.split("|")]
        if len(fields) > 1 and fields[0].casefold() in ("entity", "relation", "relationship"):
            names.update(_norm(f) for f in fields[1:3 if fields[0].casefold() != "entity" else 2])
            continue
        for part in re.split(r"\s+(?:--|->|<->|—)\s+", fields[0]):   # "A -- B" relation pairs
            names.add(_norm(re.sub(r"\s*\([^)]*\)$", "", part)))       # "Name (type)"
    return names


# --------------------------------------------------------------------------------------------
# Answers, one function per task. Each takes the request's messages and returns the text.

def answer_extract(messages: list[dict]) -> str:
    entities, relations = analyse(section(messages, "text") or "", _allowed_types(messages))
    first = entities[:EXTRACT_BATCH]
    keep = {_norm(e.name) for e in first}
    return _records(first, [r for r in relations
                            if _norm(r.source) in keep and _norm(r.target) in keep])


def _missing(messages: list[dict]) -> tuple[list[Found], list[Pair], set[str]]:
    entities, relations = analyse(section(messages, "text") or "", _allowed_types(messages))
    found = section(messages, "found") or ""
    names = _found_names(found)
    covered = {_norm(e.name) for e in entities if _is_found(e.name, names, found)}
    return [e for e in entities if _norm(e.name) not in covered], relations, covered


def answer_glean_check(messages: list[dict]) -> str:
    missing, _, _ = _missing(messages)
    return "YES" if missing else "NO"


def answer_glean(messages: list[dict]) -> str:
    missing, relations, covered = _missing(messages)
    batch = missing[:EXTRACT_BATCH]
    new = {_norm(e.name) for e in batch}
    listed = covered | new
    rels = [r for r in relations
            if (_norm(r.source) in new or _norm(r.target) in new)
            and _norm(r.source) in listed and _norm(r.target) in listed]
    return _records(batch, rels)


_CLAIM_VERBS = {
    "sued": ("LAWSUIT", "TRUE"), "accused": ("ACCUSATION", "SUSPECTED"),
    "alleged": ("ACCUSATION", "SUSPECTED"), "allegedly": ("ACCUSATION", "SUSPECTED"),
    "announced": ("ANNOUNCEMENT", "TRUE"), "acquired": ("ACQUISITION", "TRUE"),
    "acquisition": ("ACQUISITION", "TRUE"), "lawsuit": ("LAWSUIT", "TRUE"),
    "charged": ("CHARGE", "SUSPECTED"), "fined": ("PENALTY", "TRUE"),
    "denied": ("DENIAL", "SUSPECTED"), "promised": ("PROMISE", "TRUE"),
    "pledged": ("PROMISE", "TRUE"), "signed": ("AGREEMENT", "TRUE"),
    "agreed": ("AGREEMENT", "TRUE"), "won": ("RESULT", "TRUE"), "launched": ("LAUNCH", "TRUE"),
    "founded": ("FOUNDING", "TRUE"), "organized": ("ORGANIZATION", "TRUE"),
    "organised": ("ORGANIZATION", "TRUE"), "hosted": ("EVENT", "TRUE"),
    "banned": ("BAN", "TRUE"), "approved": ("APPROVAL", "TRUE"),
    "rejected": ("REJECTION", "TRUE"), "investigated": ("INVESTIGATION", "SUSPECTED"),
    "reportedly": ("REPORT", "SUSPECTED"), "merged": ("MERGER", "TRUE"),
}
_MONTHS = {m: i for i, m in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september",
     "october", "november", "december"], start=1)}


def _iso_date(sentence: str) -> str:
    m = re.search(r"\b(\d{4})-(\d{2})-(\d{2})\b", sentence)
    if m:
        return m.group(0)
    m = re.search(r"\b([A-Z][a-z]+)\s+(\d{1,2}),?\s+(\d{4})\b", sentence)
    if m and m.group(1).casefold() in _MONTHS:
        return f"{m.group(3)}-{_MONTHS[m.group(1).casefold()]:02d}-{int(m.group(2)):02d}"
    m = re.search(r"\b([A-Z][a-z]+)\s+(\d{4})\b", sentence)
    if m and m.group(1).casefold() in _MONTHS:
        return f"{m.group(2)}-{_MONTHS[m.group(1).casefold()]:02d}-01"
    m = re.search(r"\b(1[5-9]\d\d|2[01]\d\d)\b", sentence)
    return f"{m.group(1)}-01-01" if m else "NONE"


def answer_claims(messages: list[dict], limit: int = 12) -> str:
    text = section(messages, "text") or ""
    sentences, mentions = find_mentions(text)
    names_in: dict[int, list[str]] = {}
    for m in mentions:
        if m.name not in names_in.setdefault(m.sentence, []):
            names_in[m.sentence].append(m.name)
    lines = []
    for idx, sentence in enumerate(sentences):
        words = [w.casefold() for w in _WORDS.findall(sentence)]
        verb = next((w for w in words if w in _CLAIM_VERBS), None)
        names = names_in.get(idx, [])
        if not verb or not names:
            continue
        kind, status = _CLAIM_VERBS[verb]
        obj = names[1] if len(names) > 1 else "NONE"
        date = _iso_date(sentence)
        lines.append(" | ".join(["claim", names[0], obj, kind, status, date, date,
                                 f"{names[0]} {verb} according to the text: {_clean_field(sentence, 25)}",
                                 _clean_field(sentence, 40)]))
        if len(lines) >= limit:
            break
    return "\n".join(lines + ["done"])


def _distinct_sentences(text: str) -> list[str]:
    seen, out = set(), []
    for line in text.splitlines():
        line = re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", line).strip()
        for sentence in split_sentences(line):
            key = " ".join(_WORDS.findall(sentence.casefold()))
            if key and key not in seen:
                seen.add(key)
                out.append(sentence if sentence[-1] in ".!?" else sentence + ".")
    return out


def answer_summarize(messages: list[dict]) -> str:
    budget = _word_budget(messages, 150)
    text = " ".join(_distinct_sentences(section(messages, "descriptions") or ""))
    if not text:
        name = section(messages, "subject") or "The subject"
        text = f"{name.strip()} is mentioned without further detail."
    return trim_words(text, budget)


_ID = re.compile(r"\b(?:ent|rel|com|rep|chk|clm|doc)-[0-9a-f]{6,}\b")


class _Row(msgspec.Struct):
    ids: list[str]
    name: str               # the first short capitalised field ("Ebenezer Scrooge")
    description: str        # the longest field
    line: str


def _context_rows(context: str) -> list[_Row]:
    """Lines of a report context that carry ids (``ent-...``, ``rel-...``), split into fields.

    Fields are separated by ``|`` or tabs (or commas when a line has neither, as in CSV).
    """
    rows = []
    for line in context.splitlines():
        ids = _ID.findall(line)
        community = re.match(r"\s*([A-Z]{1,4}\d{1,6})\s*\|", line)
        if community:                   # a sub-community report: "C12 | title | summary"
            ids = [community.group(1)]
            line = line[community.end():]
        if not ids:
            continue
        rest = _ID.sub(" ", re.sub(r"\[[A-Z]:", "[", line))
        separator = r"[|\t]" if re.search(r"[|\t]", rest) else r","
        fields = [f.strip(" []()\"'") for f in re.split(separator, rest)]
        fields = [f for f in fields if f and not re.fullmatch(r"[\d.\s:]+", f)]
        short = [f for f in fields if len(f.split()) <= 6 and f[:1].isupper()]
        name = short[0] if short else ""
        if ids[0].startswith("rel-") and len(short) >= 2:
            name = f"{short[0]} and {short[1]}"
        rows.append(_Row(ids, name, max(fields, key=len, default=""), line))
    return rows


def answer_report(messages: list[dict]) -> str:
    context = section(messages, "context") or _content(messages[-1])
    rows = _context_rows(context)
    ent_rows = [r for r in rows if r.ids[0].startswith("ent-")]
    rel_rows = [r for r in rows if r.ids[0].startswith("rel-")]
    rel_ids = list(dict.fromkeys(i for r in rows for i in r.ids if i.startswith("rel-")))
    names = [r.name for r in ent_rows if r.name]
    if not names:
        names = [e.name for e in analyse(context, [])[0]]
    names = list(dict.fromkeys(names))
    if len(names) >= 3:
        title = f"{names[0]}, {names[1]} and {names[2]}"
    elif names:
        title = " and ".join(names)
    else:
        title = "An unnamed group"
    sentences = _distinct_sentences("\n".join(r.description for r in rows) or context)
    summary = trim_words(" ".join(sentences[:4]) or f"The group centres on {title}.", 120)
    rating = round(min(10.0, 1.0 + 1.5 * math.log2(1 + len(rows))), 1)
    findings = []
    other_rows = [r for r in rows if r not in ent_rows and r not in rel_rows]
    for row in (ent_rows + rel_rows + other_rows)[:5]:
        ents = [i for i in row.ids if i.startswith("ent-")]
        rels = [i for i in row.ids if i.startswith("rel-")]
        if row.name and not rels:
            rels = [i for r in rel_rows if row.name.casefold() in r.line.casefold()
                    for i in r.ids if i.startswith("rel-")][:3]
        findings.append({
            "summary": trim_words(f"{row.name or 'A relationship'}: {row.description}", 14)
            if row.name != row.description else trim_words(row.description, 14),
            "explanation": trim_words(row.description or summary, 80),
            "entities": ents, "relationships": rels})
    while len(findings) < 3:
        n = len(findings)
        sentence = sentences[n] if n < len(sentences) else summary
        findings.append({"summary": trim_words(sentence, 14), "explanation": sentence,
                         "entities": [], "relationships": rel_ids[n:n + 1]})
    report = {"title": title, "summary": summary, "rating": rating,
              "rating_explanation": f"Its context holds {len(ent_rows)} entity, {len(rel_rows)} "
                                    f"relationship and {len(other_rows)} other records.",
              "findings": findings}
    return json.dumps(report, ensure_ascii=False, indent=1)


_REPORT_HEADS = (
    re.compile(r"^\s*<report\b[^>]*?\bid\s*=\s*[\"']?([^\"'>\s]+)[\"']?[^>]*>(.*)$", re.I),
    re.compile(r"^\s*(?:#+\s*)?\[(?:R:)?([^\]\s]+)\]\s*[:.-]?\s*(.*)$"),
    re.compile(r"^\s*(?:#+\s*)?(?:report[ _]?id|community[ _]?id|id|community)\s*[:=#]\s*"
               r"([\w.:-]+?)[.,;]?(?:\s+[:|-]?\s*(.*))?$", re.I),
    re.compile(r"^\s*(?:#+\s*)?report\s+([\w.-]*\d[\w.-]*)\s*[:.)-]\s*(.*)$", re.I),
    re.compile(r"^\s*(?:#+\s*)?([A-Za-z]{1,8}-[0-9a-f]{4,}|[A-Z]{1,4}\d{1,6}|\d{1,6})"
               r"\s*[:|.),\]-]\s*(.*)$"),
)


def _json_items(text: str, key: str, *, wrap_object: bool = False) -> list | None:
    """The list a JSON answer holds (bare, or under ``key``); None when the text is not JSON.

    With ``wrap_object`` a single object without ``key`` counts as a list of one.
    """
    stripped = text.strip()
    if stripped[:1] not in "[{":
        return None
    try:
        data = json.loads(stripped)
    except ValueError:
        return None
    if isinstance(data, dict):
        data = data.get(key, [data] if wrap_object else [])
    return data if isinstance(data, list) else None


def parse_reports(text: str) -> list[tuple[str, str]]:
    """(id, text) of each report in a ``<reports>`` block, in order.

    Accepted heads: ``<report id="X">``, ``[X] title`` / ``[R:X] title``, ``id: X``,
    ``Report X: title``, and ``X: title`` / ``X | title`` when X looks like an id
    (``com-1a2b3c``, ``C17``, ``17``). A JSON list of objects with an ``id`` also works.
    """
    stripped = text.strip()
    data = _json_items(stripped, "reports", wrap_object=True)
    if data is not None and all(isinstance(d, dict) for d in data):
        return [(str(d.get("id", d.get("report_id", i + 1))), json.dumps(d)) for i, d in enumerate(data)]
    reports: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        for head in _REPORT_HEADS:
            m = head.match(line)
            if m:
                reports.append((m.group(1).strip(".,;:"), [m.group(2) or ""]))
                break
        else:
            if reports:
                reports[-1][1].append(line)
    if not reports and stripped:
        blocks = [b for b in _BLANK_LINES.split(stripped) if b.strip()]
        return [(str(i + 1), b) for i, b in enumerate(blocks)]
    return [(rid, re.sub(r"</report>", "", "\n".join(lines)).strip()) for rid, lines in reports]


def relevance(question: str, report: str) -> float:
    """Share of the question's content words found in the report, 0..1.

    A question with no content words of its own ("What are the main themes?") is a broad one:
    every non-empty report is somewhat relevant to it, more so the more it says.
    """
    q = content_terms(question)
    r = content_terms(report)
    if not r:
        return 0.0
    if not q:
        return min(0.5, 0.1 + len(r) / 400)
    return len(q & r) / len(q)


def answer_rate(messages: list[dict]) -> str:
    question = section(messages, "question") or ""
    reports = parse_reports(section(messages, "reports") or "")
    lines = []
    for rid, body in reports:
        share = relevance(question, body)
        lines.append(f"{rid}: {0 if share == 0 else max(1, min(5, math.ceil(5 * share)))}")
    return "\n".join(lines)


def _best_sentences(question: str, text: str) -> list[str]:
    """The two sentences of ``text`` sharing most content words with ``question``, in text order."""
    q = content_terms(question)
    sentences = _distinct_sentences(text)
    ranked = sorted(range(len(sentences)),
                    key=lambda i: (-len(q & content_terms(sentences[i])), i))
    return [sentences[i] for i in sorted(ranked[:2])]


def answer_map(messages: list[dict]) -> str:
    question = section(messages, "question") or ""
    points = []
    for rid, body in parse_reports(section(messages, "reports") or ""):
        share = relevance(question, body)
        if share <= 0:
            continue
        body = re.sub(r"(?im)^\s*(?:title|summary|rating|rank|findings?)\s*[:=]\s*", "", body)
        text = trim_words(" ".join(_best_sentences(question, body)), 60)
        points.append({"description": f"{text} [R:{rid}]",
                       "score": max(1, min(100, round(100 * share)))})
    points.sort(key=lambda p: -p["score"])
    return json.dumps({"points": points[:10]}, ensure_ascii=False)


_CITATION = re.compile(r"\[(?:E|L|R|T|Data|Entities|Relationships|Reports|Sources):[^\]]*\]")


def _parse_points(text: str) -> list[tuple[float, str]]:
    data = _json_items(text, "points")
    if data is not None:
        return [(float(d.get("score", 0) or 0), str(d.get("description", "")))
                for d in data if isinstance(d, dict) and d.get("description")]
    points = []
    for line in text.splitlines():
        line = re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", line).strip()
        if not line:
            continue
        score = 0.0
        m = re.search(r"\(?\b(?:score|helpfulness)\b\s*[:=]?\s*(\d+(?:\.\d+)?)\)?[:,;]?\s*", line, re.I)
        if m:
            score = float(m.group(1))
            line = (line[:m.start()] + " " + line[m.end():]).strip(" -:|")
        if line:
            points.append((score, line))
    return points


def _fit(bullets: list[str], budget: int) -> str:
    """Whole bullets while they fit the word budget; a cut bullet keeps its citations."""
    out, used = [], 0
    for bullet in bullets:
        words = len(bullet.split())
        if used + words <= budget:
            out.append(bullet)
            used += words
            continue
        room = budget - used
        if room >= 8 or not out:
            tags = " ".join(_CITATION.findall(bullet))
            body = _CITATION.sub("", bullet)
            out.append(trim_words(body, max(1, room - len(tags.split()))) + (f" {tags}" if tags else ""))
        break
    return "\n".join(f"- {b}" for b in out)


def answer_reduce(messages: list[dict]) -> str:
    budget = _word_budget(messages, 300)
    points = _parse_points(section(messages, "points") or "")
    points = [p for p in sorted(points, key=lambda p: -p[0])]
    if not points:
        return "The reports hold nothing that answers this question."
    return "From the reports:\n\n" + _fit([text for _, text in points], max(1, budget - 3))


def answer_answer(messages: list[dict]) -> str:
    budget = _word_budget(messages, 300)
    question = section(messages, "question") or ""
    context = section(messages, "context") or ""
    q = content_terms(question)
    lines = context.splitlines()
    if any(_CITATION.search(line) for line in lines):
        # A tagged context: its untagged lines are section headings, not evidence.
        lines = [line for line in lines if _CITATION.search(line)]
    scored = []
    for i, line in enumerate(lines):
        terms = content_terms(_CITATION.sub("", line))
        overlap = len(q & terms) if q else min(1, len(terms))
        if overlap:
            scored.append((-overlap, i, line))
    if not scored:
        return "The context does not hold the answer to this question."
    bullets = []
    for _, _, line in sorted(scored)[:8]:
        tags = list(dict.fromkeys(_CITATION.findall(line)))
        body = _ID.sub("", _CITATION.sub("", line))
        body = re.sub(r"\s*[|\t]\s*", "; ", body)
        body = re.sub(r"^[\s;,#*-]+|[\s;,]+$", "", body)
        if body:
            bullets.append(trim_words(body, 40) + ("" if not tags else " " + " ".join(tags)))
    return "According to the context:\n\n" + _fit(bullets, max(1, budget - 3))


def answer_unknown(messages: list[dict]) -> str:
    users = [m for m in messages if m.get("role") == "user"] or messages
    text = _content(users[-1]) if users else ""
    sentences = split_sentences(re.sub(r"<[^>]+>", " ", text))
    if not sentences:
        return "OK."
    return trim_words(" ".join(sentences[:2]), 40)


ANSWERS = {
    "extract": answer_extract, "glean_check": answer_glean_check, "glean": answer_glean,
    "claims": answer_claims, "summarize": answer_summarize, "report": answer_report,
    "rate": answer_rate, "map": answer_map, "reduce": answer_reduce, "answer": answer_answer,
    "unknown": answer_unknown,
}


def _pick_biased_token(bias: dict, decision: str) -> str:
    """The text of the logit_bias token that matches ``decision``, else the most favoured one."""
    enc = get_encoding("o200k_base")
    tokens = []
    for key, value in bias.items():
        try:
            tokens.append((float(value), enc.decode([int(key)])))
        except (ValueError, KeyError, TypeError):
            continue
    if not tokens:
        return decision
    want = decision.strip().casefold()
    for _, text in tokens:
        if text.strip().casefold() == want:
            return text
    for _, text in tokens:
        if want and text.strip().casefold()[:1] == want[:1]:
            return text
    return max(tokens, key=lambda t: t[0])[1]


def embed(text: str, dim: int) -> list[float]:
    """A hashed bag of words (plus word pairs), L2-normalised: similar texts get close vectors."""
    vec = [0.0] * dim
    words = [w for w in _WORDS.findall(unicodedata.normalize("NFKC", text).casefold())]
    features = words + [f"{a} {b}" for a, b in zip(words, words[1:])]
    for feature in features:
        h = hashlib.blake2b(feature.encode(), digest_size=8).digest()
        idx = int.from_bytes(h[:4], "little") % dim
        weight = 1.0 if " " not in feature else 0.5
        vec[idx] += weight if h[4] & 1 else -weight
    norm = math.sqrt(sum(v * v for v in vec))
    if norm == 0:
        vec[0] = 1.0
        return vec
    return [v / norm for v in vec]


_GARBAGE = ("Sure! Here is what I found in the text you sent:\n```\n{\"title\": \"Unfinished, "
            "\"findings\": [{\"summary\": \n```\nLet me know if you want more.")


# --------------------------------------------------------------------------------------------
# The HTTP server. State shared by handler threads (counters, the rate-limit window, open
# connections) lives in Simulator, behind its one lock (``_lock``).

class _Limiter:
    """A sliding 60 s window of admitted (time, tokens); not thread-safe, the caller locks."""

    def __init__(self, rpm: int, tpm: int):
        self.rpm, self.tpm = rpm, tpm
        self.window: deque[tuple[float, int]] = deque()
        self.tokens = 0

    def admit(self, tokens: int, now: float) -> float:
        """0 when admitted (and recorded), else the seconds to wait before retrying."""
        while self.window and self.window[0][0] <= now - 60.0:
            self.tokens -= self.window.popleft()[1]
        if self.rpm and len(self.window) >= self.rpm:
            return self.window[len(self.window) - self.rpm][0] + 60.0 - now
        if self.tpm and self.window and self.tokens + tokens > self.tpm:
            freed, wait = self.tokens, 0.0
            for t, n in self.window:
                freed -= n
                wait = t + 60.0 - now
                if freed + tokens <= self.tpm:
                    break
            return max(wait, 0.001)
        self.window.append((now, tokens))
        self.tokens += tokens
        return 0.0

    def remaining(self) -> tuple[int, int]:
        return (max(0, self.rpm - len(self.window)) if self.rpm else -1,
                max(0, self.tpm - self.tokens) if self.tpm else -1)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 256        # the listen backlog: bursts of many new connections
    allow_reuse_address = True
    sim: Simulator

    def handle_error(self, request: object, client_address: object) -> None:
        # A client that hung up (a timeout on its side, a cancelled task) is not an error here.
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError, OSError)):
            super().handle_error(request, client_address)


class Simulator:
    """The simulator server; ``start()`` runs it on a background thread."""

    def __init__(self, config: SimulatorConfig | None = None):
        self.config = config or SimulatorConfig()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()
        # Called with (route, request, its ``request_key``) as each model request meets its
        # fault, on the thread answering it: a bench (crash_fuzz) sees who asked what, and when.
        self.on_request: Callable[[str, dict, str], None] | None = None
        self.reset()

    def reset(self) -> None:
        """Zero the counters and the rate-limit window (every request's next attempt is its first)."""
        with self._lock:
            self.requests = 0
            self.by_task: Counter[str] = Counter()
            self.prompt_tokens = 0
            self.completion_tokens = 0
            self.tokens_by_task: dict[str, list[int]] = {}
            self.rejected = 0
            self.faults: Counter[str] = Counter()
            self._attempts: Counter[str] = Counter()
            self._limiter = _Limiter(self.config.rpm, self.config.tpm)

    # -- lifecycle
    @property
    def base_url(self) -> str:
        if not self._server:
            raise RuntimeError("the simulator is not running; call start() first")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> str:
        """Bind, serve on a daemon thread, and return the base URL (``http://host:port/v1``)."""
        if self._server:
            return self.base_url
        self._stopping.clear()
        get_encoding()  # build the tokenizer before the first requests arrive together
        _prompt_prefixes()
        self._server = _Server((self.config.host, self.config.port), _Handler)
        self._server.sim = self
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name="streamrag-simulator", daemon=True)
        self._thread.start()
        return self.base_url

    def stop(self) -> None:
        """Stop serving, wake sleeping handlers and close open keep-alive connections."""
        server, self._server = self._server, None
        if not server:
            return
        self._stopping.set()
        server.shutdown()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        server.server_close()
        if self._thread:
            self._thread.join(timeout=5)

    def __enter__(self) -> Simulator:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def open_connections(self) -> int:
        """The connections open now (a request a killed client sent is still read and answered)."""
        with self._lock:
            return len(self._connections)

    def stats(self) -> dict:
        with self._lock:
            return {"requests": self.requests, "by_task": dict(self.by_task),
                    "prompt_tokens": self.prompt_tokens,
                    "completion_tokens": self.completion_tokens,
                    "tokens_by_task": {k: list(v) for k, v in self.tokens_by_task.items()},
                    "rejected": self.rejected, "faults": dict(self.faults)}

    # -- used by the handler
    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._lock:
            (self._connections.add if add else self._connections.discard)(conn)

    def _arrive(self, task: str) -> None:
        with self._lock:
            self.requests += 1
            self.by_task[task] += 1

    def _admit(self, tokens: int) -> tuple[float, tuple[int, int]]:
        with self._lock:
            wait = self._limiter.admit(tokens, time.monotonic())
            if wait:
                self.rejected += 1
            return wait, self._limiter.remaining()

    def _bill(self, task: str, prompt: int, completion: int) -> None:
        with self._lock:
            self.prompt_tokens += prompt
            self.completion_tokens += completion
            row = self.tokens_by_task.setdefault(task, [0, 0])
            row[0] += prompt
            row[1] += completion

    def _fault_of(self, route: str, request: dict) -> str | None:
        """``_fault`` of the request, told first to ``on_request``."""
        key = request_key(route, request)
        if self.on_request is not None:
            self.on_request(route, request, key)
        return self._fault(key)

    def _fault(self, key: str) -> str | None:
        """The fault the next attempt of the request ``key`` (``request_key``) meets, if any."""
        if self.config.fault_rate <= 0:
            return None
        with self._lock:
            self._attempts[key] += 1
            attempt = self._attempts[key]
        kind = fault_of(self.config.seed, key, attempt, self.config.fault_rate)
        if kind:
            with self._lock:
                self.faults[kind] += 1
        return kind

    def _sleep(self, seconds: float) -> bool:
        """Sleep unless the server stops first; False when it stopped."""
        return seconds <= 0 or not self._stopping.wait(seconds)


def request_key(route: str, request: dict) -> str:
    """What identifies a request for its faults: its route and body, without the choice of
    streaming (the same answer either way)."""
    body = {k: v for k, v in request.items() if k not in ("stream", "stream_options")}
    canonical = json.dumps([route, body], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def fault_of(seed: int, key: str, attempt: int, rate: float) -> str | None:
    """The fault (one of ``FAULT_KINDS``) attempt ``attempt`` (1-based) of request ``key`` meets
    at ``rate``, or None: a pure function, whatever else the server is doing."""
    rng = random.Random(hashlib.sha256(f"{seed}:{key}:{attempt}".encode()).digest())
    if rng.random() >= rate:
        return None
    return FAULT_KINDS[rng.randrange(len(FAULT_KINDS))]


def _error(message: str, kind: str, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes
    server_version = "streamrag-simulator/1"
    timeout = 120                      # idle keep-alive connections are dropped after this
    server: _Server

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib name
        pass

    def setup(self) -> None:
        super().setup()
        self.server.sim._track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.sim._track(self.connection, False)

    # -- plumbing
    def _path(self) -> str:
        """The route asked for: an OpenAI route under /v1 without it (``/chat/completions``), the
        simulator's own ``/simulator/stats`` (under /v1 or not); a path without /v1 comes back
        marked " (not under /v1)", which no route answers. The OpenAI routes are served under /v1
        alone, as real servers serve them (OpenAI, Ollama, vLLM answer 404): an api_base without
        /v1 worked against the simulator, and then failed against the real server."""
        path = self.path.split("?", 1)[0].rstrip("/")
        route = path[3:] if path.startswith("/v1/") else path
        return route if route == "/simulator/stats" or route != path else path + " (not under /v1)"

    def _no_route(self, method: str) -> None:
        """A 404 as OpenAI answers a path it does not serve."""
        self._send(404, _error(f"Invalid URL ({method} {self.path})", "invalid_request_error"))

    def _body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, status: int, payload: dict | bytes, headers: dict | None = None) -> None:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, str(v))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _refused_key(self) -> bool:
        """Answer 401 when a key is asked for (``SimulatorConfig.api_key``) and the request does
        not carry it, as OpenAI does; True when it was refused."""
        wanted = self.server.sim.config.api_key
        if not wanted:
            return False
        bearer = self.headers.get("Authorization") or ""
        if bearer == f"Bearer {wanted}" or self.headers.get("api-key") == wanted:
            return False
        said = "Incorrect API key provided." if bearer or self.headers.get("api-key") else \
            "You didn't provide an API key."
        self._send(401, _error(said, "invalid_request_error", "invalid_api_key"))
        return True

    # -- routes
    def do_GET(self) -> None:
        path = self._path()
        if path == "/models":
            if self._refused_key():
                return
            self._send(200, {"object": "list", "data": [
                {"id": m, "object": "model", "created": 0, "owned_by": "streamrag-simulator"}
                for m in MODELS]})
        elif path == "/simulator/stats":
            self._send(200, self.server.sim.stats())
        else:
            self._no_route("GET")

    def do_POST(self) -> None:
        path = self._path()
        try:
            raw = self._body()
        except (ValueError, OSError):
            self.close_connection = True
            self._send(400, _error("could not read the request body", "invalid_request_error"))
            return
        if path not in ("/chat/completions", "/embeddings"):
            self._no_route("POST")
            return
        if self._refused_key():
            return
        try:
            request = json.loads(raw)
        except ValueError as e:
            self._send(400, _error(f"the request body is not valid JSON ({e})", "invalid_request_error"))
            return
        if not isinstance(request, dict):
            self._send(400, _error("the request body must be a JSON object", "invalid_request_error"))
            return
        if request.get("model") == MISSING_MODEL:
            self._send(404, _error("model not found", "invalid_request_error", "model_not_found"))
            return
        if path == "/embeddings":
            self._embeddings(request)
        else:
            self._chat(request)

    def _limited(self, tokens: int) -> bool:
        wait, (left_requests, left_tokens) = self.server.sim._admit(tokens)
        if not wait:
            return False
        cfg = self.server.sim.config
        retry = max(1, math.ceil(wait))
        headers = {"Retry-After": retry, "x-ratelimit-limit-requests": cfg.rpm,
                   "x-ratelimit-limit-tokens": cfg.tpm,
                   "x-ratelimit-remaining-requests": max(left_requests, 0),
                   "x-ratelimit-remaining-tokens": max(left_tokens, 0),
                   "x-ratelimit-reset-requests": f"{wait:.3f}s"}
        self._send(429, _error(f"Rate limit reached (rpm {cfg.rpm}, tpm {cfg.tpm}); "
                               f"try again in {retry}s", "rate_limit_error", "rate_limit_exceeded"),
                   headers)
        return True

    def _fail_early(self, fault: str | None) -> bool:
        """Serve the faults that replace the whole answer; True when one was served."""
        sim = self.server.sim
        if fault == "http_500":
            self._send(500, _error("The simulator failed on purpose (fault injection).", "server_error"))
            return True
        if fault == "timeout":
            sim._sleep(sim.config.timeout_s)
            self.close_connection = True
            return True
        return False

    def _embeddings(self, request: dict) -> None:
        sim = self.server.sim
        inputs = request.get("input", "")
        if isinstance(inputs, str) or (isinstance(inputs, list) and inputs and isinstance(inputs[0], int)):
            inputs = [inputs]
        if not isinstance(inputs, list) or not inputs:
            self._send(400, _error("'input' must be a string or a non-empty list", "invalid_request_error"))
            return
        enc = get_encoding("o200k_base")
        texts = [enc.decode(x) if isinstance(x, list) else str(x) for x in inputs]
        sim._arrive("embed")
        tokens = sum(count_tokens(t) for t in texts)
        if self._limited(tokens):
            return
        fault = sim._fault_of("embeddings", request)
        if fault in ("malformed", "truncated"):
            fault = "http_500"           # an embedding has no text to garble
        if self._fail_early(fault):
            return
        dim = int(request.get("dimensions") or sim.config.embedding_dim)
        data = []
        for i, text in enumerate(texts):
            vector = embed(text, dim)
            if request.get("encoding_format") == "base64":
                value: object = base64.b64encode(struct.pack(f"<{dim}f", *vector)).decode()
            else:
                value = vector
            data.append({"object": "embedding", "index": i, "embedding": value})
        sim._bill("embed", tokens, 0)
        if not sim._sleep(sim.config.latency_ms / 1000):
            return
        self._send(200, {"object": "list", "data": data, "model": request.get("model", "simulator"),
                         "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

    def _chat(self, request: dict) -> None:
        sim = self.server.sim
        messages = request.get("messages")
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            self._send(400, _error("'messages' must be a list of objects", "invalid_request_error"))
            return
        bias = request.get("logit_bias") or {}
        max_tokens = request.get("max_completion_tokens") or request.get("max_tokens")
        task = detect_task(messages, logit_bias=bool(bias))
        sim._arrive(task)
        text = ANSWERS[task](messages)
        finish = "stop"
        if bias and max_tokens == 1:
            text = _pick_biased_token(bias, text.split()[0] if text.split() else "")
        elif max_tokens and count_tokens(text) > int(max_tokens):
            text, finish = truncate(text, int(max_tokens)), "length"
        if task == "unknown" and (request.get("response_format") or {}).get("type") == "json_object":
            text = json.dumps({"answer": text})
        prompt_tokens = count_message_tokens(messages)
        if self._limited(prompt_tokens + count_tokens(text)):
            return
        fault = sim._fault_of("chat", request)
        if self._fail_early(fault):
            return
        if fault == "malformed":
            text = _GARBAGE
        elif fault == "truncated":
            ids = get_encoding("o200k_base").encode(text, disallowed_special=())
            text, finish = get_encoding("o200k_base").decode(ids[:max(1, len(ids) // 2)]), "length"
        completion_tokens = count_tokens(text)
        sim._bill(task, prompt_tokens, completion_tokens)
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                 "total_tokens": prompt_tokens + completion_tokens}
        ident = "chatcmpl-" + hashlib.sha256(
            f"{sim.config.seed}\0{json.dumps(request, sort_keys=True)}".encode()).hexdigest()[:24]
        model = request.get("model") or "streamrag-simulator"
        cfg = sim.config
        if request.get("stream"):
            self._stream(ident, model, text, finish, usage,
                         bool((request.get("stream_options") or {}).get("include_usage")))
            return
        if not sim._sleep((cfg.latency_ms + cfg.per_token_ms * completion_tokens) / 1000):
            return
        self._send(200, {
            "id": ident, "object": "chat.completion", "created": int(time.time()), "model": model,
            "system_fingerprint": "streamrag-simulator",
            "choices": [{"index": 0, "finish_reason": finish, "logprobs": None,
                         "message": {"role": "assistant", "content": text, "refusal": None}}],
            "usage": usage})

    def _stream(self, ident: str, model: str, text: str, finish: str, usage: dict,
                include_usage: bool) -> None:
        sim = self.server.sim
        cfg = sim.config
        enc = get_encoding("o200k_base")
        ids = enc.encode(text, disallowed_special=())
        step = 8
        pieces = [ids[i:i + step] for i in range(0, len(ids), step)]
        if not sim._sleep(cfg.latency_ms / 1000):
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        created = int(time.time())

        def event(delta: dict, reason: str | None = None, extra: dict | None = None) -> None:
            chunk = {"id": ident, "object": "chat.completion.chunk", "created": created,
                     "model": model, "system_fingerprint": "streamrag-simulator",
                     "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                  "finish_reason": reason}]}
            if extra is not None:
                chunk.update(extra)
            self._chunk(f"data: {json.dumps(chunk)}\n\n".encode())

        event({"role": "assistant", "content": ""})
        # Decode the running prefix so a multi-byte character split across tokens is sent whole.
        sent = ""
        for n, piece in enumerate(pieces, start=1):
            if not sim._sleep(cfg.per_token_ms * len(piece) / 1000):
                return
            upto = enc.decode([t for p in pieces[:n] for t in p])
            if upto.endswith("\ufffd") and n < len(pieces):
                continue
            event({"content": upto[len(sent):]})
            sent = upto
        event({}, finish)
        if include_usage:
            event({}, None, {"choices": [], "usage": usage})
        self._chunk(b"data: [DONE]\n\n")
        self._chunk(b"")


# --------------------------------------------------------------------------------------------
# Command line.

def serve_forever(config: SimulatorConfig) -> None:
    """Run the simulator in the foreground until interrupted (``streamrag simulate``): by Ctrl-C
    or SIGTERM alike (a service manager's or `kill`'s stop killed it without stopping the
    server, exit 143), then stopped, exit 0."""
    sim = Simulator(config)
    url = sim.start()
    try:   # (before the line saying it listens: a stop sent once it is read is taken)
        previous = signal.signal(signal.SIGTERM, _interrupt)
    except ValueError:   # not the main thread (a library caller's): its signals are left as they are
        previous = None
    print(f"simulator listening on {url}", file=sys.stderr, flush=True)
    try:
        while sim._thread and sim._thread.is_alive():
            sim._thread.join(timeout=0.5)
    except KeyboardInterrupt:
        pass
    finally:
        sim.stop()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _interrupt(signum: int, frame) -> None:
    """SIGTERM taken like Ctrl-C by ``serve_forever``."""
    raise KeyboardInterrupt()


def listen_error(e: OSError, host: str, port: int) -> str:
    """One line saying why the simulator could not listen on ``host:port``, and what to do."""
    import errno

    if e.errno == errno.EADDRINUSE:
        return (f"--port {port}: {host}:{port} is already in use; pick another port with --port "
                "(0 = any free port) or stop the program using it")
    if e.errno == errno.EACCES:
        return (f"--port {port}: not allowed to listen on {host}:{port} (ports below 1024 need "
                "privileges); pick a port of 1024 or more")
    return (f"--host {host} --port {port}: cannot listen there ({e.strerror or e}); "
            "check the host name and the port")


def share(text: str) -> float:
    """An argparse type: a fraction from 0 to 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number; give a share from 0 to 1") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{value:g} is out of range; give a share from 0 to 1 (0.1 = 10%)")
    return value


def port_number(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number; give 1-65535, "
                                         "or 0 for any free port") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is out of range; give 1-65535, or 0 for any free port")
    return port


def at_least(least: float, kind: type = float, what: str = "0 or more"):
    """An argparse type: a number (``kind``) of at least ``least``."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            a = "a whole number" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"{text!r} is not {a}; give {what}") from None
        if not least <= value < math.inf:   # (nan too)
            raise argparse.ArgumentTypeError(f"{text} is out of range; give {what}")
        return value
    return parse


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """The simulator's flags, added to ``parser`` (a new one by default)."""
    p = parser or argparse.ArgumentParser(
        prog="python -m streamrag.simulator",
        description="A deterministic OpenAI-compatible server for tests and benchmarks.")
    d = SimulatorConfig()
    p.add_argument("--host", default=d.host)
    p.add_argument("--port", type=port_number, default=8765, help="0 picks a free port (default 8765)")
    p.add_argument("--latency-ms", type=at_least(0), default=d.latency_ms)
    p.add_argument("--per-token-ms", type=at_least(0), default=d.per_token_ms)
    p.add_argument("--rpm", type=at_least(0, int), default=d.rpm, help="requests per minute, 0 = unlimited")
    p.add_argument("--tpm", type=at_least(0, int), default=d.tpm, help="tokens per minute, 0 = unlimited")
    p.add_argument("--fault-rate", type=share, default=d.fault_rate)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--embedding-dim", type=at_least(1, int, "1 or more"), default=d.embedding_dim)
    p.add_argument("--timeout-s", type=at_least(0), default=d.timeout_s,
                   help="how long a simulated timeout holds the connection")
    p.add_argument("--api-key", default=d.api_key,
                   help="the key every request must carry (default: none asked)")
    return p


def config_from_args(args: argparse.Namespace) -> SimulatorConfig:
    return SimulatorConfig(host=args.host, port=args.port, latency_ms=args.latency_ms,
                           per_token_ms=args.per_token_ms, rpm=args.rpm, tpm=args.tpm,
                           fault_rate=args.fault_rate, seed=args.seed,
                           embedding_dim=args.embedding_dim, timeout_s=args.timeout_s,
                           api_key=args.api_key)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        serve_forever(config_from_args(args))
    except OSError as e:
        print(f"streamrag.simulator: error: {listen_error(e, args.host, args.port)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
