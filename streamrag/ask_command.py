"""``streamrag ask``: the command line over ``query.ask``, and what it prints.

It parses, asks, prints: the answer streams to stdout as the model writes it (a citation held
back until it closes, escapes of document text dropped), status lines go to stderr, and a
footer names the documents, the search and its cost; ``--json`` prints ``Answer.to_json()``. A
model's answer to a question naming what the index lacks is printed after a line saying so
(``query.missing_note``), as an extractive answer's text begins.
``query`` is imported when the command runs, not when the parser is built (``--help``).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from streamrag import citations
from streamrag.config import MODES
from streamrag.store import update_under_way
from streamrag.terminal import TerminalText, json_line, shown, terminal_text
from streamrag.words import counted

if TYPE_CHECKING:
    from streamrag.query import Answer


def add_ask_command(subparsers) -> None:
    """The ``ask`` subcommand."""
    from streamrag.cli import CONFIG_DEFAULT, DB_WITH_DIR, choice_arg, path_arg

    p = subparsers.add_parser("ask", help="ask the index a question (global, local or basic search)")
    p.add_argument("question", metavar="QUESTION", help="the question, quoted")
    p.add_argument("folder", nargs="?", metavar="DIR", type=path_arg,
                   help="the indexed folder to ask, as if ask ran in it: its streamrag.toml and its "
                        "index (default: here)")
    p.add_argument("--mode", choices=MODES, type=choice_arg, default="auto",
                   help="global: community reports; local: entities and their sources; basic: plain "
                        "chunk retrieval; auto (default): global or local, chosen without a model call")
    p.add_argument("--level", type=int, metavar="N",
                   help="global search over the reports of level N (static); -1 = query.global_level, "
                        "or the deepest level (default: dynamic selection from the root)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of streaming")
    p.add_argument("--db", metavar="FILE", type=path_arg, help=f"index database (default: {DB_WITH_DIR})")
    p.add_argument("--config", metavar="FILE", type=path_arg, help=f"settings file (default: {CONFIG_DEFAULT})")
    p.add_argument("--api-base", metavar="URL",
                   help="OpenAI-compatible endpoint (overrides settings); \"\" answers without a model")
    p.add_argument("--no-stream", action="store_true", help="print the answer when it is complete")
    p.add_argument("--fresh", action="store_true",
                   help="ask the model again instead of answering from its cached answers (which "
                        "the new ones replace): for an answer a passing fault spoiled")
    p.set_defaults(func=cmd_ask)


def cmd_ask(args: argparse.Namespace) -> int:
    from streamrag.cli import db_for_reading, reading_settings
    from streamrag.query import ask, missing_note

    settings = reading_settings(args)
    db = db_for_reading(args, settings)
    stream = not args.json and not args.no_stream
    # Document text reaches the terminal through the answer, the footer and status lines: it
    # must not drive the terminal (colours, titles, cursor moves), so escapes are dropped there.
    terminal = TerminalText()
    line_open = [False]   # what was streamed so far ends inside a line
    held = [""]   # a citation still open ("[E:ent-3b"): shown once it closes

    def write(text: str) -> None:
        if text:
            line_open[0] = not text.endswith("\n")
        sys.stdout.write(text)

    def on_delta(piece: str) -> None:
        text = held[0] + terminal.feed(piece)
        cut = citations.open_citation_at(text)
        held[0] = text[cut:]
        write(text[:cut])
        sys.stdout.flush()

    def on_status(message: str) -> None:
        if not args.json:
            print(f"streamrag: {terminal_text(message)}", file=sys.stderr, flush=True)

    try:
        answer = ask(args.question, settings, db, mode=args.mode, level=args.level,
                     on_delta=on_delta if stream else None, on_status=on_status, sigterm=True,
                     fresh=args.fresh)
    except BaseException:   # (Ctrl-C, an error): its line does not go on the answer's last one
        if line_open[0]:
            sys.stdout.write("\n")
            sys.stdout.flush()
        raise
    # Read once the answer is made: a version published meanwhile holds what it had queued.
    updating = update_under_way(db)
    if args.json:
        # (\u escapes where the output cannot take UTF-8: the CLI's escaping of what it cannot
        # encode would make the JSON invalid; and of a model's controls on any terminal)
        utf8 = (getattr(sys.stdout, "encoding", "") or "").lower().replace("-", "") == "utf8"
        print(json_line({**answer.to_json(), "updating": updating}, ascii=not utf8))
        return 0
    if stream:
        rest = held[0] + terminal.flush()
        if answer.cut_off:   # the length limit cut a citation in two: it names nothing
            rest = citations.without_open_citation(rest)
        write(rest)
        if line_open[0]:
            sys.stdout.write("\n")
    else:   # (streamed, the note came first through on_delta)
        note = missing_note(answer)
        print(terminal_text(f"{note}\n\n{answer.text}" if note else answer.text))
    print(terminal_text(format_footer(answer)))
    if updating is not None:
        on_status(updating_said(updating, answer.version))
    return 0


def updating_said(updating: dict, version: int) -> str:
    """The status line of an answer read while a writer updates the index (``update_under_way``):
    its version lacks the changes queued (during a burst, "Nothing in the index mentions ..." of
    a name the files being extracted held, without a word of them)."""
    who = f"streamrag {updating['command']} (pid {updating['pid']})" if "pid" in updating else "a writer"
    since = time.strftime("%H:%M:%S", time.localtime(updating["since"]))
    files = f" of {counted(updating['files'], 'changed file')}" if updating["files"] else ""
    return (f"the index is being updated: {who} began an update{files} at {since}; this answer is "
            f"from version {version}, without it")


# The documents the footer lists, one line each; --json gives them all.
FOOTER_DOCUMENTS = 20


def format_footer(answer: Answer) -> str:
    """What follows an answer on the terminal: its documents, dropped citations, mode and cost."""
    lines = [""]
    if answer.documents:
        # An answer that cites nothing is not shown as resting on everything it was given.
        lines.append("Documents:" if answer.citations or answer.extractive
                     else "Documents it was given (the answer cites none of them):")
        lines += [f"  {shown(p)}" for p in answer.documents[:FOOTER_DOCUMENTS]]  # one line each
        if len(answer.documents) > FOOTER_DOCUMENTS:
            lines.append(f"  ... and {len(answer.documents) - FOOTER_DOCUMENTS} more (see --json)")
    if answer.cut_off:
        lines.append("The answer was cut off at query.answer_max_tokens; raise it for a longer one.")
    if answer.unresolved:
        lines.append(f"Dropped {counted(len(answer.unresolved), 'citation')} that "
                     f"{'names' if len(answer.unresolved) == 1 else 'name'} nothing the answer was given: "
                     + " ".join(answer.unresolved))
    how = "no search" if answer.search == "none" else answer.search.replace("_", " ") + " search"
    if answer.level is not None:
        how += f" at level {answer.level}"
    elif answer.details.get("communities") == 0:
        how += " (the index has no communities)"
    if answer.auto_choice and answer.search != "none":
        how += f", chosen automatically: {answer.auto_reason}"
    u = answer.llm
    # (a cached answer's "1 LLM call, 0 prompt + 0 completion tokens, 1 from cache" read as a
    # call made and paid nothing; --json keeps the counts)
    cost = ("no LLM calls" if not u.get("calls") else
            "answered from the cache" + (f" ({u['calls']} answers)" if u["calls"] > 1 else "") + ", no LLM call"
            if u.get("cached") == u["calls"] else
            f"{counted(u['calls'], 'LLM call')}, {u['prompt_tokens']:,} prompt + {u['completion_tokens']:,} "
            f"completion tokens" + (f", {u['cached']} from cache" if u.get("cached") else ""))
    lines.append(f"[{how}; {'extractive, ' if answer.extractive else ''}{cost}]")
    return "\n".join(lines)
