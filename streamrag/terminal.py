"""Text from documents and models made safe to print to a terminal.

Document text reaches the terminal through answers, footers and status lines; it must not
drive the terminal (colours, titles, cursor moves), so escape sequences and control characters
are dropped, also when they arrive split across streamed pieces. A path in a message is shown
on one line, its controls and undecodable bytes escaped (``shown``): here, not in the loader
that makes most such messages, for ``ask``'s footer not to load it (17 ms of CPU).
"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path

# Escape sequences (CSI ... final byte, OSC/DCS/APC/PM/SOS strings up to their terminator, and
# two-byte escapes; an unterminated string loses its ESC and bracket only, not the text after
# it), then any other control character but newline and tab (C0, DEL, C1).
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]"
                   r"|\x1b[\]P^_X][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"
                   r"|\x1b[ -/]*[0-~]"
                   r"|\x9b[0-?]*[ -/]*[@-~]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# The start of an escape sequence that may continue in the next streamed piece.
_OPEN_ESCAPE = re.compile(r"(?:\x1b(?:\[[0-?]*[ -/]*|[\]P^_X][^\x07\x1b\x9c]*|[ -/]*)?"
                          r"|\x9b[0-?]*[ -/]*)\Z")


def without_sequences(text: str) -> str:
    """``text`` without its escape sequences, its other control characters kept (a caller that
    shows them escaped: ``one_line``, which showed a colour code as ``\\x1b[31m``)."""
    return _ANSI.sub("", text)


def terminal_text(text: str, *, controls: str = "") -> str:
    """``text`` safe to print to a terminal: no escape sequences, no controls but \\n and \\t
    (each put as ``controls``: a question's words part there)."""
    return _CONTROL.sub(controls, _ANSI.sub("", text))


class TerminalText:
    """``terminal_text`` for text arriving in pieces: an escape sequence split between two
    pieces is held back until it is complete, then dropped whole."""

    def __init__(self, max_held: int = 512) -> None:
        self.held = ""
        self.max_held = max_held

    def feed(self, piece: str) -> str:
        text = self.held + piece
        self.held = ""
        m = _OPEN_ESCAPE.search(text)
        if m and len(text) - m.start() <= self.max_held:
            text, self.held = text[:m.start()], text[m.start():]
        return terminal_text(text)

    def flush(self) -> str:
        text, self.held = self.held, ""
        return terminal_text(text)


def storable(text: str) -> bool:
    """Whether ``text`` can be stored (a name that is not valid UTF-8 decodes to surrogates)."""
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


# Characters that would break a one-line message or drive the terminal: C0 and C1 controls
# (newline, carriage return, escape, ...), DEL, and the Unicode line and paragraph separators.
# (and the marks that reorder text on a terminal: "\u202e" in a name shows "txt.exe" as "exe.txt")
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(ch: str) -> str:
    return _ESCAPES.get(ch) or (f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")


def one_line(text: str) -> str:
    """``text`` for a one-line message: the bytes of an undecodable name shown as ``\\xff``
    escapes, and control characters (a newline in a file name) as ``\\n``, ``\\x1b``, ..."""
    if not storable(text):
        text = os.fsencode(text).decode("utf-8", "backslashreplace")
    return _UNPRINTABLE.sub(lambda m: _escape(m.group()), text)


def flat(text: object) -> str:
    """A program's words (a server's error body, a proxy's page, a failure a run recorded) on one
    line and safe to print: escape sequences dropped (a proxy's colours, a ``\\x1b]0;...``
    title), whitespace runs one space, any other control character (and the marks that reorder
    a line) escaped as ``one_line`` shows them (``\\x07``); letters of any script kept."""
    return one_line(" ".join(without_sequences(str(text)).split()))


def json_line(obj: object, *, ascii: bool) -> str:
    """``obj`` as one line of JSON that is safe to print and means the same: every character
    ``one_line`` escapes is written as a ``\\u`` escape. ``json.dumps`` escapes C0 alone, and
    unless ``ascii`` (a UTF-8 terminal: letters of any script as they are) it wrote DEL, C1
    (U+009B: a one-byte CSI on some terminals) and the marks that reorder a line raw, from a
    model's answer. (They occur in JSON's strings alone, where the escape stands for them.)"""
    text = json.dumps(obj, ensure_ascii=ascii, default=str)
    return _UNPRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def shown(path: Path | str) -> str:
    """``path`` as one line of a message (its control characters and undecodable bytes escaped)."""
    return one_line(os.fspath(path))


def shell_word(path: Path | str) -> str:
    """``path`` quoted for a shell as one word of a command a message gives to run, on one line
    as ``shown``: a relative path opening with "-" is written "./-notes", which no command takes
    for an option (`streamrag index -notes` was a usage error, `iconv -f CP1252 -t UTF-8 -a.txt`
    one of iconv's). One holding characters ``shown`` escapes (a newline, bytes not UTF-8) is
    written in $'...' quotes, whose escapes bash, zsh and ksh read back as those characters:
    as ``shown`` has it in plain quotes, 'a\\nb.txt' named a file of a backslash and an "n"."""
    text = os.fspath(path)
    text = f"./{text}" if text.startswith("-") else text
    if shown(text) == text:
        return shlex.quote(text)
    return "$'" + "".join(_in_dollar_quotes(ch) for ch in text) + "'"


def _in_dollar_quotes(ch: str) -> str:
    """``ch`` inside $'...': a quote and a backslash escaped, what ``shown`` escapes as its bytes
    (``\\xe2\\x80\\xae``: ``\\u202e`` wants a UTF-8 locale; an undecodable name's bytes as they are)."""
    if ch in "\\'":
        return "\\" + ch
    if storable(ch) and not _UNPRINTABLE.match(ch):
        return ch
    return _ESCAPES.get(ch) or "".join(f"\\x{b:02x}" for b in os.fsencode(ch))
