"""Telling a file `streamrag export` wrote from any other, by its whole content.

An export is the index's own output, whatever its name (`export out`, `export - > x.txt`): the
loader indexes none (read as a document, an export in the indexed folder gave 7,483 relationships
where 959 were), and `export` replaces one without asking; any other file is the user's, indexed,
and never replaced without ``--force``. Both ask ``written_by_export``, so they cannot disagree.

An export is told by its seal: the last line (JSON: its last member, so it stays valid JSON;
GraphML: a comment after the root element) holds the SHA-256 of every byte before it. A user's
file that only opens as an export does (notes dumped with ``json.dump(..., indent=1)``, an export
edited since) has no seal, or one its bytes no longer match. Exports written before the seal are
told by their whole form: the opening every streamrag wrote (``_HEAD``), every line of the body as
its writer lays them out, and its end; as an older streamrag wrote them on Windows too ("\\r\\n"
line ends). An edit inside such an older export that keeps that form cannot be told from it.

An export cut short (a killed `export - > notes/x.txt`, a full disk, or one a watch reads while
it is written into) has neither seal nor end: laid out as an export as far as it goes, it is an
unfinished one (``UNFINISHED``), the index's output all the same: not indexed (it was, and a
model's calls paid for it), and `export` replaces it without ``--force``. Having no seal, it is
told by the writer's exact layout through the cut: for JSON each row of each section with that
section's members, in order (``ROW_KEYS``), indented as msgspec indents them (a user's dump with
indent=1 of a "version" and "documents", missing only its last "}", was one, and was replaced).
A cut within the opening (before ``_HEAD``'s end, about 80 bytes) is not told from a user's file
that opens so: it is read as the tiny document it is. No export leaves one: `export FILE` renames
a whole file over FILE, and `export - > FILE` writes in blocks of 64 KB (a whole small export).
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import BinaryIO

import msgspec

# The name of the seal, in both forms; "sha256:" names how its digest is made.
SEAL_KEY = "export_checksum"


def json_seal(digest: str) -> str:
    """The last member of a JSON export and its end, ``digest`` the SHA-256 of the bytes before."""
    return f',\n "{SEAL_KEY}": "sha256:{digest}"\n}}\n'


def graphml_seal(digest: str) -> str:
    """The comment that ends a GraphML export, after its root element."""
    return f"<!-- {SEAL_KEY} sha256:{digest} -->\n"


_SEALED = re.compile(rb'(?:,\n "' + SEAL_KEY.encode() + rb'": "sha256:([0-9a-f]{64})"\n\}'
                     rb'|<!-- ' + SEAL_KEY.encode() + rb' sha256:([0-9a-f]{64}) -->)\n?\Z')
_TAIL = 160   # bytes at the end that hold a seal (119 at most)

# How every export streamrag wrote begins (``export._write_json``, ``export._write_graphml``; its
# lines ended "\r\n" where Windows wrote them, before bcd87cd): beyond the opening lines any JSON
# dumped with indent=1 of a "version" and a "documents" list shares, the first document's id and
# path, or no document and the entities; GraphML's first node (an entity's id) or its end.
_HEAD = re.compile(rb'\{\n "version": \d+,\n "documents": '
                   rb'(?:\[\n  \{\n   "id": "doc-[0-9a-f]+",\n   "path": "|\[\],\n "entities": \[)'
                   rb'|<\?xml version="1\.0" encoding="UTF-8"\?>\n<graphml [^\n]*\n'
                   rb'(?:  <key [^\n]*\n)*  <graph id="streamrag" edgedefault="undirected">\n'
                   rb'(?:    <node id="ent-|  </graph>\n</graphml>)')
HEAD_BYTES = 2048   # read to judge the opening

_JSON_KEY = re.compile(rb'\n "([a-z_]+)": ')
# A line of a JSON export's body opens with a space; any other is its end ("}"), or no export's.
_JSON_NOT_BODY = re.compile(rb"\n(?! )")
# The members of each row of a JSON export's sections, in order: the one list of them, from which
# ``export._sections`` reads its rows (``export._columns``) and by which an export cut short is told.
ROW_KEYS = {
    b"documents": [b"id", b"path", b"title", b"tokens"],
    b"entities": [b"id", b"name", b"type", b"description", b"mentions", b"degree", b"documents"],
    b"relationships": [b"id", b"source", b"target", b"description", b"weight", b"mentions",
                       b"combined_degree", b"documents"],
    b"claims": [b"id", b"subject_id", b"object_id", b"type", b"status", b"start_date", b"end_date",
                b"description", b"source_text", b"chunk_id"],
    b"communities": [b"id", b"level", b"parent", b"size", b"members"],
    b"reports": [b"community", b"key", b"title", b"summary", b"rating", b"rating_explanation", b"findings",
                 b"text", b"extractive"],
}
# The members of a JSON export, in order (a sealed one's seal after them, met in one cut short).
_JSON_KEYS = [b"version", *ROW_KEYS]
# Rows of each section, one after another, as the writer lays them out: "{", each of its members
# on its own line (a list's or object's items on lines indented deeper, its end back at the
# member's), "}". Matched line by line: no backtracking.
_JSON_ROW = {section: rb"\n  \{" + b"".join(rb'\n   "' + key + rb'": [^\n]*+(?:(?:\n    [^\n]*+)*+\n   [\]}],?)?+'
                                        for key in keys) + rb"\n  \}"
             for section, keys in ROW_KEYS.items()}
_JSON_ROWS = {section: re.compile(row + rb"(?:," + row + rb")*") for section, row in _JSON_ROW.items()}
_ROW_KEY = re.compile(rb'\n   "([a-z_]+)": ')
_ROW_CUT = re.compile(rb"\n  \{(?:\n   [^\n]*+)*+(?:\n {0,2})?")   # (its last line cut short)
_JSON_VERSION = re.compile(rb'\{\n "version": \d+(?=,)')
# A GraphML export's lines (a value's own line breaks aside, whose text holds no "<": it is
# escaped, but for the "</data>" that ends it).
_GRAPHML_LINES = (rb'      <data key="[^\n]*|    </node>|    </edge>|    <node id="[^\n]*|    <edge id="[^\n]*'
                  rb'|  <key [^\n]*|  </graph>|</graphml>|</data>|<graphml [^\n]*'
                  rb'|  <graph id="streamrag" [^\n]*|(?! *<)[^<\n]*(?:</data>)?')   # (the most met first)
# Where a line of none of those forms begins: "\n" not followed by one and its end (as written,
# or "\r\n" in a file Windows wrote).
_GRAPHML_NOT_LINE = {crlf: re.compile(rb"\n(?!(?:" + _GRAPHML_LINES + rb")" + (rb"\r?\n" if crlf else rb"\n") + rb")")
                     for crlf in (False, True)}
_GRAPHML_END = {crlf: re.compile(rb"\n</graphml>" + (rb"\r?\n" if crlf else rb"\n")) for crlf in (False, True)}
# How the lines of its forms open that are more than a value's text (cut short within one).
_GRAPHML_OPENINGS = (b"  <key ", b'    <node id="', b"    </node>", b'    <edge id="', b"    </edge>",
                     b'      <data key="', b"  </graph>", b"</graphml>", b"</data>", b"<graphml ",
                     b'  <graph id="streamrag" ')
_BLOCK = 1 << 23   # bytes read at a time: each block is judged by a regex or two, not line by line

# What ``export_state`` says of a file: one written whole, or one cut short (a killed `export -
# > notes/x.txt`, a full disk, or one a watch reads while it is written into).
WHOLE = "whole"
UNFINISHED = "unfinished"


def _crlf(head: bytes) -> bool:
    """Whether a file opening with ``head`` ends its lines with "\\r\\n" (Windows' text mode)."""
    first = head.find(b"\n")
    return first > 0 and head[first - 1:first] == b"\r"


def exported_head(head: bytes) -> bool:
    """Whether ``head`` (a file's first bytes) opens as an export does: needed, not enough."""
    if _crlf(head):
        head = head.replace(b"\r\n", b"\n")
    return _HEAD.match(head) is not None


def _sealed(f: BinaryIO, size: int) -> bool | None:
    """Whether the sealed file ``f`` (``size`` bytes) is as its seal says; ``None``: no seal."""
    f.seek(max(size - _TAIL, 0))
    tail = f.read()
    m = _SEALED.search(tail)
    if m is None:
        return None
    left = size - len(tail) + m.start()
    digest = hashlib.sha256()
    f.seek(0)
    while left > 0:
        block = f.read(min(left, 1 << 20))
        if not block:
            return False
        digest.update(block)
        left -= len(block)
    return digest.hexdigest() == (m.group(1) or m.group(2)).decode()


def _partial_graphml_line(line: bytes) -> bool:
    """Whether ``line``, the unended last line of a GraphML file, is the start of one an export writes."""
    if _GRAPHML_NOT_LINE[False].match(b"\n" + line + b"\n") is None:
        return True   # (of a line's form as it is: a value's text, or cut after a line's opening)
    if any(opening.startswith(line) for opening in _GRAPHML_OPENINGS):
        return True
    text, lt, closing = line.partition(b"<")   # a value's text, cut within the "</data>" ending it
    return bool(text.strip(b" ")) and b"</data>".startswith(lt + closing)


def _seal_cut(line: bytes) -> bool:
    """Whether ``line``, after a GraphML export's end, is the start of its seal (cut short)."""
    opening = b"<!-- " + SEAL_KEY.encode() + b" sha256:"
    if len(line) <= len(opening):
        return opening.startswith(line)
    return line.startswith(opening) and re.fullmatch(rb"[0-9a-f]{0,64}|[0-9a-f]{64} -{0,2}", line[len(opening):]) is not None


def _form(f: BinaryIO, crlf: bool) -> str | None:
    """``WHOLE`` if ``f``, no seal, is laid out throughout as an export before the seal was;
    ``UNFINISHED`` if it is laid out so as far as it goes, but has no end (the seal's start at
    most); else ``None``. Read in large blocks, each judged by a regex (read line by line in
    Python, a 50 MB older export took 2.3 s at every `index`)."""
    f.seek(0)
    graphml = f.readline().startswith(b"<?xml")
    not_line = _GRAPHML_NOT_LINE[crlf] if graphml else _JSON_NOT_BODY
    ends = (b"}\n", b"}\r\n") if crlf else (b"}\n",)
    keys: list[bytes] = []
    ended = False   # its last line met ("}", "</graphml>")
    rest = b"\n"   # the end of the line before, and the start of the next, not ended yet
    while block := f.read(_BLOCK):
        if b"\n" not in block:   # within a line longer than a block: read to its end, joined once
            # (joined to each block as it was read, a 400 MB line took 7.5 s, 200 MB 2.2 s)
            if not graphml and (rest + block[:1])[1:2] not in (b" ", b"}"):   # (no export's line)
                return None
            parts = [block]
            while b"\n" not in parts[-1] and (block := f.read(_BLOCK)):
                parts.append(block)
            block = b"".join(parts)
        data = rest + block
        cut = data.rfind(b"\n")
        lines, rest = data[:cut + 1], data[cut:]   # ("\n", lines each ended by "\n")
        if not graphml and rest[1:2] not in (b"", b" ", b"}"):   # (not held while it grows)
            return None
        if len(lines) == 1:
            continue
        if ended:   # a line after the end
            return None
        m = not_line.search(lines)
        if m.start() < len(lines) - 1:   # (at the last "\n", no line follows: all lines fit)
            if graphml or lines[m.start() + 1:] not in ends:
                return None
            ended = True
        if graphml:
            m = _GRAPHML_END[crlf].search(lines)
            if m is not None:
                if m.end() < len(lines):
                    return None
                ended = True
        else:
            keys += _JSON_KEY.findall(lines)
    last = rest[1:]   # the last line, if it did not end with "\n"
    if crlf:
        last = last.removesuffix(b"\r")   # (cut between its "\r" and "\n")
    if last:
        if ended:   # after the GraphML end: at most the seal's start
            return UNFINISHED if graphml and _seal_cut(last) else None
        if last == (b"</graphml>" if graphml else b"}"):
            ended = True
        elif graphml and not _partial_graphml_line(last) or not graphml and not last.startswith(b" "):
            return None
        elif not graphml:
            keys += _JSON_KEY.findall(b"\n" + last)
    if graphml:
        return WHOLE if ended else UNFINISHED
    if ended:
        return WHOLE if keys == _JSON_KEYS else None
    if keys != (_JSON_KEYS + [SEAL_KEY.encode()])[:len(keys)]:
        return None
    return UNFINISHED if _json_laid_out(f, crlf) else None


def _json_laid_out(f: BinaryIO, crlf: bool) -> bool:
    """Whether the JSON file ``f``, cut short, is laid out through the cut as ``export._write_json``
    lays an export out: its members in their order, each row of a section with that section's
    members in theirs (``ROW_KEYS``) and indented as msgspec indents them, and what is left after
    the last whole row the start of what would follow. A user's JSON dumped with indent=1 that
    only opens as an export does (a "version", a "documents" list) is not; it was taken for one,
    and `export` replaced it without --force. Read in blocks, rows judged a block's run at a time."""
    f.seek(0)
    sections = list(ROW_KEYS)
    section = b""   # the section whose rows are read
    state = "start"   # then "member" (after a member), "open" (after its "["), "rows" (after a row)
    data, pos, eof, held = b"", 0, False, b""
    while True:
        m = None
        if state == "start":
            m = _JSON_VERSION.match(data, pos)
            state = "member" if m else state
        elif state == "member" and sections:
            want = b',\n "' + sections[0] + b'": ['
            if data.startswith(want, pos):
                pos, section, state = pos + len(want), sections.pop(0), "open"
                continue
        elif state == "open" and data.startswith(b"]", pos):
            pos, state = pos + 1, "member"
            continue
        elif state == "rows" and data.startswith(b"\n ]", pos):
            pos, state = pos + 3, "member"
            continue
        elif state in ("open", "rows"):
            m = _JSON_ROWS[section].match(data, pos + (state == "rows" and data.startswith(b",", pos)))
            if m and (state == "open" or m.start() > pos):
                if not _rows_laid_out(m.group(), section):
                    return False
                state = "rows"
            else:
                m = None
        if m is not None:
            pos = m.end()
            continue
        rest = data[pos:]   # no whole token: the start of one, cut short, or no export's
        if not _cut_laid_out(rest, state, sections[0] if sections else None, section):
            return False
        if eof:
            return True
        # More: at least as much as is held (a row longer than a block is copied a few times,
        # not once for each block: `_form`)
        parts, more = [rest, held], 0
        while more <= len(rest):
            block = f.read(_BLOCK)
            if not block:
                eof = True
                break
            parts.append(block)
            more += len(block)
        data, pos = b"".join(parts), 0
        held = b""
        if crlf:
            if not eof and data.endswith(b"\r"):   # (its "\n" in the next block)
                data, held = data[:-1], b"\r"
            data = data.replace(b"\r\n", b"\n")
            if eof:
                data = data.removesuffix(b"\r")


def _rows_laid_out(rows: bytes, section: bytes) -> bool:
    """Whether ``rows`` (a run of rows of ``section``, each with its members) are indented as msgspec does."""
    text = b'{\n "' + section + b'": [' + rows + b"\n ]\n}"   # (the rows' place in an export)
    try:
        return msgspec.json.format(text, indent=1) == text
    except msgspec.DecodeError:
        return False


def _cut_laid_out(rest: bytes, state: str, member: bytes | None, section: bytes) -> bool:
    """Whether ``rest``, what follows the last whole part (``state``: see ``_json_laid_out``) of a
    JSON export, is the start of what may follow it there: the next ``member`` (``None``: the seal),
    a row of ``section``, its end."""
    if state == "member":
        if member is not None:
            return (b',\n "' + member + b'": [').startswith(rest)
        opening = b',\n "' + SEAL_KEY.encode() + b'": "sha256:'
        if rest == b"\n":   # (an export before the seal, cut within its end: "\n}")
            return True
        if len(rest) <= len(opening):
            return opening.startswith(rest)
        return (rest.startswith(opening)
                and re.fullmatch(rb'[0-9a-f]{0,64}|[0-9a-f]{64}"\n?', rest[len(opening):]) is not None)
    if state == "open":
        return rest == b"" or _row_cut(rest, section)
    if state == "rows":
        return b"\n ]".startswith(rest) or rest.startswith(b",") and _row_cut(rest[1:], section)
    opening = b'{\n "version": '   # (its opening, read in part)
    return opening.startswith(rest) or rest.startswith(opening) and rest[len(opening):].isdigit()


def _row_cut(rest: bytes, section: bytes) -> bool:
    """Whether ``rest`` is the start of a row of ``section`` as the writer lays it out, cut short."""
    if len(rest) <= 4:
        return b"\n  {".startswith(rest)
    keys = _ROW_KEY.findall(rest)
    return _ROW_CUT.fullmatch(rest) is not None and keys == ROW_KEYS[section][:len(keys)]


def export_state(f: BinaryIO) -> str | None:
    """``WHOLE`` if the open file ``f`` is one `streamrag export` wrote (see the module's note),
    ``UNFINISHED`` if it is the start of one (no seal, no end: cut short), else ``None``."""
    f.seek(0)
    head = f.read(HEAD_BYTES)
    if not exported_head(head):
        return None
    size = f.seek(0, os.SEEK_END)
    sealed = _sealed(f, size)
    if sealed is not None:
        return WHOLE if sealed else None
    return _form(f, _crlf(head))


# Verdicts on files read whole, by path and stat: a scan (each watch batch) asks of each export
# in the folder, and reading a large one through each time is the cost of an export's size.
_told: dict[tuple, str | None] = {}
_TOLD_MAX = 256


def export_state_of(path: str | Path) -> str | None:
    """``export_state`` of the file ``path`` (an unreadable file is none)."""
    try:
        with open(path, "rb") as f:
            if not exported_head(f.read(HEAD_BYTES)):
                return None
            st = os.fstat(f.fileno())
            key = (os.fspath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            if key not in _told:
                if len(_told) >= _TOLD_MAX:
                    _told.clear()
                _told[key] = export_state(f)
            return _told[key]
    except OSError:
        return None


def written_by_export(path: str | Path) -> bool:
    """Whether the file ``path`` is one `streamrag export` wrote, whole or cut short: the index's
    output either way, no document, and `export` replaces it (an unreadable file is not)."""
    return export_state_of(path) is not None
