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
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import BinaryIO

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

# The members of a JSON export, in order; what each line of a GraphML export's body opens with
# (a value's own line breaks aside, whose text holds no "<": it is escaped).
_JSON_KEYS = [b"version", b"documents", b"entities", b"relationships", b"claims", b"communities", b"reports"]
_JSON_MEMBER = re.compile(rb' "([a-z_]+)": ')
_GRAPHML_LINE = re.compile(rb'  <key |    <node id="|    </node>$|    <edge id="|    </edge>$|      <data key="')


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


def _older_form(f: BinaryIO, crlf: bool) -> bool:
    """Whether ``f``, no seal, is laid out throughout as an export before the seal was."""
    f.seek(0)
    lines = iter(f)
    first = next(lines, b"")
    graphml = first.startswith(b"<?xml")
    keys: list[bytes] = []
    last = b""
    for line in lines:
        if last == b"}" or last == b"</graphml>":   # a line after the end
            return False
        last = line[:-2] if crlf and line.endswith(b"\r\n") else line.rstrip(b"\n")
        if graphml:
            if last.lstrip(b" ").startswith(b"<"):
                if not (_GRAPHML_LINE.match(last) or last in (b"  </graph>", b"</graphml>")
                        or last == b"</data>" or last.startswith((b"<graphml ", b'  <graph id="streamrag" '))):
                    return False
            elif b"<" in last.removesuffix(b"</data>"):   # (a value's next line)
                return False
        elif last != b"}":
            if not last.startswith(b" "):
                return False
            m = _JSON_MEMBER.match(last)
            if m:
                keys.append(m.group(1))
    if graphml:
        return last == b"</graphml>"
    return last == b"}" and keys == _JSON_KEYS


def is_export(f: BinaryIO) -> bool:
    """Whether the open file ``f`` is one `streamrag export` wrote (see the module's note)."""
    f.seek(0)
    head = f.read(HEAD_BYTES)
    if not exported_head(head):
        return False
    size = f.seek(0, os.SEEK_END)
    sealed = _sealed(f, size)
    return sealed if sealed is not None else _older_form(f, _crlf(head))


# Verdicts on files read whole, by path and stat: a scan (each watch batch) asks of each export
# in the folder, and reading a large one through each time is the cost of an export's size.
_told: dict[tuple, bool] = {}
_TOLD_MAX = 256


def written_by_export(path: str | Path) -> bool:
    """Whether the file ``path`` is one `streamrag export` wrote (an unreadable file is not)."""
    try:
        with open(path, "rb") as f:
            if not exported_head(f.read(HEAD_BYTES)):
                return False
            st = os.fstat(f.fileno())
            key = (os.fspath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            told = _told.get(key)
            if told is None:
                told = is_export(f)
                if len(_told) >= _TOLD_MAX:
                    _told.clear()
                _told[key] = told
            return told
    except OSError:
        return False
