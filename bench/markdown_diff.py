"""Markdown read by this tree and by an earlier commit: the same on random snippets, and how fast.

    python bench/markdown_diff.py                         # against HEAD, 5000 snippets
    python bench/markdown_diff.py --rev HEAD~2 --snippets 20000 --corpus notes/

A change meant to keep the output (a faster scanner) must show no difference here: each
snippet is random lines drawn from a pool of Markdown constructs (quotes, callouts, fences,
indented code, list items, comments, links, front matter, raw HTML), read by both
``streamrag/markdown.py`` versions (front matter, comments, links and quotes, what ``loader``
reads, and ``_blocks``' lines and code). The first few that differ are printed; the exit status
is 1 if any does. ``--corpus``: the time each takes to read the folder's .md files (CPU time,
best of five), and how many of them are read otherwise (text or title). Prints one JSON line.
"""

from __future__ import annotations

import argparse
import inspect
import random
import subprocess
import sys
import time
import types
from pathlib import Path

from _harness import emit

from streamrag import markdown

_PROSE = ["Ada Osk met Bo Lund.", "Ada wrote to [[Bo Lund]] and [[Velo|the harbour]].",
          "See [[Note#H#H2]], [[Note#^b1]] and ![[map.png]].", "Rope <!-- private --> sold.",
          "The `[[kept]]` span and ``a `[[x]]` b`` too.", "é [[x]]", "\u00a0x", "text <!-- a", "b --> c"]
_LINES = ["", "", "", "{p}", "{p}", "> {p}", "> > {p}", ">", "> [!note] Title", "> [!tip]- {p}",
          "    {p}", "\t{p}", "        {p}", "   {p}", " \t {p}", "- {p}", "* {p}", "+ {p}", "1. {p}",
          "2. {p}", "12. {p}", "1) {p}", "-", "1.", "  - {p}", "    - {p}", "\t- {p}", "\t\t- {p}",
          "- > {p}", "1. > {p}", "-\t> {p}", "  > {p}", ">\t{p}", ">     {p}", ">>     {p}",
          "```", "```py", "~~~", "````", "```ls``` first.", "  ```", "    ```", "> ```", "> ~~~",
          "> > ```", "1. ```", "- ```", "# {p}", "## [[Note#H]]", "===", "---", "- - -", "***",
          "___", "<!-- c -->", "<!--", "-->", "| a | [[T\\|alias]] |", "- [ ] task [[n|m]]", "<pre>",
          "</pre>", "  <script>{p}", "> - {p}", "> 1. {p}", ">   - {p}", ">       {p}", ">         {p}",
          "> - ```", "<textarea>", "</textarea>", "> <pre>", "> </pre>", "> <div>", "<div>", "</div>",
          "`` {p}", "{p} ``", "`" * 17 + " {p}", "{p} " + "`" * 17]


def _snippet(rng: random.Random) -> str:
    text = "\n".join(rng.choice(_LINES).replace("{p}", rng.choice(_PROSE))
                     for _ in range(rng.randint(0, 25)))
    front = rng.choice(["---\ntitle: T\n---\n", "---\ntitle: T # c\n---\n", "---\ntitle: T\n...\n",
                        "+++\ntitle = 'T'\n+++\n"])
    return (front + text) if rng.random() < 0.1 else text


def _read(m: types.ModuleType, text: str) -> tuple:
    body, title = m.front_matter(text)
    return body, title, m.as_shown(body), _readable(m, body), _lines(m, body, False), _lines(m, body, True)


def _readable(m: types.ModuleType, text: str) -> str:
    """What ``loader`` reads of ``text`` (``readable``; before it, ``as_shown(without_comments())``)."""
    return m.readable(text) if hasattr(m, "readable") else m.as_shown(m.without_comments(text))


def _lines(m: types.ModuleType, text: str, comments: bool) -> list[tuple[str, bool]]:
    """``_blocks``' lines of ``text`` as shown, each with whether it is code (a line it adds, as
    the fence closing a quote's code, may be one of its own or end the one above it; what it
    says besides, where paragraphs go on, is newer). With ``comments``, as ``readable`` scans
    them (a commit between 505a6b1 and the one that took out ``without_comments`` says so with
    ``shown=True``)."""
    shown = {"shown": True} if comments and "shown" in inspect.signature(m._blocks).parameters else {}
    lines, code = m._blocks(text, comments=comments, **shown)[:2]
    return [(part, kept) for line, kept in zip(lines, code) for part in line.split("\n")]


def _document(m: types.ModuleType, text: str) -> tuple[str, str | None]:
    """A file's text as ``loader`` reads it, and its front matter title."""
    body, title = m.front_matter(text)
    return _readable(m, body), title


def _at(rev: str) -> types.ModuleType:
    source = subprocess.run(["git", "show", f"{rev}:streamrag/markdown.py"], check=True,
                            capture_output=True, text=True).stdout
    old = types.ModuleType(f"markdown_at_{rev}")
    exec(compile(source, f"{rev}:streamrag/markdown.py", "exec"), old.__dict__)
    return old


def _seconds(m: types.ModuleType, texts: list[str]) -> float:
    best = float("inf")
    for _ in range(5):
        start = time.process_time()
        for text in texts:
            _readable(m, m.front_matter(text)[0])
        best = min(best, time.process_time() - start)
    return round(best, 3)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rev", default="HEAD", help="the commit to compare with (default: HEAD)")
    parser.add_argument("--snippets", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--corpus", type=Path, help="a folder of .md files to time both on")
    args = parser.parse_args()
    old = _at(args.rev)
    rng = random.Random(args.seed)
    differ = 0
    for _ in range(args.snippets):
        text = _snippet(rng)
        if _read(old, text) != _read(markdown, text):
            differ += 1
            if differ <= 3:
                print(f"differs: {text!r}", file=sys.stderr)
    result = {"bench": "markdown_diff", "rev": args.rev, "snippets": args.snippets, "differ": differ}
    if args.corpus:
        texts = [p.read_text(encoding="utf-8") for p in sorted(args.corpus.rglob("*.md"))]
        result.update(corpus_files=len(texts), corpus_chars=sum(map(len, texts)),
                      corpus_files_differ=sum(_document(old, t) != _document(markdown, t) for t in texts),
                      seconds_at_rev=_seconds(old, texts), seconds_now=_seconds(markdown, texts))
    emit(result)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
