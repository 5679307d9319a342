"""``streamrag demo``: the whole method on a shipped public-domain sample, with no LLM.

Indexes Dickens' *A Christmas Carol* (five staves) with the offline NLP extractor, shows what
was built (entities, communities, top reports) and answers one global and one local question
extractively. Nothing is needed but the package: no API key, no network.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import sqlite3
import tempfile
import time
from pathlib import Path

import anyio

from streamrag.assets import asset_dir
from streamrag.config import load_settings
from streamrag.errors import StreamragError
from streamrag.signals import until_sigterm
from streamrag.terminal import shell_word, shown, terminal_text
from streamrag.store import Store, index_files, one_writer, root_and_paths, run_commands
from streamrag.words import counted

GLOBAL_QUESTION = "What are the main themes of this story?"
LOCAL_QUESTION = "Who is Bob Cratchit and how is he connected to Scrooge?"


def sample_dir() -> Path:
    return asset_dir("data") / "sample" / "christmas_carol"


# What a file manager leaves in any folder it shows (macOS Finder, Windows Explorer): no file of
# the user's (a new folder opened in Finder was refused as holding ".DS_Store").
OS_LITTER = frozenset({".DS_Store", "Thumbs.db", "desktop.ini"})

# How ``not_the_demos`` names an index.db in the folder that no demo built.
NOT_A_DEMOS_INDEX = "index.db (not a demo's index)"


def _staves() -> set[str]:
    return {p.name for p in sample_dir().iterdir() if p.suffix != ".md"}


def is_demos_index(db: Path) -> bool:
    """Whether the index at ``db`` is one an earlier demo built: of a folder named
    christmas_carol (the demo's copy of the sample, wherever the demo's folder has moved since),
    holding none but the sample's files. An index of the user's (`cp ~/notes.db d/index.db`) was
    taken for the demo's and written into; one that cannot be opened is no demo's either.
    Nothing published yet, it is a demo's when no other command ran in it (a first demo stopped
    early): `index notes --db d/index.db` stopped before its first publish (the endpoint down)
    left an index the demo took for its own and wrote the sample into, where the user's run
    after the fix was to go on with its finished work."""
    try:   # (not through Store: it upgraded an older index of the user's, then refused it)
        root, paths = root_and_paths(db)
        if root is None:
            return not paths and run_commands(db) <= {"demo"}
    except sqlite3.Error:
        return False
    return Path(root).name == "christmas_carol" and set(paths) <= _staves()


def not_the_demos(folder: Path) -> list[str]:
    """The names in ``folder`` an earlier demo did not put there (sorted): anything but the
    sample's folder with the sample's files and the index's own files, a demo's index
    (``is_demos_index``), and what a file manager leaves (``OS_LITTER``). ``demo --dir ~/notes``
    put both into the notes, and the next ``index ~/notes`` took the five staves in as notes."""
    db = folder / "index.db"
    own = {"christmas_carol", *OS_LITTER, *(p.name for p in index_files(db))}
    staves = _staves() | OS_LITTER
    others = [p.name for p in folder.iterdir() if p.name not in own]
    if db.exists() and not (db.is_file() and is_demos_index(db)):
        others.append(NOT_A_DEMOS_INDEX)
    corpus = folder / "christmas_carol"
    if corpus.is_dir() and not corpus.is_symlink():
        others += [f"christmas_carol/{p.name}" for p in corpus.iterdir() if p.name not in staves]
    elif corpus.exists() or corpus.is_symlink():
        others.append("christmas_carol")
    return sorted(others)


def _refusal(others: list[str]) -> str:
    """What is wrong with a folder holding ``others`` (``not_the_demos``), said as it is: the
    demo writes its index into the index.db there (not "beside" it, as was said), and puts its
    sample beside the rest."""
    rest = [name for name in others if name != NOT_A_DEMOS_INDEX]
    listed = ", ".join(map(shown, rest[:3])) + (f" and {len(rest) - 3} more" if len(rest) > 3 else "")
    if NOT_A_DEMOS_INDEX not in others:
        return f"holds files of its own ({listed}), which the sample and its index would be put beside"
    index = "holds an index.db that is not a demo's index, which the demo would write its own index into"
    return index + (f", and other files of its own ({listed}), which the sample would be put beside"
                    if rest else "")


def cmd_demo(args: argparse.Namespace) -> int:
    # (loaded here, not with the module: a test reading is_demos_index needs no pipeline)
    from streamrag.ask_command import format_footer
    from streamrag.pipeline import sync
    from streamrag.query import ask

    started = time.monotonic()
    answer_settings = load_settings(None, env={}, overrides={"index": {"extractor": "nlp"},
                                                              "llm": {"api_base": args.api_base or ""}},
                                    override_names={"llm.api_base": "--api-base"})
    keep = args.dir is not None
    if keep and Path(args.dir).exists() and not Path(args.dir).is_dir():
        raise StreamragError(f"--dir {shown(args.dir)}: not a folder; give a folder for the sample and its "
                             "index (it is created if missing), or leave --dir out")
    if keep and Path(args.dir).is_dir():
        try:
            others = not_the_demos(Path(args.dir))
        except OSError as e:
            raise StreamragError(f"--dir {shown(args.dir)}: cannot read the folder ({e.strerror or e}); give a "
                                 "new or empty folder you can write to, or leave --dir out") from None
        if others:
            raise StreamragError(f"--dir {shown(args.dir)}: {_refusal(others)}; give a new or empty folder (or one "
                                 "an earlier demo made), or leave --dir out")
    work = Path(args.dir) if keep else Path(tempfile.mkdtemp(prefix="streamrag-demo-"))
    try:
        corpus = work / "christmas_carol"
        if not corpus.exists():
            try:
                shutil.copytree(sample_dir(), corpus, ignore=shutil.ignore_patterns("*.md"))
            except OSError as e:
                raise StreamragError(f"--dir {shown(args.dir)}: cannot copy the sample there "
                                     f"({e.strerror or e}); give a folder you can write to") from None
        db = work / "index.db"
        settings = load_settings(None, env={}, overrides={"index": {"extractor": "nlp"}})
        # (with --json, the tour goes to stderr, for a human watching: stdout is the one object)
        say = lambda text="": print(text, flush=True, file=sys.stderr if args.json else sys.stdout)  # noqa: E731
        say(f"streamrag demo: indexing A Christmas Carol ({len(list(corpus.glob('*.txt')))} staves) "
            "offline, with no LLM ...")
        with one_writer(db, f"streamrag demo --dir {shell_word(work)}"):   # (a watch may keep that index)
            result = anyio.run(until_sigterm, lambda: sync([corpus], settings, db, root=corpus, command="demo"))
        say(f"Built in {result.wall_s:.1f} s: {result.documents} documents, {result.chunks} chunks, "
            f"{result.entities} entities, {result.relationships} relationships, "
            f"{result.communities} communities with reports.")
        built = {"documents": result.documents, "chunks": result.chunks, "entities": result.entities,
                 "relationships": result.relationships, "communities": result.communities}
        answers = []
        store = Store(db, readonly=True)
        try:
            say("\nMost connected entities:")
            for r in store.query("SELECT name, type, degree, mentions FROM entities "
                                 "ORDER BY degree DESC, mentions DESC, name LIMIT 8"):
                say(f"  {r['name']:<28} {r['type']:<13} {r['degree']:>3} links, named in {counted(r['mentions'], 'chunk')}")
            say("\nLargest communities and their reports:")
            for r in store.query(
                    "SELECT c.id, c.size, r.title, r.summary FROM communities c JOIN reports r "
                    "ON r.key = c.report_key WHERE c.level = 0 ORDER BY c.size DESC, c.id LIMIT 4"):
                summary = " ".join(r["summary"].split()[:40])
                say(f"  [{r['id']}] {r['title']} ({counted(r['size'], 'entity')})\n      {summary}")
        finally:
            store.close()
        for question, mode in ((GLOBAL_QUESTION, "global"), (LOCAL_QUESTION, "local")):
            say(f"\n$ streamrag ask --mode {mode} \"{question}\"")
            answer = ask(question, answer_settings, db, mode=mode, sigterm=True)
            answers.append(answer.to_json())
            say(terminal_text(answer.text))
            say(terminal_text(format_footer(answer)))
        say(f"\nDemo finished in {time.monotonic() - started:.1f} s.")
        if keep:
            say(f"The index is in {shown(db)}; try: streamrag ask --db {shell_word(db)} \"Who is Marley?\"")
        else:
            say("Index your own folder with: streamrag index DIR   (then: streamrag ask \"...\")")
        if args.json:   # (db: null when the folder is a temporary one, removed as the demo ends;
            # else as index and status --json give it, a link in its path kept)
            print(json.dumps({"db": os.path.abspath(db) if keep else None, **built, "answers": answers,
                              "wall_s": round(time.monotonic() - started, 3)}, default=str))
        return 0
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
