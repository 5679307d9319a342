"""Text from documents and models made safe to print to a terminal.

Document text reaches the terminal through answers, footers and status lines; it must not
drive the terminal (colours, titles, cursor moves), so escape sequences and control characters
are dropped, also when they arrive split across streamed pieces.
"""

from __future__ import annotations

import re

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


def terminal_text(text: str) -> str:
    """``text`` safe to print to a terminal: no escape sequences, no controls but \\n and \\t."""
    return _CONTROL.sub("", _ANSI.sub("", text))


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
