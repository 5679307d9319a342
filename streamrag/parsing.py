"""Reading model answers: record lines, yes/no, JSON objects, reports, ratings, map points.

Every function here is pure and total: any string goes in, a value comes out, nothing raises.
Models wrap their answers in code fences, number or bullet the lines, change the casing of
the record kind, quote fields, add prose, and get cut off by ``max_tokens``. A record line
that cannot be read is dropped and counted (``Extraction.dropped``) so the caller can log it;
the rest of the answer is still used. Names are kept as written; ids are derived later.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import date
from typing import Any

from streamrag.ids import normalize_name
from streamrag.records import ClaimRecord, EntityRecord, Extraction, RelationshipRecord

_KINDS = {
    "entity": "entity", "entities": "entity", "ent": "entity", "node": "entity",
    "relation": "relation", "relations": "relation", "relationship": "relation",
    "relationships": "relation", "rel": "relation", "edge": "relation",
    "claim": "claim", "claims": "claim", "covariate": "claim",
}
# Fields a complete record has, the kind included.
_FULL = {"entity": 4, "relation": 5, "claim": 9}
_QUOTE_PAIRS = {'"': '"', "'": "'", "`": "`", "\u201c": "\u201d", "\u2018": "\u2019", "\u00ab": "\u00bb"}
_BULLET = re.compile(r"^\s*(?:[-*\u2022+\u00b7>]\s+|\d{1,4}[.):]\s*|\(\d{1,4}\)\s*)")
_FENCE = re.compile(r"^\s*(```|~~~)")
_DONE = re.compile(r"^\W*(done|<\|complete\|>|complete)\W*$", re.IGNORECASE)
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")
_NONE_WORDS = {"", "none", "null", "n/a", "na", "nil", "unknown", "-", "--"}
_STATUSES = {"true": "TRUE", "false": "FALSE", "suspected": "SUSPECTED"}
_ISO_DATE = re.compile(r"(\d{4})(?:-(\d{2})(?:-(\d{2})(?:T[\d:.]+(?:Z|[+-][\d:]+)?)?)?)?")


# ---------------------------------------------------------------------------- record lines


def _strip_quotes(field: str) -> str:
    s = field.strip()
    while len(s) >= 2 and _QUOTE_PAIRS.get(s[0]) == s[-1]:
        s = s[1:-1].strip()
    return s


def _clean_line(line: str) -> str:
    s = line.strip()
    for _ in range(3):
        m = _BULLET.match(s)
        if not m or m.end() == 0:
            break
        s = s[m.end():].strip()
    s = s.replace("<|>", "|")
    if s.endswith("##"):
        s = s[:-2].rstrip()
    if s.startswith("("):
        s = s[1:].strip()
        if s.endswith(")"):
            s = s[:-1].strip()
    if s.startswith("|"):
        s = s[1:]
        if s.rstrip().endswith("|"):
            s = s.rstrip()[:-1]
    return s.strip()


def _kind(field: str) -> str | None:
    word = re.sub(r"[\W_]+", " ", field).strip().casefold()
    return _KINDS.get(word)


def _strength(field: str) -> float | None:
    """A number in a short field (``8``, ``8/10``, ``strength: 8``); None if it is prose."""
    s = field.strip()
    if len(s) > 24:
        return None
    m = _NUMBER.search(s)
    if not m:
        return None
    try:
        value = float(m.group())
    except ValueError:
        return None
    if not math.isfinite(value):
        return None
    return min(10.0, max(1.0, value))


def _none_or(field: str | None) -> str | None:
    if field is None:
        return None
    s = _strip_quotes(field)
    return None if s.casefold() in _NONE_WORDS else s


def _entity_type(raw: str, entity_types: list[str] | None) -> str:
    t = re.sub(r"^[\W_]+|[\W_]+$", "", raw).strip().lower()
    if entity_types and t:
        known = {k.strip().lower() for k in entity_types}
        if t not in known:
            for variant in (t.rstrip("s"), t[:-3] + "y" if t.endswith("ies") else t,
                            t.replace("organisation", "organization")):
                if variant in known:
                    return variant
    return t


def _parse_fields(kind: str, fields: list[str], entity_types: list[str] | None) -> Any:
    """One record from its fields (the kind excluded), or None if it cannot be used."""
    f = [_strip_quotes(x) for x in fields]
    while f and not f[-1]:
        f.pop()
    if kind == "entity":
        if len(f) < 2 or not f[0]:
            return None
        description = " | ".join(x for x in f[2:] if x)
        return EntityRecord(name=f[0], type=_entity_type(f[1], entity_types), description=description)
    if kind == "relation":
        if len(f) < 2 or not f[0] or not f[1]:
            return None
        if normalize_name(f[0]) == normalize_name(f[1]) or not normalize_name(f[0]):
            return None
        rest = f[2:]
        strength = _strength(rest[0]) if rest else None
        if strength is not None:
            description = " | ".join(x for x in rest[1:] if x)
        else:
            # The model skipped or garbled the strength: look for it at the end instead.
            tail = _strength(rest[-1]) if len(rest) > 1 else None
            if tail is not None:
                strength, rest = tail, rest[:-1]
            description = " | ".join(x for x in rest if x)
        return RelationshipRecord(source=f[0], target=f[1], description=description,
                                  strength=5.0 if strength is None else strength)
    if kind == "claim":
        if len(f) < 3 or not f[0] or not f[2]:
            return None
        f = f + [""] * (8 - len(f))
        return ClaimRecord(
            subject=f[0], object=_none_or(f[1]), type=f[2], status=_status(f[3]) or "SUSPECTED",
            start_date=_none_or(f[4]), end_date=_none_or(f[5]), description=f[6],
            source_text=" | ".join(x for x in f[7:] if x),
        )
    return None


def _status(field: str) -> str | None:
    """A claim's status, TRUE, FALSE or SUSPECTED, as written in any case and punctuation; None
    for any other (read as SUSPECTED, and said by ``claim_faults``)."""
    return _STATUSES.get(re.sub(r"\W+", "", field).casefold())


def _salvageable_relation(kind: str, fields: list[str]) -> bool:
    """``relation | A | B | prose``: the strength was skipped, not cut off."""
    return (kind == "relation" and len(fields) == 3
            and _strength(fields[2]) is None and len(fields[2].split()) >= 3)


def _read_lines(text: str, entity_types: list[str] | None) -> Iterator[tuple[str | None, list[str], Any]]:
    """Each record-like line of an answer: its kind (None: none known), its fields (the kind's
    left out) and the record read from them (None: unreadable, or cut off at the answer's end)."""
    lines = [_clean_line(x) for x in text.splitlines() if not _FENCE.match(x)]
    done = any(_DONE.match(x) for x in lines if x)
    record_lines: list[tuple[str | None, list[str]]] = []
    for line in lines:
        if not line or _DONE.match(line) or line.startswith("#"):
            continue
        fields = line.split("|")
        kind = _kind(fields[0])
        if kind is None:
            if len(fields) >= 3 and any(re.search(r"\w", x) for x in fields):
                record_lines.append((None, fields))   # looks like a record, unknown kind
            continue
        record_lines.append((kind, fields[1:]))
    for i, (kind, fields) in enumerate(record_lines):
        if kind is None:
            yield kind, fields, None
            continue
        if i == len(record_lines) - 1 and not done:
            # No "done": the answer may have been cut off inside this last line.
            short = len(fields) + 1 < _FULL[kind] or not fields[-1].strip()
            if short and not _salvageable_relation(kind, fields):
                yield kind, fields, None
                continue
        yield kind, fields, _parse_fields(kind, fields, entity_types)


def parse_records(text: str, *, entity_types: list[str] | None = None) -> Extraction:
    """Entity, relation and claim records from an extraction answer; unreadable lines counted."""
    out = Extraction()
    if not isinstance(text, str):
        return out
    for _kind, _fields, record in _read_lines(text, entity_types):
        _take(out, record)
    return out


def _take(out: Extraction, record: Any) -> None:
    """Adds a record ``_read_lines`` read to ``out`` (None: a line dropped, counted)."""
    if record is None:
        out.dropped += 1
    elif isinstance(record, EntityRecord):
        out.entities.append(record)
    elif isinstance(record, RelationshipRecord):
        out.relationships.append(record)
    else:
        out.claims.append(record)


def _iso_date(text: str) -> bool:
    """Whether ``text`` is a date as ISO 8601 writes one (2031, 2031-04, 2031-04-02, or with a
    time: 2031-04-02T09:30Z), and one the calendar has."""
    m = _ISO_DATE.fullmatch(text)
    try:
        return m is not None and bool(date(int(m[1]), int(m[2] or 1), int(m[3] or 1)))
    except ValueError:
        return False


def claim_faults(text: str) -> Counter[str]:
    """What a claims answer's lines got wrong, as ``parse_records`` reads them: a ``status`` not
    TRUE, FALSE or SUSPECTED (read as SUSPECTED), a ``date`` not ISO 8601 (kept as written), no
    ``description``, a record of ``another kind`` (an entity line: no claim), an ``unreadable`` line."""
    return read_claims(text)[1]


def read_claims(text: str) -> tuple[Extraction, Counter[str]]:
    """A claims answer read once: its records (``parse_records``'s) and what its lines got
    wrong (``claim_faults``'s). (Each was a reading of the whole answer of its own.)"""
    out, faults = Extraction(), Counter()
    if not isinstance(text, str):
        return out, faults
    for kind, fields, record in _read_lines(text, None):
        _take(out, record)
        if record is None:
            faults["unreadable"] += 1
        elif kind != "claim":
            faults["another kind"] += 1
        else:
            faults["status"] += _status(fields[3] if len(fields) > 3 else "") is None
            faults["date"] += sum(d is not None and not _iso_date(d) for d in (record.start_date, record.end_date))
            faults["description"] += not record.description
    return out, +faults


def usable_extraction(text: str, parsed: Extraction | None = None) -> bool:
    """Whether an extraction answer can be used: it holds records, or it says ``done`` and holds
    no record-like lines (nothing to extract). Prose, JSON or an empty answer is unusable: a
    missing ``done`` means the model did not follow the format, or stopped early. ``parsed``:
    the answer as ``parse_records`` reads it, when the caller has read it already."""
    if not isinstance(text, str):
        return False
    ex = parse_records(text) if parsed is None else parsed
    if ex.entities or ex.relationships or ex.claims:
        return True
    if ex.dropped:
        return False
    return any(_DONE.match(_clean_line(x)) for x in text.splitlines() if not _FENCE.match(x))


_CHATTY_START = re.compile(
    r"^[\s*#>_-]*(?:(?:sure|certainly|of course|absolutely|okay|alright)\s*[!,.:;]|"
    r"(?:here\s+(?:is|are)|here's|below\s+is|as\s+requested|as\s+an\s+ai)\b|"
    r"(?:i'm|i\s+am)\s+sorry\b|sorry\s*[!,.:]|"
    r"i\s+(?:have|found|can|cannot|can't|will|would|could|merged|wrote|think)\b|i've\b|i'll\b)",
    re.IGNORECASE)
_CHATTY_ANYWHERE = re.compile(
    r"\b(?:let me know|hope (?:this|that) helps|feel free to|happy to help|"
    r"the (?:text|notes|descriptions) you (?:sent|provided|gave))\b", re.IGNORECASE)
_STRUCTURE = re.compile(r"```|~~~|[{\[]\s*\"|^\s*[{\[]\s*$", re.MULTILINE)


def usable_description(text: str) -> bool:
    """Whether a summary answer reads as a description of its subject: some prose, and neither a
    code fence, JSON, nor the chat around an answer ("Sure! Here is ...", "Let me know ...")."""
    if not isinstance(text, str):
        return False
    s = text.strip()
    if not re.search(r"\w", s):
        return False
    if _STRUCTURE.search(s) or s.startswith(("{", "[")):
        return False
    if _CHATTY_START.match(s) or _CHATTY_ANYWHERE.search(s):
        return False
    return not s.endswith(":")


def parse_yes_no(text: str) -> bool | None:
    """YES -> True, NO -> False, anything else -> None; the first word decides if it can."""
    if not isinstance(text, str):
        return None
    words = re.findall(r"[a-z]+", text.casefold())
    yes, no = {"yes", "true"}, {"no", "false"}
    if not words:
        return None
    if words == ["y"]:
        return True
    if words == ["n"]:
        return False
    if words[0] in yes:
        return True
    if words[0] in no:
        return False
    has_yes = any(w in yes for w in words)
    has_no = any(w in no for w in words)
    if has_yes != has_no:
        return has_yes
    return None


# ---------------------------------------------------------------------------- JSON

_MAX_STARTS = 40
_MAX_REPAIRS = 60


def _remove_trailing_commas(s: str) -> str:
    out: list[str] = []
    in_string = escape = False
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if in_string:
            out.append(c)
            if escape:
                escape = False
            elif c == "\\":
                escape = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
            out.append(c)
        elif c == ",":
            j = i + 1
            while j < n and s[j] in " \t\r\n":
                j += 1
            if j >= n or s[j] not in "}]":
                out.append(c)
        else:
            out.append(c)
        i += 1
    return "".join(out)


def _loads(s: str) -> Any:
    try:
        return json.loads(s, strict=False)
    except (ValueError, RecursionError):
        pass
    try:
        return json.loads(_remove_trailing_commas(s), strict=False)
    except (ValueError, RecursionError):
        return None


_CLOSE = {"{": "}", "[": "]"}


_SPECIAL = re.compile(r'["\\{}\[\],]')
_IN_STRING = re.compile(r'["\\]')


def _scan(text: str, start: int) -> tuple[int | None, list[tuple[int, str]], bool, bool, str]:
    """Bracket-match from ``text[start]``.

    Returns (end index or None if truncated, cut points, in_string, escape, open closers). A cut
    point (position, closers) is a place where the value can be ended by appending the closers:
    just before a comma, or just after an opening bracket.
    """
    stack: list[str] = []
    cuts: list[tuple[int, str]] = []
    i, n = start, len(text)
    while True:
        m = _SPECIAL.search(text, i)
        if m is None:
            return None, cuts, False, False, "".join(reversed(stack))
        i = m.start()
        c = text[i]
        if c == '"':
            j = i + 1
            while True:
                q = _IN_STRING.search(text, j)
                if q is None:
                    return None, cuts, True, False, "".join(reversed(stack))
                if text[q.start()] == "\\":
                    if q.start() + 1 >= n:
                        return None, cuts, True, True, "".join(reversed(stack))
                    j = q.start() + 2
                    continue
                i = q.start() + 1
                break
            continue
        if c in "{[":
            stack.append(_CLOSE[c])
            cuts.append((i + 1, "".join(reversed(stack))))
        elif c in "}]":
            if not stack or stack[-1] != c:
                return None, cuts, False, False, ""
            stack.pop()
            if not stack:
                return i, cuts, False, False, ""
        elif c == "," and stack:
            cuts.append((i, "".join(reversed(stack))))
        i += 1


def _repair(text: str, start: int, cuts: list[tuple[int, str]], in_string: bool,
            escape: bool, closers: str) -> Any:
    tail = text[start:]
    if in_string:
        if escape:
            tail = tail[:-1]
        tail += '"'
    value = _loads(tail + closers)
    if value is not None:
        return value
    for pos, close in reversed(cuts[-_MAX_REPAIRS:]):
        value = _loads(text[start:pos] + close)
        if value is not None:
            return value
    return None


def _find_json(text: str, openers: str) -> Any:
    if not isinstance(text, str):
        return None
    starts = [m.start() for m in re.finditer("[" + re.escape(openers) + "]", text)][:_MAX_STARTS]
    for start in starts:
        end, cuts, in_string, escape, closers = _scan(text, start)
        if end is not None:
            value = _loads(text[start:end + 1])
            if value is not None:
                return value
        elif closers:
            value = _repair(text, start, cuts, in_string, escape, closers)
            if value is not None:
                return value
    return None


def parse_json_object(text: str) -> dict | None:
    """The first JSON object in ``text`` (fences, prose, trailing commas, cut-off tail tolerated)."""
    value = _find_json(text, "{")
    return value if isinstance(value, dict) else None


# ---------------------------------------------------------------------------- reports


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        f = float(value)
    elif isinstance(value, str):
        m = _NUMBER.search(value)
        if not m:
            return None
        f = float(m.group())
    else:
        return None
    return f if math.isfinite(f) else None


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return ""


_ID_TOKEN = re.compile(r"[\w\-:.]+")


def _cited(value: Any, known: set[str]) -> list[str]:
    if isinstance(value, str):
        items: list[Any] = _ID_TOKEN.findall(value)
    elif isinstance(value, list):
        items = value
    else:
        return []
    out: list[str] = []
    for item in items:
        if isinstance(item, (str, int)) and not isinstance(item, bool):
            s = str(item).strip().strip("[]()\"' .,;:")
            if s in known and s not in out:
                out.append(s)
    return out


def parse_report(text: str, *, known_entity_ids: set[str],
                 known_relationship_ids: set[str]) -> dict | None:
    """A community report normalized to the shape ``records.Report`` stores, or None."""
    obj = parse_json_object(text)
    if obj is None:
        return None
    if "title" not in obj and len(obj) == 1:
        inner = next(iter(obj.values()))
        if isinstance(inner, dict):
            obj = inner
    title, summary = _text(obj.get("title")), _text(obj.get("summary"))
    if not title or not summary:
        return None
    rating = _number(obj.get("rating"))
    rating = 5.0 if rating is None else min(10.0, max(0.0, rating))
    raw = obj.get("findings")
    if isinstance(raw, dict):
        raw = [raw]
    findings: list[dict] = []
    for item in raw if isinstance(raw, list) else []:
        if isinstance(item, str):
            if item.strip():
                findings.append({
                    "summary": item.strip(), "explanation": "",
                    "entities": _cited(item, known_entity_ids),
                    "relationships": _cited(item, known_relationship_ids),
                })
            continue
        if not isinstance(item, dict):
            continue
        f_summary = _text(item.get("summary") or item.get("title") or item.get("insight"))
        explanation = _text(item.get("explanation") or item.get("details") or item.get("text"))
        if not f_summary and not explanation:
            continue
        findings.append({
            "summary": f_summary or explanation.split(". ")[0],
            "explanation": explanation,
            "entities": _cited(item.get("entities"), known_entity_ids),
            "relationships": _cited(item.get("relationships"), known_relationship_ids),
        })
    return {
        "title": title, "summary": summary, "rating": rating,
        "rating_explanation": _text(obj.get("rating_explanation")), "findings": findings,
    }


# ---------------------------------------------------------------------------- query answers


def parse_ratings(text: str, ids: list[str]) -> dict[str, float]:
    """``{id: score}`` from lines like ``ID: SCORE``; unknown ids ignored, unrated ids absent."""
    if not isinstance(text, str) or not ids:
        return {}
    known = sorted({i for i in ids if isinstance(i, str) and i}, key=len, reverse=True)
    if not known:
        return {}
    pattern = re.compile(r"(?<![\w\-])(" + "|".join(map(re.escape, known)) + r")(?![\w\-])")
    out: dict[str, float] = {}
    for line in text.splitlines():
        matches = list(pattern.finditer(line))
        for k, m in enumerate(matches):
            stop = matches[k + 1].start() if k + 1 < len(matches) else len(line)
            number = _NUMBER.search(line, m.end(), stop)
            if number and m.group(1) not in out:
                value = float(number.group())
                if math.isfinite(value):
                    out[m.group(1)] = value
    return out


def usable_map_answer(text: str) -> bool:
    """Whether ``text`` answers the map prompt: points, or a list of them that may be empty
    ("nothing relevant"). An object without points (prose around a broken JSON, another
    schema) is no answer: taking it for "nothing relevant" dropped a batch's reports unread."""
    if parse_map_points(text):
        return True
    value = _find_json(text, "{[")
    return isinstance(value, list) or (isinstance(value, dict) and isinstance(value.get("points"), list))


def parse_map_points(text: str) -> list[dict]:
    """``[{"description", "score"}]`` from ``{"points": [...]}`` or a bare list; score 0..100."""
    value = _find_json(text, "{[")
    if isinstance(value, dict):
        points = value.get("points")
        if points is None:
            lists = [v for v in value.values() if isinstance(v, list)]
            points = lists[0] if len(lists) == 1 else ([value] if "description" in value else [])
    else:
        points = value
    out: list[dict] = []
    for item in points if isinstance(points, list) else []:
        if isinstance(item, str):
            description, score = item.strip(), None
        elif isinstance(item, dict):
            description = _text(item.get("description") or item.get("point") or item.get("text"))
            score = _number(item.get("score"))
        else:
            continue
        if description:
            score = 50.0 if score is None else min(100.0, max(0.0, score))
            out.append({"description": description, "score": score})
    return out


# --------------------------------------------------------------------------------------------
# Reasoning models (DeepSeek-R1, Qwen3 ...) served without a reasoning parser put their thinking
# in the answer's text, in a leading <think> ... </think> block: it is no part of the answer.
# Some chat templates open the block in the prompt (DeepSeek-R1's), so the answer holds only its
# end, </think>, on a line of its own (an answer may speak of the tag); the other tags are only
# read when they open the answer.
_REASONING_OPEN = re.compile(r"\A\s*<(think|thinking|thought|reasoning)>", re.IGNORECASE)
_REASONING_CLOSE = re.compile(r"</(think|thinking|thought|reasoning)>", re.IGNORECASE)
_LONE_CLOSE = re.compile(r"^[ \t]*</(think)>[ \t]*$", re.IGNORECASE | re.MULTILINE)   # on its own line
_ANY_OPEN = re.compile(r"<(think|thinking|thought|reasoning)>", re.IGNORECASE)
_NEVER = re.compile(r"(?!)")
_REASONING_TAGS = ("<think>", "<thinking>", "<thought>", "<reasoning>")
_LONGEST_TAG = max(map(len, _REASONING_TAGS))


def starts_with_reasoning(text: str) -> bool:
    """Whether ``text`` opens with a reasoning block's tag."""
    return _REASONING_OPEN.match(text) is not None


def _reasoning_end(text: str, m: re.Match | None) -> re.Match | None:
    """Where the reasoning block of ``text`` ends: the tag that closes ``m``'s (another
    reasoning tag only when that one never comes), or without ``m`` a lone </think> that no
    opening tag precedes."""
    if m is not None:
        same = re.compile(rf"</{m.group(1)}>", re.IGNORECASE).search(text, m.end())
        return same or _REASONING_CLOSE.search(text, m.end())
    close = _LONE_CLOSE.search(text)
    if close is None or _ANY_OPEN.search(text, 0, close.start()):
        return None
    return close


def split_reasoning(text: str) -> tuple[str, str | None]:
    """(the answer, the reasoning block's tag or None) of ``text``: its leading reasoning block
    removed, or all up to a lone </think>. A block never closed (cut off while thinking)
    leaves no answer."""
    m = _REASONING_OPEN.match(text)
    close = _reasoning_end(text, m)
    if m and close is None:
        return "", m.group(1).lower()
    if close is None:
        return text, None
    return text[close.end():].lstrip(), (m or close).group(1).lower()


class ReasoningFilter:
    """Streams an answer's text on without its reasoning block (``split_reasoning``): ``feed``
    each piece, then ``flush`` at the end. ``thinks``: the model is known to think, so text
    before a lone </think> may be thinking whose opening tag was in the prompt, and is held
    back until the tag or the end shows what it is (a model not known to think shows such
    thinking: nothing could tell it from the answer while it streams). Only a piece and the end
    of the one before are searched: a long answer held back costs no more than one passed on."""

    def __init__(self, emit: Callable[[str], None], *, thinks: bool = False) -> None:
        self.emit = emit
        self.thinks = thinks
        self.parts: list[str] = []   # held back
        self.closer: re.Pattern | None = None   # what ends the block, once known
        self.tail = ""               # the end of the text searched so far
        self.passing = False
        self.blank = False           # the white space after the block is no part of the answer

    def feed(self, piece: str) -> None:
        if self.passing:
            if self.blank:
                piece = piece.lstrip()
                self.blank = not piece
            if piece:
                self.emit(piece)
            return
        self.parts.append(piece)
        if self.closer is None:
            window = "".join(self.parts)   # short: until the start shows whether a tag opens it
            start = window.lstrip().lower()
            if len(start) <= _LONGEST_TAG and any(t.startswith(start) for t in _REASONING_TAGS):
                return   # a tag may be arriving
            opened = _REASONING_OPEN.match(window)
            if opened is None and not self.thinks:
                self._pass(window)
                return
            self.closer = re.compile(rf"</{opened.group(1)}>", re.IGNORECASE) if opened else _LONE_CLOSE
            window = window[opened.end():] if opened else window
        else:
            window = self.tail + piece
        if self.closer is _LONE_CLOSE and _ANY_OPEN.search(window):
            self.closer = _NEVER   # a tag opens later: no lone close; the end will tell
        close = self.closer.search(window)
        # A lone </think> is one only on a line of its own: at the end of the text so far, the
        # next piece may go on with the line.
        if close is not None and not (self.closer is _LONE_CLOSE and close.end() == len(window)):
            self._pass(window[close.end():].lstrip(), after_block=True)
        else:
            self.tail = window[-2 * _LONGEST_TAG:]

    def _pass(self, text: str, *, after_block: bool = False) -> None:
        self.passing, self.parts, self.blank = True, [], after_block and not text
        if text:
            self.emit(text)

    def flush(self) -> None:
        if not self.passing and self.parts:
            answer, _tag = split_reasoning("".join(self.parts))
            if answer:
                self.emit(answer)
        self.parts = []
        self.passing = True


def has_text(answer: str) -> bool:
    """The ``validate`` of an answer any text will do (``ask``'s): an empty one is no answer
    (it was cached, and shown as a blank answer with exit 0, for good)."""
    return bool(answer.strip())
