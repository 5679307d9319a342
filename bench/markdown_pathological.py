"""The inputs that once made reading Markdown take seconds, and the CPU time each takes now.

    python bench/markdown_pathological.py                 # this tree
    python bench/markdown_pathological.py --rev HEAD~3    # an earlier commit's markdown.py too

Each case is a file that a regex's backtracking or a scan from each of many openers made slow
(the commit that fixed it is named). Tests check what made them slow (a regex that splits a run
two ways, a close looked up once per opener) without timing anything; the time is measured here.
Prints one JSON line: the seconds of each case (best of three), and with ``--rev`` ``at_rev``
(one run each: a case that was slow took up to a minute).
"""

from __future__ import annotations

import argparse
import sys
import time
import types

from _harness import emit

from streamrag import markdown


def _cases() -> dict[str, tuple[str, str]]:
    """name: (the function of ``markdown`` that reads it, the text)."""
    opens = "<!-- " * 20000
    ticks = "`" * 1999
    return {
        # a896101: a YAML key's lazy run before "[ \t]*:" tried each run of blanks from each blank (8 s).
        "front_matter_runs_of_blanks": ("front_matter", "---\nSlide" + (" " * 10000 + "one") * 100 + "\n---\nSlide two\n"),
        # 961679b: 5 MB after a --- that nothing closes.
        "front_matter_never_closed_items": ("front_matter", "---\n" + "- t\n" * 1_300_000),
        "front_matter_never_closed_rules": ("front_matter", "---\n" + "----\n" * 1_000_000),
        "front_matter_never_closed_line": ("front_matter", "---\n" + "x" * 5_000_000),
        # ddac16f: each <!-- after the last --> of its line scanned to its end (7 s), above a quote (54 s).
        "comments_after_the_last_close": ("readable", f"Ada Osk --> {opens}"),
        "comments_above_a_quote": ("readable", f"Ada Osk {opens}\n-->\n> Bo Lund"),
        "comments_after_a_lone_tick": ("readable", f"Ada `{opens}\n-->\n> Bo"),
        # 241a9d2: runs of backticks that close nowhere, each searched for to the end of the text.
        "tick_runs_of_each_length": ("readable", " ".join("`" * n for n in range(1, 2000))
                                     + f" [[a|b]] {ticks} [[c|d]] <!-- e -->"),
        "tick_runs_a_line_each": ("readable", "\n".join("Ada " + "`" * n + " [[a|b]] <!-- c -->"
                                                        for n in range(1, 2000))),
        # f22f570: a comment over a line break after runs of each length from 3,000 to 1 (3.3 s).
        "comment_after_tick_runs": ("readable", " ".join("`" * n for n in range(3000, 0, -1)) + " <!-- x\n-->"),
    }


def _seconds(m: types.ModuleType, function: str, text: str, runs: int = 3) -> float:
    read = getattr(m, function, None)
    if read is None:   # (an earlier commit: readable was as_shown of without_comments)
        read = lambda t: m.as_shown(m.without_comments(t))   # noqa: E731
    best = float("inf")
    for _ in range(runs):
        start = time.process_time()
        read(text)
        best = min(best, time.process_time() - start)
    return round(best, 4)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rev", help="also time streamrag/markdown.py at this commit (it may take minutes)")
    args = parser.parse_args()
    cases = _cases()
    result: dict = {"bench": "markdown_pathological", "seconds": {name: _seconds(markdown, f, text) for name, (f, text) in cases.items()}}
    if args.rev:
        from markdown_diff import _at

        old = _at(args.rev)
        result["rev"] = args.rev
        result["at_rev"] = {name: _seconds(old, f, text, runs=1) for name, (f, text) in cases.items()}
    emit(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
