"""Markdown as a reader sees it.

What ``loader`` makes of a Markdown file's text before it is indexed: front matter is metadata
(its ``title`` names the document), HTML comments are not shown, wikilinks read as the text they
show, and quotes and callouts without their marks. Code (fenced, indented, or a code span, of
any number of backticks and over the line breaks of its paragraph) is kept as written, links,
comments and all; so is a raw HTML block (``<pre>``, ``<div>`` ...), a ``<pre>``'s comments
hidden as a browser hides them (in a ``<textarea>``, ``<script>`` or ``<style>`` it shows or
runs them as text). ``_blocks`` is one line scanner that follows CommonMark's blocks (list
items, quotes, fences, indented code) as far as those need, and says where paragraphs go on;
the rest is read from runs of lines that are not code (``_sub``). Pure functions of text: no
files, no I/O. A change to what they make of a text is a new ``loader.VERSION`` (every file is
read again).
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Callable

from streamrag.sentences import SETEXT_UNDERLINE

# A run of backticks (group 1), which opens a code span kept as written when a run of as many
# closes it in its paragraph (CommonMark; ``_sub``). Opens the comment and wikilink patterns
# below: what comes first in the text is read first.
_TICKS = r"(`+)"
# Front matter: a first line of --- (YAML, group 1) or +++ (TOML), then up to 10,000 lines (a
# long tag list is metadata still: past 200 lines a note's was indexed as text, its title lost;
# the lines are matched once, so a 5 MB file with no closing line is read in milliseconds), then
# the same line, or for YAML its end of document, "..." (Pandoc's metadata blocks).
_FRONT_MATTER = re.compile(r"\A(?:(---)|\+\+\+)[ \t]*\n((?:.*\n){0,10000}?)(?(1)(?:---|\.\.\.)|\+\+\+)[ \t]*(?:\n|\Z)")
# What opens an HTML comment (group 2) or an Obsidian one, %%...%% (group 3: hidden in its
# reading view, a private note there was indexed and quoted), outside a code span (``a `<!--`
# b`` holds none); where each closes is found by ``_comment_end``, not a regex: a <!-- that
# closes nowhere scanned on to the end (20,000 of them on one line took 7 s). ``_blocks`` looks
# for them in a line with it (``_opens_comment``), ``readable`` takes them out with ``_READ``.
_COMMENTS = re.compile(r"(?=[`<%])(?:" + _TICKS + r"|(<!--)|(%%))")
# A wikilink: group 2 "!" for an embed, group 3 its inside (``_READ``: comments and links, in
# one pass). Code blocks are ``_blocks``' to find: a regex took a line of text four columns in
# ("Para\n    ```") for a fence, and the links after it stayed as written. (Each pattern opens
# with a look at the characters it may begin with: the regex engine skips to one; trying each
# alternative at each character was 3 times as slow.)
_WIKILINK = re.compile(r"(?=[`!\[])(?:" + _TICKS + r"|(!?)\[\[([^\[\]\n]*)\]\])")
_READ = re.compile(r"(?=[`<%!\[])(?:" + _TICKS + r"|(<!--)|(%%)|(!?)\[\[([^\[\]\n]*)\]\])")
# A blockquote line (up to 3 spaces, then its ">" marks; group 1 all of them, group 2 the text)
# and, in that text, an Obsidian callout's first line: "[!type]", a fold mark, its title.
_QUOTE = re.compile(r" {0,3}((?:>[ \t]?)+)(.*)")
_CALLOUT = re.compile(r"\[![^\]\n]*\][+-]?[ \t]*")
_FENCE = re.compile(r"[ \t]*(`{3,}(?=[^`]*$)|~{3,})")   # closed by one of its character at least as long
# Lines that may hold a quote or code (``_blocks``); a note with none is read as it is.
_MAY_HOLD_BLOCKS = re.compile(r"^(?:[ \t]*(?:(?:[-+*]|\d{1,9}[.)])[ \t]+)?(?:>|```|~~~|<[/a-zA-Z?]|<![a-zA-Z\[])"
                              r"| {0,3}\t| {4})",
                              re.MULTILINE)
_MARK = re.compile(r"[ \t]*>[ \t]?")
# A list item's marker (group 1, a bullet or a number) and the blanks after it; a thematic
# break (a "- - -" is none); an ATX heading.
_ITEM = re.compile(r" {0,3}([-+*]|\d{1,9}[.)])(?:[ \t]+|$)")
_BREAK = re.compile(r" {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_HEADING = re.compile(r" {0,3}#{1,6}(?:[ \t]|$)")
# A raw HTML block whose text is shown as written (CommonMark's first kind: a line opening with
# one of these tags, group 1, to the line holding the end of any of them); a link in it is no
# link. In a <pre> a browser hides an HTML comment; <script>, <style> and <textarea> hold raw
# text, where "<!--" is text (a textarea shows it, a script runs it): kept, as code keeps it.
# Or (its third to fifth kinds, group 2) a line opening with "<?" (a processing instruction, to
# the line holding "?>"), "<!" and a letter (a declaration, <!DOCTYPE ..., to a ">") or
# "<![CDATA[" (to "]]>"): kept as written, as raw text is; read as text, a "```" in one opened
# code to the end of the note. Or (its sixth kind) a line opening with a block tag's (a <div>,
# a </table>, ...), to a blank line: a browser hides its comments too, and its links are as
# written. (Its seventh kind, any other tag alone on a line, is not followed.)
_RAW_HTML = re.compile(r"[ \t]*<(?:(pre|script|style|textarea)(?:[ \t>]|$)|(\?|(?-i:!\[CDATA\[)|![a-zA-Z])|/?(?:address|article|aside|base|basefont|"
                       r"blockquote|body|caption|center|col|colgroup|dd|details|dialog|dir|div|dl|dt|fieldset|"
                       r"figcaption|figure|footer|form|frame|frameset|h[1-6]|head|header|hr|html|iframe|legend|li|"
                       r"link|main|menu|menuitem|nav|noframes|ol|optgroup|option|p|param|search|section|summary|"
                       r"table|tbody|td|tfoot|th|thead|title|tr|track|ul)(?:[ \t>]|/>|$))", re.IGNORECASE)
_RAW_HTML_END = re.compile(r"</(?:pre|script|style|textarea)>", re.IGNORECASE)
_TICK_RUN = re.compile(_TICKS)
# A line YAML front matter is made of: a key and its value, a list item, a comment, a blank
# line, or one indented under another (a nested key, a block scalar's text). A --- block with
# any other line is text: slides cut by --- lost their first slide as front matter.
# (A key runs to its first colon: a lazy key before "[ \t]*:" tried each blank run from each of
# its characters, and a line of 100 runs of 10,000 blanks took 8 s.)
_YAML_LINE = re.compile(r"""[ \t].*|#.*|-(?:[ \t].*)?|(?:"[^"]*"[ \t]*|'[^']*'[ \t]*|[^\s#"'][^:]*):(?:[ \t].*)?""")
_FRONT_MATTER_TITLE = re.compile(r"^title[ \t]*[:=][ \t]*(.+)$", re.MULTILINE)
_BLOCK_SCALAR = re.compile(r"[>|][+-]?")
# A quoted value: YAML's (and TOML's) "..." (group 1, its \" and \\ escaped) or '...' (group 2,
# YAML's '' a quote); and outside one, a comment: a "#" after a blank, or opening the value.
_QUOTED = re.compile(r"""\"((?:[^"\\]|\\.)*)"|'((?:[^']|'')*)'""")
_COMMENT = re.compile(r"(?:\A|[ \t])#")


def front_matter(text: str) -> tuple[str, str | None]:
    """A Markdown file's text without its leading YAML (``---``) or TOML (``+++``) front matter,
    and the ``title`` it sets, if any: metadata is not prose to extract from. A wikilink in the
    title reads as the text it shows (``"[[Ada|Lady Ada]]"`` is "Lady Ada"), as in the text."""
    m = _FRONT_MATTER.match(text)
    if not m or m.group(1) and not all(
            _YAML_LINE.fullmatch(line) for line in m.group(2).split("\n") if line):
        return text, None
    t = _FRONT_MATTER_TITLE.search(m.group(2))
    title = _scalar(t.group(1)) if t else None
    if t and _BLOCK_SCALAR.fullmatch(_COMMENT.split(t.group(1), 1)[0].strip()):
        # YAML's `title: >` (or `|`): the title is on the indented lines below.
        below = itertools.takewhile(lambda line: line[:1] in (" ", "\t") or not line.strip(),
                                    m.group(2)[t.end():].split("\n")[1:])
        title = " ".join(line.strip() for line in below if line.strip()) or None
    # (Obsidian links a note to its author by title: "[[Ada]]" titled answers with its brackets.)
    return text[m.end():], (title and _links_shown(title).strip()) or None


def _scalar(value: str) -> str:
    """A front matter key's ``value`` as written on its line: a quoted one's text, or a plain one
    up to its comment (``title: Doc # draft`` is "Doc"; ``C#`` and ``"C# notes"`` keep theirs)."""
    value = value.strip()
    if q := _QUOTED.match(value):
        double, single = q.groups()
        return re.sub(r'\\([\\"])', r"\1", double) if double is not None else single.replace("''", "'")
    plain = _COMMENT.split(value, 1)[0].strip()
    # (Quotes inside a plain value are its text: 'Ada "Bo"' lost its last one. A value opened by
    # a quote it never closes as YAML would is read without its quotes.)
    return plain.strip("'\"").strip() if plain[:1] in ("'", '"') else plain


def _going_on() -> None:
    """A reading's ``check`` when none is given: nothing stops it."""


# A reading's ``check`` is called this many lines apart as its lines are scanned (``_blocks``).
_CHECK_LINES = 4096


def readable(text: str, check: Callable[[], None] = _going_on) -> str:
    """Markdown ``text`` as a reader sees it: ``as_shown``, and without its HTML comments and
    Obsidian's ``%%`` comments (code, fenced, in a quote too, or indented, kept as written),
    read with one scan of its blocks (``_blocks``): a note with a comment was scanned twice.
    ``check``: the loader's read's (``loader.read_documents``), called as its lines are scanned
    (what it raises stops the reading: a 60 MB note's scan took 2-4 s between two checks)."""
    if "-->" not in text and "%%" not in text:
        return as_shown(text, check)
    lines, code, joined = _blocks(text, comments=True, check=check)
    if not any(code):
        return _read(_rejoined(text, lines), joined)
    out = []
    at = 0
    # (2: code, kept; 1: a raw HTML block whose comments are hidden, its links kept as written:
    # one pass over both, so a comment runs on from one into the other, as it did.)
    for kept, run in itertools.groupby(code, key=lambda kept: kept == 2):
        levels = list(run)
        part = _take(lines, at, len(levels))
        out.append(part if kept else _read(part, joined and joined[at:at + len(levels)],
                                           levels if any(levels) else None))
        at += len(levels)
    return "\n".join(out)


def _read(text: str, joined: list[bool] | None, html: list[int] | None = None) -> str:
    """``text`` (no code in it) without its comments and with its links as shown, in one pass
    (``html``: for each line whether it is of a raw HTML block, whose links are as written)."""
    if "<!--" not in text and "%%" not in text and not html:
        return _links_shown(text, joined)
    last = text.rfind("-->"), text.rfind("%%")
    line = counted = 0   # the line at ``counted``

    def read(m: re.Match) -> str | tuple[str, int]:
        nonlocal line, counted
        if m.group(5) is not None:   # a link (the comments in it taken out first, as they were)
            if html:
                line += text.count("\n", counted, m.start())
                counted = m.start()
                if html[line]:
                    return m.group()
            inside = m.group(5)
            if "<!--" in inside or "%%" in inside:
                inside = _read(inside, None)   # (no link in it: its comments out)
            return _shown_link(m.group(4), inside)
        end = _comment_end(text, m, last)
        return ("", end) if end >= 0 else (text[m.start():-end - 1], -end - 1)

    return _sub(_READ, read, text, joined)


def _comment_end(text: str, m: re.Match, last: tuple[int, int]) -> int:
    """Where the comment ``m`` opens (a ``_COMMENTS`` match) ends, after its closing mark; if it
    closes nowhere, -1 - where what stays text ends (the line's end for a <!--). ``last``: the
    last --> and %% of ``text`` (what is after them closes nowhere, found with no search)."""
    if m.group(2):
        if last[0] >= m.end():
            return text.find("-->", m.end()) + 3
        end = text.find("\n", m.end())
        return -1 - (len(text) if end < 0 else end)
    if last[1] >= m.end():
        return text.find("%%", m.end()) + 2
    return -1 - m.end()


def as_shown(text: str, check: Callable[[], None] = _going_on) -> str:
    """Markdown ``text`` as a reader sees it: its quotes and callouts without their marks
    (``_blocks``), and its wikilinks (Obsidian, Foam, Logseq ...) as the text they show:
    ``[[Note|alias]]`` is its alias, ``[[Note]]`` the note's name, ``[[Note#Heading]]``
    ``Note > Heading`` (``[[Note#H#H2]]`` ``Note > H > H2``), a block's ``[[Note#^id]]`` the
    note's name, and an embed ``![[x.png]]`` nothing (its file is indexed on its own, if it is
    text). Code keeps them as written. Left as written, a link's ``|`` split the model's
    ``|``-separated records, and answers quoted the brackets. ``check``: ``readable``'s."""
    lines, code, joined = _blocks(text, check=check)
    # A link lies within a line (and a code span within a paragraph, which code lines end), so
    # the text is read in one pass unless a line of code holds one to keep, or its lines are
    # not its own (a quote's marks taken off): then a window of lines at a time (``_outside_code``).
    keep = code if any("[[" in line for line, kept in zip(lines, code) if kept) else None
    if keep is None and _own_lines(text, lines, check):
        del lines
        return _links_shown(text, joined)
    return _outside_code(lines, keep, joined, _links_shown)


def _own_lines(text: str, lines: list[str], check: Callable[[], None] = _going_on) -> bool:
    """Whether ``lines`` are ``text.split("\\n")`` (``_blocks`` took no quote's marks off), found
    without joining them: ``text`` is then their text, with no copy."""
    at = 0
    for i, line in enumerate(lines):
        if not i % _CHECK_LINES:
            check()
        if not text.startswith(line, at) or at + len(line) < len(text) and text[at + len(line)] != "\n":
            return False
        at += len(line) + 1
    return at == len(text) + 1


def _rejoined(text: str, lines: list[str]) -> str:
    """``"\\n".join(lines)``, ``lines`` being those of ``text`` as ``_blocks`` shows them, let go
    once joined (``lines`` is emptied): ``text`` itself when they are its own (``_own_lines``)."""
    whole = text if _own_lines(text, lines) else "\n".join(lines)
    lines.clear()
    return whole


def _take(lines: list[str], at: int, n: int) -> str:
    """``"\\n".join(lines[at:at + n])``, those lines let go (each left ``None``): a run of a
    note's lines is held once, as its text or as its lines."""
    part = "\n".join(lines[at:at + n])
    lines[at:at + n] = itertools.repeat(None, n)
    return part


def _links_shown(text: str, joined: list[bool] | None = None) -> str:
    if "[[" not in text:
        return text
    return _sub(_WIKILINK, _link_text, text, joined) if "`" in text else _WIKILINK.sub(_link_text, text)


def _link_text(m: re.Match) -> str:
    return _shown_link(m.group(2), m.group(3))


def _outside_code(lines: list[str], code: list[int] | None, joined: list[bool] | None, change) -> str:
    """``lines`` joined, ``change(text, joined)`` applied to each run of them that is not
    ``code`` (``None``: none is), a window of about ``_WINDOW`` characters at a time, cut where
    a paragraph begins (``joined``: ``_blocks``', of its lines; a change must see no further,
    as a wikilink's or a code span's). ``lines`` is used up (``_take``): a big note's lines, its
    text joined and the text read were held at once, and with the pieces of a substitution
    over the whole and their join (a 25 MB note of quotes and links peaked at 10 times its size)."""
    out = []
    at = 0
    for kept, run in itertools.groupby(code if code is not None else [False] * len(lines)):
        n = sum(1 for _ in run)
        if kept:
            out.append(_take(lines, at, n))
            at += n
            continue
        end, start = at + n, at
        size = 0
        for i in range(at, end + 1):
            if i == end or size >= _WINDOW and not (joined and joined[i]):
                out.append(change(_take(lines, start, i - start), joined and joined[start:i]))
                start, size = i, 0
            if i < end:
                size += len(lines[i]) + 1
        at = end
    return "\n".join(out)


_WINDOW = 1 << 20


def _sub(pattern: re.Pattern, replace, text: str, joined: list[bool] | None) -> str:
    """``text`` with each match of ``pattern`` outside a code span replaced by ``replace(m)``.
    (``replace`` may say where the text it replaces ends: ``(text, end)``.)
    ``pattern``'s group 1 is a run of backticks, which opens a code span (kept as written) when
    a run of as many closes it in its paragraph (CommonMark; any number of them, found by
    bisection, not a regex: a run with no match scanned on, and a line of runs of each length
    took seconds). ``joined``: whether each line of ``text`` goes on with the paragraph of the
    line above, as ``_blocks`` finds (a code span runs over a line break into it); ``None``:
    no span runs over one."""
    runs = _tick_runs(text)
    ends: list[int] | None = None   # where the paragraph of each line ends
    line = counted = 0   # the line of ``text`` at ``counted``
    out = []
    at = 0
    while m := pattern.search(text, at):
        if m.group(1) is None:
            shown = replace(m)
            shown, end = shown if isinstance(shown, tuple) else (shown, m.end())
            out += (text[at:m.start()], shown)
            at = end
            continue
        width = _opening(text, m, at)
        close = _next_run(runs, width, m.end()) if width else -1
        if close >= 0 and text.find("\n", m.end(), close) >= 0:   # (not on its line)
            if not joined:
                close = -1
            else:
                if ends is None:
                    ends = _paragraph_ends(text, joined)
                line += text.count("\n", counted, m.start())
                counted = m.start()
                close = close if close < ends[line] else -1
        end = close + width if close >= 0 else m.end()
        out.append(text[at:end])
        at = end
    out.append(text[at:])
    return "".join(out)


def _opening(text: str, run: re.Match, since: int) -> int:
    """The width of the code span that a run of backticks (``run``, in ``text`` after ``since``)
    may open: its own, or one less if a backslash escapes its first tick (CommonMark: the tick
    is shown, and opened a span that kept the links and comments after it as written; two
    backslashes are an escaped one, and the tick opens a span). A run that closes a span needs
    no look: in a span a backslash is text."""
    width = run.end() - run.start()
    k = run.start()
    while k > since and text[k - 1] == "\\":
        k -= 1
    return width - (run.start() - k) % 2


def _tick_runs(text: str) -> dict[int, list[int]]:
    """Where each run of backticks in ``text`` begins, by its length (for ``_next_run``)."""
    runs: dict[int, list[int]] = {}
    for run in _TICK_RUN.finditer(text):
        runs.setdefault(run.end() - run.start(), []).append(run.start())
    return runs


def _next_run(runs: dict[int, list[int]], width: int, at: int) -> int:
    """Where the first run of exactly ``width`` backticks from ``at`` begins (``runs``:
    ``_tick_runs``' of the text), or -1: by bisection, not a scan of the runs on the way."""
    starts = runs.get(width, [])
    j = bisect.bisect_left(starts, at)
    return starts[j] if j < len(starts) else -1


def _paragraph_ends(text: str, joined: list[bool]) -> list[int]:
    """For each line of ``text``, where the paragraph it is in ends (``joined``: as ``_sub``)."""
    breaks = [m.start() for m in re.finditer("\n", text)] + [len(text)]
    ends = breaks[:]
    for i in range(len(breaks) - 2, -1, -1):
        if i + 1 < len(joined) and joined[i + 1]:
            ends[i] = ends[i + 1]
    return ends


def _closes(fence: str, line: str) -> bool:
    """Whether ``line`` closes a code block opened by ``fence``: the same character, at least as
    many, alone on the line."""
    mark = line.strip(" \t")
    return len(mark) >= len(fence) and mark == fence[0] * len(mark)


def _blocks(text: str, *, comments: bool = False,
            check: Callable[[], None] = _going_on) -> tuple[list[str], list[int], list[bool] | None]:
    """Markdown ``text``'s lines as shown, each blockquote line's ``>`` marks taken off, and
    whether each is code, kept as written: a fenced code block (in a quote too, or a list item)
    or an indented one.

    Quotes: ``> text`` is ``text``, nested ``> > text`` too, in a list item as well (``1. > a``
    is ``1. a``), and a callout's first line is read as its title (``> [!note]- Title`` is
    ``Title``, at the start of a quote; without one, the line is left empty: its type is a
    label, not text). Left in, answers quoted the marks ("> [!note] Open question > How ...").
    A fence in a quote loses only that quote's marks (``> > prompt`` in it stays ``> prompt``)
    and ends with the quote (CommonMark: without its marks it opened code to the end of the
    note). Indented code (CommonMark): a line four columns in from the list item it is in,
    after a blank line or at the start, never a paragraph's lazy continuation; a line four
    columns in under a list item is the item's text. In a quote the same holds four columns in
    from its marks (``>     code`` is ``    code``), except under the quote's paragraph, and
    four columns in from the text of the quote's list item it is in (less is the item's text).
    A raw HTML block (CommonMark's first kind, ``<pre>``, ``<script>``, ``<style>`` or
    ``<textarea>`` opening a line, in a quote too) is kept to the line that ends one; a
    ``<pre>`` is no code in ``comments`` (a browser hides the comments in it), the others are
    (raw text, where a browser reads ``<!--`` as text). So is one of its sixth kind (a block
    tag, ``<div>``, ``</table>`` ..., opening a line) to a blank line, no code in ``comments``;
    and of its third to fifth (``<?``, ``<!DOCTYPE``, ``<![CDATA[``) to the line that ends one, code.
    ``comments``: find the code of text whose HTML and ``%%`` comments are still in (none is
    looked for in a comment, nor in a code span, which may run over a line break: ``_Spans``).
    With ``comments`` each line's code says what is kept as written: 2 all (code), 1 its links
    (a raw HTML block whose comments are hidden), 0 nothing; one scan for ``readable``.
    Third, whether each line goes on with the paragraph of the line above, where a code span
    may run on (CommonMark); ``None`` for a text with no block to scan and no backtick.
    ``check``: ``readable``'s, called every ``_CHECK_LINES`` lines.
    """
    as_code = 2 if comments else True   # a line of code
    # a line of a raw HTML block: raw text (a <textarea>'s) or not (its comments hidden)
    kept_html = (as_code, 1 if comments else True)
    lines = text.split("\n")
    if not _may_hold_blocks(text, check):   # no quote, no indented line: nothing to do
        return lines, [False] * len(lines), _joined(lines, check) if "`" in text else None
    out: list[str] = []
    code: list[int] = []
    joined: list[bool] = []   # the line goes on with the paragraph of the line above
    spans = _Spans(text, lines)   # (code spans over line breaks, when comments are looked for)
    fence = quoted_fence = None   # the open fence's mark, outside or inside a quote
    fence_base = 0   # the column the list item the open fence is in begins its text at
    depth = 0   # the previous line's ">" marks: a callout opens a quote (or a deeper one)
    fence_depth = fence_items = 0   # ... those of the quote the open quoted fence is in, and its list items
    fence_in_item = 0   # ... and where the text begins of the quote's list item it is in
    quoted_html = False   # what ends a raw HTML block open in a quote (as raw_html; depth and items: the fence's)
    items: list[int] = []   # the columns where the text of each list item open begins, innermost last
    para = False   # a paragraph is open: a line indented four columns continues it, and is no code
    quote_para = False   # ... in a quote
    quote_items: list[int] = []   # ``items`` of the quote: where the text of each begins in it
    in_comment: str | None | bool = False   # an open comment's closing mark, "-->" or "%%"
    empty_item = False   # the line above opened a list item with no text: a blank line ends it
    raw_html = False   # a raw HTML block is open (in the list item whose text begins at fence_base): what
    # ends it, "</" the end tag of its first kind, "\n" a blank line (its sixth kind)
    raw_text = False   # ... and opened by a tag holding raw text (no comment in it): code in ``comments`` too
    # (A %% with none after it closes nowhere and stays text, as Obsidian shows it; so does a
    # <!-- with no --> after it, and the blocks after it are read: a fence was not.)
    # (The line of the last of each: as many line breaks as are before it.)
    last_pct, last_end = (text.count("\n", 0, at) if comments and at >= 0 else -1
                          for at in (text.rfind("%%"), text.rfind("-->")))
    for i, line in enumerate(lines):
        if not i % _CHECK_LINES:
            check()
        joined.append(False)   # (the paragraph's lines say so below)
        was_para, was_quote_para = para, quote_para
        if in_comment == "%%" and i > last_pct or in_comment == "-->" and i > last_end:
            in_comment = None
        if fence and (not line.strip(" \t") or _indent(line)[0] >= fence_base):
            if _closes(fence, line) and _indent(line)[0] < fence_base + 4:
                fence = None
            out.append(line)
            code.append(as_code)
            continue
        fence = None   # (a line left of the list item the fence is in ends both)
        if raw_html == "\n" and not line.strip(" \t"):
            raw_html = False   # (the blank line that ends it is no part of it)
        if raw_html and (not line.strip(" \t") or _indent(line)[0] >= fence_base):
            raw_html = _html_end(raw_html, line)
            out.append(line)
            code.append(kept_html[not raw_text])   # (a <pre>'s comments are hidden, as a browser hides them)
            continue
        raw_html = False
        if in_comment:
            if in_comment in line:   # (what closes the comment open: --> or %%)
                at = line.index(in_comment) + len(in_comment)
                in_comment = _opens_comment(line[at:], spans.on(i, False, depth), at)
            out.append(line)
            code.append(False)
            # (A line in a comment goes on with the paragraph the comment is in, unless it
            # opens a block: a code span in it would run on.)
            lstripped = line.lstrip(" \t")
            joined[-1] = bool(lstripped) and not _starts_block(lstripped, lstripped[:1]) \
                and not lstripped.startswith("<!--")
            continue
        lstripped = line.lstrip(" \t")
        blank = not lstripped   # (CommonMark: a line of no-break spaces is text)
        if not items and not quoted_fence and (blank or line[0].isalpha()):
            # Most lines: blank, or a paragraph's text at the margin, outside a list or quoted
            # code; what the general case below makes of them, without its matches per line.
            quoted_html = False   # (no lazy line goes on with an HTML block)
            if blank:
                para = quote_para = False
            else:
                quote_para, para = quote_para and para, True
                joined[-1] = was_para
                in_comment = comments and _opens_comment(line, spans.on(i, was_para, depth if quote_para else 0))
            if not quote_para:   # (a lazy line of a quote's paragraph: the quote goes on)
                depth, quote_items = 0, []
            out.append(line)
            code.append(False)
            continue
        if blank and empty_item:
            items.pop()   # (CommonMark: an item begins with at most one blank line)
        empty_item = False
        # (``_indent``'s, from the line's text: the loop's most frequent work, in an outline.)
        start = len(line) - len(lstripped)
        tabbed = start and "\t" in line[:start]
        indent = len(line[:start].expandtabs(4)) if tabbed else start
        first = lstripped[:1]   # (its first character that is not a blank)
        popped = False
        if items and not blank and indent < items[-1] and not (para and not _starts_block(lstripped, first)):
            while items and indent < items[-1]:
                items.pop()   # (else a lazy continuation of the item's paragraph)
            popped = True
        if popped and first == ">" and indent - (items[-1] if items else 0) < 4:
            depth, quote_para = 0, False   # a new quote: the one in the item ended with it
        base = items[-1] if items else 0
        if indent >= base:   # (without a tab, a column a character)
            start = (_cut(line, base) if tabbed else base) if base else 0
        if quote_para and indent - base < 4 and first != ">" and _starts_block(line[start:], first):
            # (A line whose first character is ">" is in the quote, or, after a tab, no block.)
            para = quote_para = False   # not a lazy line: the quote has ended
        item = None
        # (What a list item's marker begins with; a thematic break is three of its character.)
        if not blank and indent - base < 4 and (first in "-+*" or first.isdigit()) \
                and not (line.count(first) >= 3 and _BREAK.match(line, start)):
            item = _ITEM.match(line, start)
            rest = line[item.end():].strip(" \t") if item else ""
            if item and para and not popped and (not rest or first.isdigit() and int(item.group(1)[:-1]) != 1):
                item = None   # CommonMark: only a list from 1, with text, interrupts a paragraph
        if item:
            marker_end, text_at = item.end(1), item.end()
            if "\t" in line:
                marker_end, text_at = len(line[:marker_end].expandtabs(4)), len(line[:text_at].expandtabs(4))
            items.append(marker_end + 1 if not rest or text_at - marker_end > 4 else text_at)
            start, empty_item = item.end(), not rest
        elif para and not quote_para and indent >= base and SETEXT_UNDERLINE.match(line, start):
            # the paragraph above (not one this line would lazily continue) was a heading
            out.append(line)
            code.append(False)
            para = False
            continue
        quote = _QUOTE.match(line, start) if (indent - base < 4 or item) and ">" in line else None
        marks = quote.group(1).count(">") if quote else 0
        if (quoted_fence or quoted_html) and (
                marks < fence_depth or item or len(items) < fence_items
                or fence_in_item and _left_of(_marks_off(line[quote.start(1):], fence_depth), fence_in_item)):
            # A fence (or raw HTML) in a quote ends with it (CommonMark), or with the list item
            # the quote is in, or the quote's list item it is in: a fence closed here, or
            # without its marks it opened code to the end of the note.
            if quoted_fence:
                out.append(quoted_fence)
                code.append(as_code)
                joined.insert(len(joined) - 1, False)
            quoted_fence, quoted_html = None, False
        if not quote:
            if blank or indent - base >= 4 and not item:
                indented = not blank and not para
                out.append(line)
                code.append(as_code if indented else False)
                joined[-1] = para and not blank
                para = para and not blank
                quote_para = quote_para and para
                if not quote_para:
                    depth, quote_items = 0, []
                in_comment = comments and not indented and _opens_comment(line, spans.on(i, para and not blank, depth))
                continue
            # (in a list item, after its marker)
            html = None
            if opened := ("`" in line or "~" in line) and _FENCE.match(line, start):
                fence, fence_base = opened.group(1), items[-1] if items else 0
            elif html := "<" in line and _RAW_HTML.match(line, start):
                raw_html, fence_base = _html_opened(html), items[-1] if items else 0
                opened, raw_text = html, _raw_text(html)
            # (An HTML comment opening the line is a block of its own, as a heading is.)
            quote_para = quote_para and para and not item   # (a lazy line of a quote's paragraph)
            if not quote_para:
                depth, quote_items = 0, []
            at = line[start:start + 1] if item else first   # what a heading, break or comment begins with
            para = not opened and not (at in "#-*_<" and (
                _HEADING.match(line, start) or _BREAK.match(line, start) or line.startswith("<!--", start))) \
                and (bool(rest) if item else not blank)   # (the text from ``start``)
            joined[-1] = was_para and para and not item and not popped
            in_comment = comments and not opened and _opens_comment(line, spans.on(i, joined[-1], depth))
            out.append(line)
            code.append(kept_html[not raw_text] if html else as_code if opened else False)
            continue
        lead = line[:start] if items else ""   # a list item's indent and marker stay
        inner, was = quote.group(2), depth
        depth = marks
        if quoted_fence:
            kept = _marks_off(line[quote.start(1):], fence_depth)
            if _closes(quoted_fence, kept):
                quoted_fence = None
            out.append(lead + kept)
            code.append(as_code)
            continue
        if quoted_html and not (quoted_html == "\n" and not inner.strip(" \t")):
            kept = _marks_off(line[quote.start(1):], fence_depth)
            quoted_html = _html_end(quoted_html, kept)
            out.append(lead + kept)
            code.append(kept_html[not raw_text])
            continue
        quoted_html = False
        if depth != was:
            quote_items = []   # (a quote in or out of this one: its list items are followed no further)
        indent_in, blanks = _indent(inner) if inner[:1] in " \t" else (0, 0)
        has_text = inner.strip(" \t")
        # The quote's list items, followed as those outside a quote are: one ends at a line left
        # of its text, unless the line is a lazy continuation of its paragraph.
        while quote_items and has_text and indent_in < quote_items[-1] and \
                not (quote_para and not _starts_block(inner[blanks:], inner[blanks:blanks + 1])):
            quote_items.pop()
        in_item = quote_items[-1] if quote_items else 0
        if indent_in - in_item >= 4 and has_text and (not quote_para or depth > was):
            # Indented code in the quote (CommonMark: not under its paragraph, which a deeper
            # quote interrupts; four columns in from the list item it is in), kept as written
            # once the marks are off.
            out.append(lead + inner)
            code.append(as_code)
            para = quote_para = False
            continue
        item_in = has_text and indent_in - in_item < 4 and _quoted_item(inner, in_item, quote_para)
        if item_in:
            quote_items.append(item_in[0])
        # (A fence after a list item's marker opens code in the item, as outside a quote.)
        if indent_in - in_item < 4 and (opened := ("`" in inner or "~" in inner)
                                        and _FENCE.match(inner, item_in[1] if item_in else 0)):
            quoted_fence, fence_depth, fence_items = opened.group(1), depth, len(items)
            fence_in_item = quote_items[-1] if quote_items else 0
            out.append(lead + inner)
            code.append(as_code)
            para = quote_para = False
            continue
        if indent_in - in_item < 4 and "<" in inner and (html := _RAW_HTML.match(inner, item_in[1] if item_in else 0)):
            # A raw HTML block in the quote, as outside one; it ends with the quote.
            quoted_html, raw_text = _html_opened(html), _raw_text(html)
            fence_depth, fence_items = depth, len(items)
            fence_in_item = quote_items[-1] if quote_items else 0
            out.append(lead + inner)
            code.append(kept_html[not raw_text])
            para = quote_para = False
            continue
        titled = False
        at = quote.start(2)   # (where ``inner`` begins in the line)
        if depth > was and (callout := _CALLOUT.match(inner)):
            inner, at = inner[callout.end():], at + callout.end()
            titled = bool(inner.strip(" \t"))
        # (A heading or a thematic break in the quote is no paragraph: nothing goes on with it.)
        para = quote_para = bool(inner.strip(" \t")) and not (
            inner.lstrip(" ")[:1] in "#-*_" and not item_in and (_HEADING.match(inner) or _BREAK.match(inner)))
        joined[-1] = para and was_para and was_quote_para and depth <= was and not item_in
        opener = comments and _comment_opener(inner, spans.on(i, joined[-1], depth), at)
        in_comment = opener and ("-->" if opener.group(2) else "%%")
        if titled:
            # A callout's title is a line of its own, shown apart from the text under it: read
            # as prose, "Supply Route" and "The route from ..." made an entity "Supply Route The".
            # (A comment from the title on into the text under it: the title ends where it
            # opens. After it, the blank line was in the comment, and taken out with it.)
            cut = opener.start() if opener else len(inner)
            out += (lead + inner[:cut], "")
            code += (False, False)
            joined.append(False)
            if not opener:
                continue
            lead, inner = "", inner[cut:]
            joined.append(False)
        out.append(lead + inner)
        code.append(False)
    return out, code, joined


def _html_opened(html: re.Match) -> str | bool:
    """What ends the raw HTML block ``html`` (a match of ``_RAW_HTML`` in its line) opens, if its
    line does not end it (else ``False``): "</", the end tag of its first kind; "?>", ">" or
    "]]>", the end of its third, fourth or fifth (found from its "<", as CommonMark's reference
    parser finds it: "<?>" ends on its line); "\n", a blank line."""
    if opener := html.group(2):
        ends = "?>" if opener == "?" else "]]>" if opener[1:2] == "[" else ">"
        return _html_end(ends, html.string, html.start(2) - 1)
    return _html_end("</", html.string, html.end()) if html.group(1) else "\n"


def _raw_text(html: re.Match) -> bool:
    """Whether the raw HTML block ``html`` (a match of ``_RAW_HTML``) holds raw text, where an
    HTML comment is text (a <textarea>'s, a <script>'s ...; a <!DOCTYPE>'s, a <?...?>'s and a
    CDATA's too): kept as code is, in ``_blocks``' ``comments`` too."""
    return bool(html.group(2)) or bool(html.group(1)) and html.group(1).lower() != "pre"


def _html_end(ends: str, line: str, at: int = 0) -> str | bool:
    """What ends a raw HTML block (``ends``, as ``_html_opened``) still open after ``line`` (from
    ``at``), or ``False`` if the line ends it."""
    if ends == "\n":
        return ends
    if ends == "</":
        return False if _RAW_HTML_END.search(line, at) else ends
    return False if line.find(ends, at) >= 0 else ends


def _left_of(text: str, column: int) -> bool:
    """Whether ``text`` (a line) holds text that begins left of ``column``."""
    return bool(text.strip(" \t")) and _indent(text)[0] < column


def _quoted_item(inner: str, base: int, para: bool) -> tuple[int, int] | None:
    """The column where the text begins of the list item that a quote's line opens (``inner``,
    its marks off; ``base``: where the text of the item it is in begins), and where its marker
    and the blanks after it end in ``inner``; ``None`` if it opens none."""
    at = _cut(inner, base) if base else 0
    if inner.count(inner[at:at + 1] or "\n") >= 3 and _BREAK.match(inner, at):
        return None
    if not (item := _ITEM.match(inner, at)):
        return None
    rest = inner[item.end():].strip(" \t")
    number = item.group(1)[:-1] if item.group(1)[0].isdigit() else None
    if para and (not rest or number and int(number) != 1):
        return None   # CommonMark: only a list from 1, with text, interrupts a paragraph
    marker_end, text_at = item.end(1), item.end()
    if "\t" in inner:
        marker_end, text_at = len(inner[:marker_end].expandtabs(4)), len(inner[:text_at].expandtabs(4))
    return (marker_end + 1 if not rest or text_at - marker_end > 4 else text_at), item.end()


# Characters searched at once for a line opening a block (``_may_hold_blocks``): a 60 MB note's
# search took 1.8 s between two checks of its read.
_SEARCH_WINDOW = 1 << 22


def _may_hold_blocks(text: str, check: Callable[[], None]) -> bool:
    """Whether ``_MAY_HOLD_BLOCKS`` is found in ``text``, searched a window of whole lines at a
    time (a match lies within the opening of one line), ``check`` called before each."""
    at, n = 0, len(text)
    while at < n:
        check()
        end = text.find("\n", at + _SEARCH_WINDOW) + 1 or n   # (just past a line break, or the end)
        if _MAY_HOLD_BLOCKS.search(text, at, end):
            return True
        at = end
    return False


def _joined(lines: list[str], check: Callable[[], None] = _going_on) -> list[bool]:
    """``_blocks``' ``joined`` of ``lines`` that hold no quote, code or HTML block: a line of text
    goes on with the paragraph of the line above unless it opens a block (a list item, a
    heading, a thematic break) or is a heading's underline. ``check``: ``_blocks``'."""
    joined = []
    para = False
    for i, line in enumerate(lines):
        if not i % _CHECK_LINES:
            check()
        first = line.lstrip(" \t")[:1]
        if not line.strip(" \t"):
            para = False
            joined.append(False)
            continue
        text = line.lstrip(" \t")
        opens = _interrupts(text, first) if para else _starts_block(text, first)
        opens = opens or para and first in "=-" and bool(SETEXT_UNDERLINE.match(line))
        joined.append(para and not opens)
        para = not opens or bool(_ITEM.match(line)) and not _BREAK.match(line)
    return joined


def _indent(line: str) -> tuple[int, int]:
    """The columns of ``line``'s leading blanks (a tab to the next stop of four) and their length."""
    start = len(line) - len(line.lstrip(" \t"))
    blanks = line[:start]
    return (len(blanks.expandtabs(4)) if "\t" in blanks else start), start


def _cut(line: str, columns: int) -> int:
    """Where ``line``'s text begins once ``columns`` of its leading blanks are taken off."""
    head = line[:columns]
    if "\t" not in head:   # (a column a character)
        return len(head) - len(head.lstrip(" "))
    column = 0
    for i, ch in enumerate(line):
        if column >= columns or ch not in " \t":
            return i
        column += 1 if ch == " " else 4 - column % 4
    return len(line)


def _marks_off(quoted: str, marks: int) -> str:
    """``quoted`` (a line from its first ``>``) without its first ``marks`` quote marks."""
    at = 0
    for _ in range(marks):
        at = _MARK.match(quoted, at).end()
    return quoted[at:]


def _starts_block(text: str, first: str) -> bool:
    """Whether ``text`` (a line from its first character) opens a block: a list item, a quote, a
    fence, a heading, a thematic break, a raw HTML block or a comment (CommonMark's second kind
    of HTML block); one that does not continues a paragraph above. ``first``: its first
    character that is not a blank; most lines' tells they open none."""
    if not (first in "-+*>`~#_<" or first.isdigit()):
        return False
    return bool(_ITEM.match(text) or text.startswith(">") or _FENCE.match(text) or _HEADING.match(text)
                or _BREAK.match(text) or _RAW_HTML.match(text) or text.startswith("<!--"))


def _interrupts(text: str, first: str) -> bool:
    """Whether ``text`` (a line from its first character, ``first``) opens a block that ends a
    paragraph above it: as ``_starts_block``, but a list item only from 1, with text (CommonMark)."""
    if not _starts_block(text, first):
        return False
    return not (_ITEM.match(text) and not _BREAK.match(text) and not _quoted_item(text, 0, True))


def _opens_comment(text: str, spans: _Spans | None = None, at: int = 0) -> str | None:
    """What closes the comment ``text`` opens and does not close (outside its code spans): "-->"
    for an HTML comment, "%%" for Obsidian's (a code block commented out between %% lines was
    read as code, and indexed with its %% marks); ``None`` when it opens none. ``spans``: the
    code spans that run over its line breaks (``text`` is its line from ``at``), which it
    follows; else a code span ends with the line."""
    if not (spans and spans.width) and "<!--" not in text and "%%" not in text and not (spans and "`" in text):
        return None   # (most lines: what ``_comment_opener`` finds first, without a call)
    opener = _comment_opener(text, spans, at)
    return ("-->" if opener.group(2) else "%%") if opener else None


def _comment_opener(text: str, spans: _Spans | None = None, at: int = 0) -> re.Match | None:
    """The opening mark (a ``_COMMENTS`` match) of the comment ``text`` opens and does not close,
    as ``_opens_comment``."""
    runs = None   # (the runs of backticks of ``text``, looked up once there is one to close)
    start = 0
    if spans and spans.width:   # a code span from the lines above: the text is in it to its close
        runs = _tick_runs(text)
        close = _next_run(runs, spans.width, 0)
        if close < 0:
            return None
        start, spans.width = close + spans.width, 0
    if text.find("<!--", start) < 0 and text.find("%%", start) < 0 and not (spans and text.find("`", start) >= 0):
        return None
    last = text.rfind("-->"), text.rfind("%%")
    while m := _COMMENTS.search(text, start):
        if m.group(1):
            width = _opening(text, m, start)
            runs = runs if runs is not None else _tick_runs(text)
            close = _next_run(runs, width, m.end()) if width else -1
            if close >= 0:
                start = close + width
            elif width and spans and spans.closes_later(at + m.end(), width):
                spans.width = width   # (the rest of the line is in it)
                return None
            else:
                start = m.end()   # (a run none closes is text)
            continue
        end = _comment_end(text, m, last)
        if end < 0:   # (the first that closes nowhere: the rest of the line is in it)
            return m
        start = end
    return None


class _Spans:
    """What ``_blocks`` (finding comments) knows of the code spans that run over a line break:
    the ``width`` of the run that opened one still open, and whether a run closes in a later
    line of its paragraph (as far as a line scanner can tell ahead: to a blank line, or one
    that opens a block). A ``<!--`` in one is no comment: a fence after it was taken for text."""

    def __init__(self, text: str, lines: list[str]) -> None:
        self.text, self.lines, self.width = text, lines, 0
        self.line = 0   # the line being read
        self.depth = 0   # ... and the ">" marks of the quote its paragraph is in
        self._runs: dict[int, list[int]] | None = None   # where runs of each width begin
        self._starts: list[int] = []   # where each line begins in ``text``
        self._ends = (-1, -1)   # lines from the first to (before) the second are one paragraph

    def on(self, line: int, goes_on: bool, depth: int = 0) -> _Spans:
        """These spans, reading ``line``; ``goes_on``: whether it goes on with the paragraph
        above (else no span is open in it); ``depth``: the ">" marks of the quote its paragraph
        is in (0: none)."""
        self.line, self.depth = line, depth
        if not goes_on:
            self.width = 0
        return self

    def closes_later(self, at: int, width: int) -> bool:
        """Whether a run of ``width`` begins in a later line of the paragraph than the line
        being read (``at``: a place in it after the run opening the span)."""
        if self._runs is None:
            self._runs = _tick_runs(self.text)
            self._starts = list(itertools.accumulate((len(line) + 1 for line in self.lines[:-1]), initial=0))
        close = _next_run(self._runs, width, self._starts[self.line] + at)
        return close >= 0 and bisect.bisect_right(self._starts, close) - 1 < self._end(self.line)

    def _end(self, i: int) -> int:
        """The first line after ``i`` that ends its paragraph (blank, or opening a block): a
        line with more ">" marks than the quote the paragraph is in (``depth``) opens a quote
        (CommonMark: "> quote" under a paragraph is none of it; its "`" closed a span opened
        above, and a comment after that was read as code)."""
        if not self._ends[0] <= i < self._ends[1]:
            k = i + 1
            while k < len(self.lines):
                rest = self.lines[k].lstrip(" \t>")
                if not rest.strip(" \t") or _interrupts(rest, rest[:1]) or \
                        self.lines[k].count(">", 0, len(self.lines[k]) - len(rest)) > self.depth:
                    break
                k += 1
            self._ends = (i, k)
        return self._ends[1]


def _shown_link(embed: str, inside: str) -> str:
    """The text a wikilink shows (``embed``: its "!", ``inside``: what is between its brackets)."""
    if embed:
        return ""
    target, bar, alias = inside.partition("|")
    if bar and alias.strip():
        return alias.strip()
    note, _, part = target.rstrip("\\").partition("#")   # a table's link escapes its bar: \|
    note, part = note.strip(), part.strip()
    if not part or part.startswith("^"):
        return note
    # A heading under a heading, [[Note#H#H2]], shows each: "Note > H > H2".
    return " > ".join(p for p in (note, *(h.strip() for h in part.split("#"))) if p)
